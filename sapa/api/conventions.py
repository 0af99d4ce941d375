"""The audit under both logit conventions: x = S_ij/√d (the ledger's, as transformers compute it) and x = S_ij.

The headline is the convention ``--logit-scale`` (``logit_scale``) names (default :data:`DEFAULT`, the one the
ledger's size readings use: ``cor4.5-cubic-scaled``, the other papers' entries); the other is audited by the same code
and rule and printed beside it, with the reason when the two verdicts differ. x → x/√d is a change of the activation, not of the rule:
a monomial's norms scale by d^(−p/2) at every N (its exponents are unchanged), a softmax's row sharpens.
"""

from __future__ import annotations

import math

__all__ = ["CONVENTIONS", "DEFAULT", "activations", "audit_both", "difference_words", "logit_substituted", "other",
           "summary"]

CONVENTIONS = ("S/sqrt(d)", "S")
DEFAULT = "S/sqrt(d)"  # the ledger's convention for sizes (sapa.claims.growth_check.size_readings: S/√d first)
WORDS = {"S/sqrt(d)": ("S/√d", "as transformers compute them"), "S": ("S", "the paper's theory")}


def other(scale: str) -> str:
    """The convention that is not ``scale``."""
    return next(c for c in CONVENTIONS if c != scale)


def summary(out: dict) -> dict:
    """The verdict of one convention's audit and the numbers it rests on (``run_audit``'s result, flattened)."""
    rate = out["readings"]["rate"]
    return {"logit_scale": out["logit_scale"], "expression": out["expression"], "verdict": out["verdict"],
            "verdict_why": out["verdict_why"], "rate_verdict": out["rate_verdict"], "size_verdict": out["size_verdict"],
            "constant_vs_softmax": out["constant_vs_softmax"], "size_why": out["readings"]["size"]["why"],
            "rate_why": rate["why"], "judged_sup_exponent": rate.get("judged_sup")}


def logit_substituted(text: str, logit_scale: str, d: int, normalize: str = "none") -> str:
    """The expression in x = S_ij for logits S/√d: x → x/√d substituted (``"S"``: unchanged); ``normalize`` as the
    audit's (an exp(x) is refused unnormalised, accepted row-normalised)."""
    if logit_scale == "S":
        return text
    import sympy as sp

    from sapa.theory.activation_audit import parse_activation

    expr = parse_activation(text, normalize).expr
    xs = [s for s in expr.free_symbols if s.name == "x"]
    return str(expr.subs(xs[0], xs[0] / sp.sqrt(int(d)))) if xs else text


def activations(text: str, normalize: str, mask: str, d: int) -> dict:
    """{convention: the parsed activation in x = S_ij} for ``text`` read under each convention (refusals first,
    before any audit runs)."""
    from sapa.theory.activation_audit import parse_activation

    return {s: parse_activation(logit_substituted(text, s, d, normalize), normalize, mask) for s in CONVENTIONS}


def audit_both(text: str, acts: dict, spec, N: int, scale: str, d: int, run, **kw) -> dict:
    """``run`` (:func:`sapa.api.audit.run_audit`) on ``acts`` (:func:`activations` of ``text``): under
    ``scale`` in full, under the other convention for its verdict; the result carries ``conventions``
    {convention: summary} and ``conventions_differ_because``."""
    outs = {}
    for s in (scale, other(scale)):
        outs[s] = run(acts[s], spec, N, logit_scale=s, expr_as_given=text, sizes=(s == scale), **kw)
    out = outs[scale]
    out["conventions"] = {s: summary(outs[s]) for s in CONVENTIONS}
    out["conventions_differ_because"] = difference_words(out["conventions"], d)
    return out


def difference_words(conv: dict, d: int) -> str | None:
    """Why the two conventions' verdicts differ, from their own numbers (None when they agree)."""
    a, b = conv["S/sqrt(d)"], conv["S"]
    if a["verdict"] == b["verdict"]:
        return None
    parts = [f"the logits S are √d = {math.sqrt(d):.4g}× the logits S/√d"]
    ra, rb = a["constant_vs_softmax"], b["constant_vs_softmax"]
    if all(isinstance(r, (int, float)) and math.isfinite(r) and r > 0 for r in (ra, rb)):
        parts.append(f"‖φ‖/√N is {ra:.4g} under S/√d and {rb:.4g} under S ({rb / ra:.4g}×)")
    for name in ("rate", "size"):
        if a[f"{name}_verdict"] != b[f"{name}_verdict"]:
            parts.append(f"the {name} reading {a[f'{name}_verdict']} under S/√d, {b[f'{name}_verdict']} under S")
    return "; ".join(parts)
