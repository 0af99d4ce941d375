"""`sapa audit`'s verdict line, decisive numbers and readings agree with the rule's label, with or without j."""

from __future__ import annotations

import re

import pytest

from sapa.commands.audit_activation import run_audit, text_report
from sapa.rules.like_softmax import A, TOL
from sapa.theory.activation_audit import model_spec, parse_activation

SPEC = model_spec("iid", 768, 64)
PEAK_BELOW_N_MIN = ("sigmoid(x/8 - log(N))", "sigmoid(x/8 - log(N) - Abs(i - j)/8)")


@pytest.fixture(scope="module")
def audit():
    """``audit(expr, n_min)`` → (result, text), each audit computed once per module (the tests only read them)."""
    import functools

    @functools.lru_cache(maxsize=None)
    def _audit(expr, n_min):
        out = run_audit(parse_activation(expr, "none", "none"), SPEC, 196, sizes=False, n_min=n_min)
        return out, text_report(out)

    return _audit


def _line(text, start):
    return next(ln for ln in text.splitlines() if ln.strip().startswith(start))


@pytest.mark.parametrize("n_min,verdict", [pytest.param(None, "HOLDS", marks=pytest.mark.slow),  # ~5 s; the n_min
                                           (2, "HOLDS_IN_REGIME")])  # case runs the same comparison by default
def test_same_peak_below_n_min_same_verdict_with_or_without_j(audit, n_min, verdict):
    outs = [audit(e, n_min)[0] for e in PEAK_BELOW_N_MIN]
    assert [o["verdict"] for o in outs] == [verdict, verdict]
    assert all(o["readings"]["rate"]["rule"] == "growth-upper-exact" for o in outs)  # one rule for both


@pytest.mark.parametrize("expr", PEAK_BELOW_N_MIN)
def test_holds_prints_no_decisive_number_beyond_its_limit_unless_marked_not_judged(audit, expr):
    out, text = audit(expr, None)
    assert out["verdict"] == "HOLDS"
    decisive = _line(text, "decisive numbers:")
    judged, _, context = decisive.partition("; not judged:")
    exps = [float(x) for x in re.findall(r"exponent[^:]*?:? (-?[\d.]+(?:e[-+]\d+)?) \(limit ½", judged)]
    assert exps and all(e <= A + TOL for e in exps)
    assert float(re.search(r"peak exponent ([\d.]+)", context).group(1)) > A + TOL  # the peak, said apart
    assert "below N_min = 16" in context


@pytest.mark.parametrize("expr", PEAK_BELOW_N_MIN)
def test_holds_in_regime_names_its_regime_everywhere(audit, expr):
    out, text = audit(expr, 2)
    regime = out["readings"]["rate"]["regime"]
    assert re.fullmatch(r"N ≥ [\d.]+", regime)
    for start in ("verdict:", "decisive numbers:", "rate reading:"):
        assert regime in _line(text, start)
    assert "holds on rate and size" not in text


def test_fails_names_the_reading_that_failed(audit):
    out, text = audit("x**3/sqrt(N)", None)
    assert out["verdict"] == "FAILS" and out["size_verdict"] == "FAILS"
    assert "(fails on size)" in _line(text, "verdict:")
