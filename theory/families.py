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

import re
from dataclasses import dataclass

PAPER = "Saratchandran et al. 2024 (arXiv 2410.18613)"
SOFTMAX_SOURCE = "Vaswani et al. 2017 (arXiv 1706.03762), the paper's baseline"

# The scale rules, by code (the training study's codes) → what the rule divides or adds.
SCALE_RULES: dict[str, str] = {
    "softmax": "row softmax: each row sums to 1 (‖·‖_F ≤ √N, Thm 4.1)",
    "inv_sqrt_n": "1/√N",
    "alpha": "1/α*, α* tuned at the smallest N and then held fixed (like the paper's x/16)",
    "const": "a fixed constant",
    "none": "none (coefficient 1)",
    "inv_n": "1/N",
    "inv_sqrt_i": "1/√i, row i's effective length under a causal mask",
    "bias_log_n": "the bias −log N inside the nonlinearity",
    "row_sum": "each row divided by its sum",
    "dose": "1/c over a log grid of c at one N (the dose-response of norm-vs-accuracy)",
    "temperature": "softmax(S/τ) over a grid of τ at one N (the dose-response of norm-vs-accuracy)",
}
MASKS = ("none", "causal")
NORMALIZE = ("none", "row")


@dataclass(frozen=True)
class Family:
    """One attention activation family φ, applied to the logit x = S_ij.

    Attributes:
      id: file-safe name, as the training arms and figure data use it (``x3_sqrtN``).
      expr: sympy text in ``x`` (and ``N``, ``i``; free parameters listed in ``params``), as ``sapa audit`` reads it.
      label: the one display name (``x³/√N``), in the ledger, the figures and the reports.
      scale: the scale rule's code, a key of :data:`SCALE_RULES`.
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
    """

    id: str
    expr: str
    label: str
    scale: str
    source: str
    masks: tuple[str, ...] = MASKS
    normalize: str = "none"
    p: int | None = None
    kernel: str | None = None
    params: tuple[str, ...] = ()
    compare_logit: str | None = None
    train: bool = False

    def __post_init__(self) -> None:
        if self.scale not in SCALE_RULES:
            raise ValueError(f"{self.id}: unknown scale rule {self.scale!r}; one of {tuple(SCALE_RULES)}")
        if not self.masks or not set(self.masks) <= set(MASKS):
            raise ValueError(f"{self.id}: masks must be a non-empty subset of {MASKS}, got {self.masks}")
        if self.normalize not in NORMALIZE:
            raise ValueError(f"{self.id}: normalize must be one of {NORMALIZE}, got {self.normalize!r}")
        if self.kernel not in (None, "softmax", "poly") or (self.kernel == "poly") != (self.p is not None):
            raise ValueError(f"{self.id}: kernel 'poly' goes with a degree p, 'softmax' and None without one")

    @property
    def scale_words(self) -> str:
        """The scale rule in words (:data:`SCALE_RULES`)."""
        return SCALE_RULES[self.scale]

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


def _poly(id: str, p: int, scale: str, divisor: str, label_divisor: str, **kw) -> Family:
    """c·x^p with the divisor ``divisor`` (sympy) shown as ``label_divisor``: x³/√N, x/α*, x, …"""
    power, shown = ("x", "x") if p == 1 else (f"x**{p}", "x" + "⁰¹²³⁴⁵⁶⁷⁸⁹"[p] if p < 10 else f"x^{p}")
    expr = power if not divisor else f"{power}/{divisor}"
    return Family(id, expr, shown + (f"/{label_divisor}" if label_divisor else ""), scale, kw.pop("source", PAPER),
                  p=p, kernel="poly", **kw)


FAMILY_TABLE: tuple[Family, ...] = (
    Family("softmax", "exp(x)", "softmax", "softmax", SOFTMAX_SOURCE, normalize="row", kernel="softmax",
           compare_logit="x/8", train=True),
    _poly("x_sqrtN", 1, "inv_sqrt_n", "sqrt(N)", "√N", compare_logit="x", train=True),
    _poly("x3_sqrtN", 3, "inv_sqrt_n", "sqrt(N)", "√N", compare_logit="x", train=True),
    _poly("x_alpha", 1, "alpha", "alpha", "α*", params=("alpha",), train=True),
    _poly("x3_alpha", 3, "alpha", "alpha", "α*", params=("alpha",), train=True),
    _poly("x_16", 1, "const", "16", "16"),
    _poly("x", 1, "none", "", "", train=True),
    _poly("x3", 3, "none", "", "", train=True),
    _poly("x_N", 1, "inv_n", "N", "N", train=True),
    _poly("x3_N", 3, "inv_n", "N", "N", train=True),
    _poly("x3_sqrti", 3, "inv_sqrt_i", "sqrt(i)", "√i", masks=("causal",), train=True),
    _poly("x_dose", 1, "dose", "c", "c", params=("c",), train=True),
    _poly("x3_dose", 3, "dose", "c", "c", params=("c",), train=True),
    Family("softmax_tau", "exp(x/tau)", "softmax(S/τ)", "temperature", SOFTMAX_SOURCE, normalize="row",
           kernel="softmax", params=("tau",), train=True),
    Family("relu_N", "Max(x, 0)/N", "ReLU(x)/N", "inv_n", "Wortsman et al. 2023 (arXiv 2309.08586)",
           compare_logit="x/8", train=True),
    Family("sigmoid_logN", "1/(1 + exp(-(x - log(N))))", "sigmoid(x − log N)", "bias_log_n",
           "Ramapuram et al. 2024 (arXiv 2409.04431)", compare_logit="x/8"),
    Family("poly4_row", "x**4", "row-normalised x⁴", "row_sum", "Kacham et al., PolySketchFormer (arXiv 2310.01655)",
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


def label_of(expr_or_id: str) -> str:
    """The display label of a family given by id or by its expression (``x^3/sqrt(N)`` too); else the text itself."""
    if expr_or_id in FAMILIES:
        return FAMILIES[expr_or_id].label
    key = expr_or_id.replace("^", "**").replace(" ", "")
    for f in FAMILY_TABLE:
        if f.expr.replace(" ", "") == key:
            return f.label
    return expr_or_id


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
        raise InputError(f"activation family {f.id} ({f.label}) is not row-normalised; leave --normalize out")
    return f.expr, f.normalize, mask if mask in f.masks else f.masks[0]


__all__ = ["Family", "FAMILY_TABLE", "FAMILIES", "KERNEL_KINDS", "COMPARED", "SCALE_RULES", "MASKS", "PAPER",
           "family", "label_of", "resolve"]
