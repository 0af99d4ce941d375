"""φ(x) = scale(N, i)·ψ(x) or a row-normalised ψ: every attention activation family sapa knows, in one table.

arXiv 2410.18613 replaces row softmax by x^p/√N (Cor 4.3, 4.5); its training study and the reviews add other scale
rules (x^p/α*, x^p, x^p/N, x³/√i), and three other papers propose their own (ReLU(x)/N, sigmoid(x − log N), a
row-normalised x⁴). One :class:`Family` per activation: its id (file-safe, as the training arms are named), its
sympy expression in the logit ``x`` (and ``N``, the row ``i``), its one display label, its scale rule, the masks
it is defined under, the paper it comes from, and how the exact kernels and the figures use it. The audit
(:func:`sapa.theory.activation_audit.parse_activation` of :attr:`Family.expr`), the exact norm kernels (:data:`KERNEL_KINDS`), the
ledger's other-papers entries, the figures' labels and the test case table (``tests/cases.py``) read this table;
adding a family is one row here plus its tests (docs/extending.md).

>>> FAMILIES["x3_sqrtN"].label, FAMILIES["x3_sqrtN"].expr
('x³/√N', 'x**3/sqrt(N)')
>>> FAMILIES["relu_N"].at_logit("x/8")
'Max(x/8, 0)/N'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

PAPER = "Saratchandran et al. 2024 (arXiv 2410.18613)"
SOFTMAX_SOURCE = "Vaswani et al. 2017 (arXiv 1706.03762), the paper's baseline"

# The scale rules, one constant per code. The codes are stored (training runs' "scale" column, sweep cells'
# "scale_policy", ledger evidence keys): their spelling never changes.
SOFTMAX, TEMPERATURE, INV_SQRT_D = "softmax", "temperature", "inv_sqrt_d"
INV_SQRT_N, INV_N, INV_SQRT_I, INV_I, FIXED = "inv_sqrt_n", "inv_n", "inv_sqrt_i", "inv_i", "fixed"
CONST, NONE, ALPHA, DOSE, BIAS_LOG_N, ROW_SUM = "const", "none", "alpha", "dose", "bias_log_n", "row_sum"
# code → what the rule divides or adds.
SCALE_RULES: dict[str, str] = {
    SOFTMAX: "row softmax: each row sums to 1 (‖·‖_F ≤ √N, Thm 4.1)",
    INV_SQRT_N: "1/√N",
    ALPHA: "1/α*, α* tuned at the smallest N and then held fixed (like the paper's x/16)",
    CONST: "a fixed constant",
    NONE: "none (coefficient 1)",
    INV_N: "1/N",
    INV_SQRT_I: "1/√i, row i's effective length under a causal mask",
    BIAS_LOG_N: "the bias −log N inside the nonlinearity",
    ROW_SUM: "each row divided by its sum",
    DOSE: "1/c over a log grid of c at one N (the dose-response of norm-vs-accuracy)",
    TEMPERATURE: "softmax(S/τ) over a grid of τ at one N (the dose-response of norm-vs-accuracy)",
    INV_SQRT_D: "1/√d inside softmax (its default temperature)",
    INV_I: "1/i, row i's (the shape of softmax's typical causal rows)",
    FIXED: "1/√N_train, frozen at a training length",
}
ALIASES = {"dynamic_causal": INV_SQRT_I}  # the sweep's historical name of 1/√i
PER_ROW = (INV_SQRT_I, INV_I)  # rules whose factor depends on the row i
GRID_RULES = (ALPHA, DOSE, TEMPERATURE)  # rules whose factor 1/value comes from a grid (α, c or τ)
_UNIT = (SOFTMAX, NONE, BIAS_LOG_N, ROW_SUM)  # factor 1: the scale is the normalisation or sits inside φ
MASKS = ("none", "causal")
NORMALIZE = ("none", "row")


@dataclass(frozen=True)
class Family:
    """One attention activation family φ, applied to the logit x = S_ij.

    Attributes:
      id: file-safe name, as the training arms and figure data use it (``x3_sqrtN``).
      expr: sympy text in ``x`` (and ``N``, ``i``; free parameters listed in ``params``), as ``sapa audit`` reads it.
      label: the one display name (``x³/√N``), in the ledger, the figures and the reports.
      rule: the scale rule's code, a key of :data:`SCALE_RULES`; :meth:`coefficient` is its factor at (N, i).
      source: the paper that proposes it.
      masks: the masks it is defined under (``x³/√i`` only makes sense under a causal one).
      normalize: "row" when each row of ψ(S) is divided by its sum (softmax, the normalised x⁴).
      p: the degree of x when φ is c·x^p (None otherwise).
      kernel: the exact kernel kind of :mod:`sapa.empirics.kernels.norms` (``softmax`` or ``poly``), None where only the
        expression kernels apply.
      params: free parameters of ``expr`` other than x, N, i (``alpha``): a value is needed before it is audited.
      compare_logit: the logit the comparative audit figure applies it to (``x/8`` = S/√d at d = 64, ``x`` = S);
        None: not in that figure.
      train: a training arm of the study (:data:`sapa.empirics.training.study_config.ARMS` is built from these rows): the
        exact kernels' families train as the softmax or power ensembles, any other as its expression.
      coef: a number bound at run time that multiplies the rule's factor: c of c·x^p, or the inverse temperature τ
        inside softmax(τ·S) (1 in the table; :func:`power`, :meth:`with_coef`).

    >>> f = FAMILIES["x3_sqrtN"]
    >>> f.coefficient(16), f.kernel, f.p
    (0.25, 'poly', 3)
    >>> FAMILIES["x_16"].coefficient(1024), FAMILIES["x3_sqrti"].coefficient(4, i=2)
    (0.0625, 0.7071067811865475)
    """

    id: str
    expr: str
    label: str
    rule: str
    source: str
    masks: tuple[str, ...] = MASKS
    normalize: str = "none"
    p: int | None = None
    kernel: str | None = None
    params: tuple[str, ...] = ()
    compare_logit: str | None = None
    train: bool = False
    coef: float = 1.0

    def __post_init__(self) -> None:
        if self.rule not in SCALE_RULES:
            raise ValueError(f"{self.id}: unknown scale rule {self.rule!r}; one of {tuple(SCALE_RULES)}")
        if not (isinstance(self.coef, (int, float)) and math.isfinite(self.coef) and self.coef > 0):
            from sapa.common.validate import InputError

            raise InputError(f"{self.id}: coef must be a finite number > 0, got {self.coef!r}")
        if not self.masks or not set(self.masks) <= set(MASKS):
            raise ValueError(f"{self.id}: masks must be a non-empty subset of {MASKS}, got {self.masks}")
        if self.normalize not in NORMALIZE:
            raise ValueError(f"{self.id}: normalize must be one of {NORMALIZE}, got {self.normalize!r}")
        if self.kernel not in (None, "softmax", "poly") or (self.kernel == "poly") != (self.p is not None):
            raise ValueError(f"{self.id}: kernel 'poly' goes with a degree p, 'softmax' and None without one")

    @property
    def scale_words(self) -> str:
        """The scale rule in words (:data:`SCALE_RULES`)."""
        return SCALE_RULES[self.rule]

    @property
    def const(self) -> float | None:
        """c of a rule-"const" or rule-"none" power read off its expression (x/16 → 0.0625, x³ → 1.0); else None."""
        if self.rule not in (CONST, NONE) or self.p is None:
            return None
        return _const_of(self.expr, self.p)

    @property
    def mask(self) -> str:
        """The mask it runs under by default: none where it is defined without one, else its first (causal)."""
        return NONE if NONE in self.masks else self.masks[0]

    @property
    def per_row(self) -> bool:
        """Whether the scale depends on the row i (1/√i, 1/i)."""
        return self.rule in PER_ROW

    def coefficient(self, N, i=None, **params) -> float | np.ndarray:
        """The rule's factor at length N (row i for the per-row rules), times :attr:`coef`: :func:`scale_factor`.

        ``params``: the rule's parameter (``alpha``, ``c`` or ``tau`` for the grid rules, ``d``, ``N_train``).
        """
        if self.rule in GRID_RULES and self.params and self.params[0] in params:
            params["value"] = params.pop(self.params[0])  # α, c or τ: the grid value
        if self.rule == CONST:
            params.setdefault("c", self.const)
        k = scale_factor(self.rule, N, i, **params)
        return k if self.coef == 1.0 else self.coef * k

    def row_scale(self, N: int, **params) -> np.ndarray:
        """(N,) float64 factors c_i, i = 1 … N (the global factor repeated for a rule that has no row)."""
        i = np.arange(1, _positive_int("N", N) + 1, dtype=np.float64)
        return self.coefficient(N, i, **params) if self.per_row else np.full(N, self.coefficient(N, **params))

    def with_coef(self, coef: float) -> Family:
        """This family with the run-time number ``coef`` bound (c of c·x^p, τ inside softmax)."""
        return replace(self, coef=float(coef))

    def apply(self, S, *, mask: str = "none", **params):
        """φ(S) at N = S.shape[-1]: numpy or torch logits S (..., N, N) → the same type and shape.

        Exact-kernel families only (``kernel`` softmax or poly): softmax(coef·τ⁻¹·S) row-wise, or c·S^p with c the
        rule's factor (per row: row i times c_i), masked entries (j > i under ``mask="causal"``) exactly 0.
        """
        if self.kernel is None:
            from sapa.common.validate import InputError

            raise InputError(f"{self.id} ({self.label}) has no exact kernel: evaluate its expression "
                             "(sapa.theory.activation.parse_activation)")
        if mask not in MASKS:
            raise ValueError(f"mask must be one of {MASKS}, got {mask!r}")
        N = S.shape[-1]
        if type(S).__module__.startswith("torch"):  # torch: the reference models' op order
            torch = _torch()
            vis = torch.ones(N, N, dtype=torch.bool, device=S.device).tril() if mask == "causal" else None
            if self.kernel == "softmax":
                t = S * self.coefficient(N, **params)
                return (t if vis is None else t.masked_fill(~vis, float("-inf"))).softmax(-1)
            P = S.pow(self.p) if self.p > 1 else S
            i = torch.arange(1, N + 1, dtype=S.dtype, device=S.device)  # (N,) rows, c_i in S's dtype as the models do
            P = P * (self.coefficient(N, i, **params)[:, None] if self.per_row else self.coefficient(N, **params))
            return P if vis is None else P.masked_fill(~vis, 0.0)
        S = np.asarray(S)
        vis = np.tri(N, dtype=bool) if mask == "causal" else np.ones((N, N), dtype=bool)
        if self.kernel == "softmax":
            t = np.where(vis, S * self.coefficient(N, **params), -np.inf)
            e = np.exp(t - t.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)
        P = (S ** self.p if self.p > 1 else S)
        P = P * (self.row_scale(N, **params)[:, None] if self.per_row else self.coefficient(N, **params))
        return np.where(vis, P, 0.0)

    def at_logit(self, logit: str) -> str:
        """``expr`` with the logit x replaced by ``logit`` (e.g. ``x/8`` for S/√d at d = 64), as text.

        x becomes ``(logit)`` where an operator binds tighter than the logit's own (a power, a division before it),
        else ``logit`` as written: ``x**4`` → ``(x/8)**4``, ``Max(x, 0)/N`` → ``Max(x/8, 0)/N``.
        """
        if logit == "x":
            return self.expr

        def put(m: re.Match) -> str:
            before, after = self.expr[: m.start()].rstrip(), self.expr[m.end():].lstrip()
            tight = after.startswith("**") or after.startswith("^") or before.endswith("/") or before.endswith("**")
            return f"({logit})" if tight else logit

        return re.sub(r"(?<![A-Za-z_0-9])x(?![A-Za-z_0-9])", put, self.expr)


def _torch():
    import torch

    return torch


def _positive_int(name: str, v) -> int:
    from sapa.common.validate import positive_int

    return positive_int(name, v)


@lru_cache(maxsize=None)
def _const_of(expr: str, p: int) -> float:
    import sympy as sp

    x = sp.Symbol("x")
    return float(sp.simplify(sp.sympify(expr, locals={"x": x}) / x ** p))


def canonical_rule(rule: str) -> str:
    """The one name of a scale rule (``dynamic_causal`` → ``inv_sqrt_i``); InputError for an unknown one."""
    from sapa.common.validate import choice

    return choice("scale rule", ALIASES.get(rule, rule), tuple(SCALE_RULES))


def _need(rule: str, name: str, v):
    if v is None:
        from sapa.common.validate import InputError

        raise InputError(f"scale rule {rule!r} needs {name}")
    return v


def scale_factor(rule: str, N, i=None, *, c: float | None = None, d: int | None = None, N_train: int | None = None,
                 value: float | None = None) -> float | np.ndarray:
    """c(N, i) of φ = c·ψ under ``rule``: the one scale arithmetic of the toolkit (sweep, training, figures, kernels).

    Args:
      rule: a code of :data:`SCALE_RULES` (or an alias).
      N: length, an int > 0, or an array of real lengths > 0 (exact curves between grid sizes; global rules only).
      i: the row (1-based), int or array, for the per-row rules (1/√i, 1/i); without it their row vector (N,).
      c: the constant of ``const``; d: the head size of ``inv_sqrt_d``; N_train: the length of ``fixed``;
        value: α, c or τ of the grid rules (factor 1/value).

    The arithmetic is the stored numbers': ``1.0 / math.sqrt(N)`` (array N: ``1.0 / np.sqrt(N)``), ``1 / N``,
    ``1.0 / np.sqrt(i)`` in float64 (never ``N**-0.5``, which can differ in the last bit).

    >>> scale_factor("inv_sqrt_n", 16), scale_factor("const", 16, c=0.0625), scale_factor("inv_sqrt_d", 16, d=64)
    (0.25, 0.0625, 0.125)
    >>> scale_factor("inv_sqrt_n", np.array([4.0, 6.25])).tolist(), scale_factor("inv_sqrt_i", 4).tolist()
    ([0.5, 0.4], [1.0, 0.7071067811865475, 0.5773502691896258, 0.5])
    """
    from sapa.common.validate import InputError

    rule = canonical_rule(rule)
    if rule in PER_ROW:
        if i is None:
            i = np.arange(1, _positive_int("N", N) + 1, dtype=np.float64)
        if isinstance(i, np.ndarray):
            i = i.astype(np.float64)
            return 1.0 / np.sqrt(i) if rule == INV_SQRT_I else 1.0 / i
        if type(i).__module__.startswith("torch"):  # in the tensor's own dtype, as the torch models compute it
            return i.rsqrt() if rule == INV_SQRT_I else 1 / i
        return 1.0 / math.sqrt(i) if rule == INV_SQRT_I else 1 / i
    if isinstance(N, np.ndarray):  # (...) real lengths → (...) factors
        Ns = N.astype(np.float64)
        if not np.all(np.isfinite(Ns) & (Ns > 0)):
            raise InputError("lengths N must be finite and > 0")
        if rule == INV_SQRT_N:
            return 1.0 / np.sqrt(Ns)
        if rule == INV_N:
            return 1.0 / Ns
        return np.full(Ns.shape, scale_factor(rule, 1, c=c, d=d, N_train=N_train, value=value))
    if rule == INV_SQRT_N:
        return 1.0 / math.sqrt(_positive_int("N", N))
    if rule == INV_N:
        return 1 / _positive_int("N", N)
    if rule == CONST:
        return float(_need(rule, "c", c))
    if rule == INV_SQRT_D:
        return 1.0 / math.sqrt(_positive_int("d", _need(rule, "d", d)))
    if rule == FIXED:
        return 1.0 / math.sqrt(_positive_int("N_train", _need(rule, "N_train", N_train)))
    if rule in GRID_RULES:
        return 1 / _need(rule, "a value (alpha, c or tau)", value)
    return 1.0  # _UNIT: softmax, none, bias_log_n, row_sum


def row_factors(rule: str, N: int, **kw) -> np.ndarray:
    """(N,) float64 c_i, i = 1 … N, of ``rule`` at length N (:func:`scale_factor`; a global rule's c repeated).

    >>> row_factors("inv_sqrt_n", 4).tolist()
    [0.5, 0.5, 0.5, 0.5]
    """
    N = _positive_int("N", N)
    if canonical_rule(rule) in PER_ROW:
        return scale_factor(rule, N, np.arange(1, N + 1, dtype=np.float64), **kw)
    return np.full(N, scale_factor(rule, N, **kw))


def _poly(id: str, p: int, rule: str, divisor: str, label_divisor: str, **kw) -> Family:
    """c·x^p with the divisor ``divisor`` (sympy) shown as ``label_divisor``: x³/√N, x/α*, x, …"""
    power, shown = ("x", "x") if p == 1 else (f"x**{p}", "x" + "⁰¹²³⁴⁵⁶⁷⁸⁹"[p] if p < 10 else f"x^{p}")
    expr = power if not divisor else f"{power}/{divisor}"
    return Family(id, expr, shown + (f"/{label_divisor}" if label_divisor else ""), rule, kw.pop("source", PAPER),
                  p=p, kernel="poly", **kw)


def power(p: int, coef: float = 1.0) -> Family:
    """coef·x^p as a family (rule "none"): a degree without a row of the table (``sapa norms --p 5``), or a power with
    a coefficient already resolved (the sweep's c at N).

    >>> power(3, 0.5).expr, power(3, 0.5).coefficient(10)
    ('x**3', 0.5)
    """
    p = _positive_int("p", p)
    return _poly(f"x{p}" if p > 1 else "x", p, NONE, "", "", coef=coef)


def softmax(tau: float = 1.0) -> Family:
    """Row softmax with the inverse temperature ``tau`` inside, softmax(τ·S), as a family (the table's row, bound)."""
    return FAMILIES[SOFTMAX].with_coef(tau)


FAMILY_TABLE: tuple[Family, ...] = (
    Family("softmax", "exp(x)", "softmax", "softmax", SOFTMAX_SOURCE, normalize="row", kernel="softmax",
           compare_logit="x/8", train=True),
    _poly("x_sqrtN", 1, INV_SQRT_N, "sqrt(N)", "√N", compare_logit="x", train=True),
    _poly("x3_sqrtN", 3, INV_SQRT_N, "sqrt(N)", "√N", compare_logit="x", train=True),
    _poly("x_alpha", 1, ALPHA, "alpha", "α*", params=("alpha",), train=True),
    _poly("x3_alpha", 3, ALPHA, "alpha", "α*", params=("alpha",), train=True),
    _poly("x_16", 1, CONST, "16", "16"),
    _poly("x", 1, NONE, "", "", train=True),
    _poly("x3", 3, NONE, "", "", train=True),
    _poly("x_N", 1, INV_N, "N", "N", train=True),
    _poly("x3_N", 3, INV_N, "N", "N", train=True),
    _poly("x3_sqrti", 3, INV_SQRT_I, "sqrt(i)", "√i", masks=("causal",), train=True),
    _poly("x_dose", 1, DOSE, "c", "c", params=("c",), train=True),
    _poly("x3_dose", 3, DOSE, "c", "c", params=("c",), train=True),
    Family("softmax_tau", "exp(x/tau)", "softmax(S/τ)", TEMPERATURE, SOFTMAX_SOURCE, normalize="row",
           kernel="softmax", params=("tau",), train=True),
    Family("relu_N", "Max(x, 0)/N", "ReLU(x)/N", INV_N, "Wortsman et al. 2023 (arXiv 2309.08586)",
           compare_logit="x/8", train=True),
    Family("sigmoid_logN", "1/(1 + exp(-(x - log(N))))", "sigmoid(x − log N)", BIAS_LOG_N,
           "Ramapuram et al. 2024 (arXiv 2409.04431)", compare_logit="x/8"),
    Family("poly4_row", "x**4", "row-normalised x⁴", ROW_SUM, "Kacham et al., PolySketchFormer (arXiv 2310.01655)",
           normalize="row", compare_logit="x/8"),
)
FAMILIES: dict[str, Family] = {f.id: f for f in FAMILY_TABLE}
# The exact kernels' kinds (sapa.empirics.kernels.norms.KINDS), in table order.
KERNEL_KINDS: tuple[str, ...] = tuple(dict.fromkeys(f.kernel for f in FAMILY_TABLE if f.kernel))
# The families of the comparative audit figure (figures/audit_compare.py), in table order.
COMPARED: tuple[Family, ...] = tuple(f for f in FAMILY_TABLE if f.compare_logit is not None)


def family(id: str) -> Family:
    """The family called ``id`` (KeyError naming the known ids otherwise)."""
    try:
        return FAMILIES[id]
    except KeyError:
        raise KeyError(f"unknown activation family {id!r}; known: {', '.join(FAMILIES)}") from None


def label_of(expr_or_id: str, normalize: str = "none") -> str:
    """The display label of a family given by id or by its expression (``x^3/sqrt(N)`` too) under ``normalize``;
    else the text itself, marked "row-normalised" where it is.

    >>> label_of("x**4"), label_of("x**4", "row"), label_of("tanh(x)", "row")
    ('x**4', 'row-normalised x⁴', 'row-normalised tanh(x)')
    """
    if expr_or_id in FAMILIES:
        return FAMILIES[expr_or_id].label
    key = expr_or_id.replace("^", "**").replace(" ", "")
    for f in FAMILY_TABLE:
        if f.expr.replace(" ", "") == key and f.normalize == normalize and not f.params:
            return f.label
    return expr_or_id if normalize == "none" else f"row-normalised {expr_or_id}"


def row_of(text: str, normalize: str = "none", mask: str = "none", *, id: str | None = None,
           label: str | None = None) -> Family:
    """The family row of ``text``: its table row for a family id, else the expression as an unlisted row (rule
    "none": the scale sits inside φ; no exact kernel) under ``normalize`` and ``mask``, after the checks of
    :func:`resolve` (a free parameter, a normalisation the family lacks: one :class:`InputError`).

    The expression is not parsed here (:func:`sapa.theory.activation.parse_activation` does, where it is evaluated).

    >>> row_of("relu_N") is FAMILIES["relu_N"], row_of("x/(1+Abs(x))").rule, row_of("x**4", "row").normalize
    (True, 'none', 'row')
    """
    expr, normalize, mask = resolve(text, normalize, mask)
    if text in FAMILIES:
        return FAMILIES[text]
    return Family(id or text, expr, label or label_of(text, normalize), NONE, "an expression given at run time",
                  masks=MASKS if mask == NONE else (mask,), normalize=normalize)


def resolve(text: str, normalize: str = "none", mask: str = "none") -> tuple[str, str, str]:
    """(expression, normalize, mask) of ``text``: a family id gives its row's (``sapa audit x3_sqrtN``), anything
    else is an expression and is returned as given.

    A family's own normalisation and mask win over the defaults ("none"); a family with a free parameter (x/α*)
    names it, since the audit needs a number there.
    """
    from sapa.common.validate import InputError

    f = FAMILIES.get(text)
    if f is None:
        return text, normalize, mask
    if f.params:
        raise InputError(f"activation family {f.id} ({f.label}) has the free parameter {', '.join(f.params)}: write "
                         f"its expression {f.expr!r} with a number in its place")
    if normalize != "none" and normalize != f.normalize:
        raise InputError(f"activation family {f.id} ({f.label}) is not row-normalised: ask for it without row "
                         "normalisation, or write its expression")
    return f.expr, f.normalize, mask if mask in f.masks else f.masks[0]


__all__ = ["Family", "FAMILY_TABLE", "FAMILIES", "KERNEL_KINDS", "COMPARED", "SCALE_RULES", "ALIASES", "PER_ROW",
           "GRID_RULES", "MASKS", "PAPER", "SOFTMAX", "TEMPERATURE", "INV_SQRT_D", "INV_SQRT_N", "INV_N", "INV_SQRT_I",
           "INV_I", "FIXED", "CONST", "NONE", "ALPHA", "DOSE", "BIAS_LOG_N", "ROW_SUM", "canonical_rule", "scale_factor", "row_factors",
           "power", "softmax", "family", "label_of", "resolve", "row_of"]
