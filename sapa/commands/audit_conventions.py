"""``sapa audit`` under both logit conventions: the lines that print them (the audits: :mod:`sapa.api.conventions`).

``CONVENTIONS``, ``DEFAULT``, ``activations``, ``audit_both``, … are importable from here too, as before.
"""

from __future__ import annotations

import math

from sapa.api.conventions import (CONVENTIONS, DEFAULT, WORDS, activations, audit_both, difference_words,  # noqa: F401
                                  logit_substituted, other, summary)

__all__ = ["CONVENTIONS", "DEFAULT", "activations", "audit_both", "conventions_text", "logit_substituted", "other"]


def conventions_text(out: dict) -> list[str]:
    """The lines that print both conventions' verdicts below the headline (empty when only one was audited)."""
    from sapa.display import key_values

    conv = out.get("conventions")
    if not conv:
        return []
    rows = []
    for s in CONVENTIONS:
        c = conv[s]
        tags = [t for t, on in (("the ledger's", s == DEFAULT), ("headline", s == out["logit_scale"])) if on]
        rows.append((f"logits {WORDS[s][0]} ({', '.join([WORDS[s][1], *tags])})",
                     f"{c['verdict']} — {c['verdict_why']}; ‖φ‖/√N = {_ratio(c['constant_vs_softmax'])} "
                     f"(limit {out['size_factor']:g})"))
    why = out.get("conventions_differ_because")
    rows.append(("why they differ", why) if why else ("the two conventions", "the same verdict under both"))
    return ["", "verdict under both logit conventions (--logit-scale picks the headline)"] + [
        "  " + x for x in key_values(rows)]


def _ratio(r) -> str:
    """‖φ‖/√N in words: significant digits, ∞ for an infinite expectation (None in JSON)."""
    from sapa.display import sig

    return "∞" if r is None or not math.isfinite(r) else sig(r)
