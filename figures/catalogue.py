"""Every figure sapa draws, listed once: its name, its module, the ledger entries it illustrates and how it is drawn.

Plain data (no matplotlib), in ledger order within each kind. ``sapa.figures.regenerate`` builds its jobs from this table
(``sapa verify`` draws the ``"run"`` figures after the checks that need them; the ``"stored"`` ones are drawn by the
checks and redrawn by ``sapa figures`` from ``RESULTS/data/<module>.json``), the reports caption each figure from
``sapa.figures.captions`` by the stem prefixes listed here, and a test checks the table against the ledger's order, the
figure modules and the captions. Adding a figure: its module ``figures/NAME.py``, one row here and its caption.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One kind of figure."""

    name: str                    # what ``sapa figures`` calls it
    module: str                  # figures/<module>.py draws it
    claims: tuple[str, ...]      # the ledger entries it illustrates, in ledger order
    drawn: str                   # "run": drawn by sapa verify / figures from exact curves or the sweep; "stored": by
                                 # the entry's check, redrawn from RESULTS/data/<data>.json; "bench": by sapa bench;
                                 # "compare": by sapa compare --out
    stems: tuple[str, ...]       # the file stem prefixes it saves (each has a caption in sapa.figures.captions)
    needs: tuple[str, ...] = ()  # files under RESULTS it reads
    data: str = ""               # "stored": the name of its data file (default: the module's name)


GROWTH = ("thm4.2-linear", "cor4.3-linear-scaled", "thm4.4-cubic", "cor4.5-cubic-scaled")

FIGURES: tuple[Figure, ...] = (
    # drawn after the checks by sapa verify, from exact curves or the sweep
    Figure("softmax Jacobian landscape", "jacobian_landscape", ("thm4.1-jacobian",), "run",
           ("softmax_jacobian_landscape",)),
    Figure("norm vs N", "norm_scaling", GROWTH, "run", ("norm_vs_n",), ("sweep/results.parquet",)),
    Figure("Jacobian norm vs N", "norm_scaling", GROWTH, "run", ("jac_norm_vs_n",), ("sweep/results.parquet",)),
    Figure("regime map", "regime_map", ("cor4.3-linear-scaled", "cor4.5-cubic-scaled", "other-powers"), "run",
           ("regime_map",)),
    # drawn by their entries' checks, redrawn from stored data
    Figure("worst case", "worst_case", GROWTH, "stored", ("worst_case",), ("data/worst_case.json",)),
    Figure("scale direction", "scale_direction", ("fig1-scale-direction",), "stored", ("scale_direction",),
           ("data/scale_direction.json",)),
    Figure("causal masking", "causal_masking", ("causal-masking",), "stored", ("causal_masking",),
           ("data/causal_masking.json",)),
    Figure("overhead", "overhead", ("overhead",), "stored", ("overhead",), ("data/overhead.json",)),
    Figure("training vs N", "training_vs_n", ("scale-keeps-training-stable",), "stored",
           ("training_vs_n",), ("train/runs.parquet", "train/history.parquet", "train/study.json")),
    Figure("study learning curves", "learning_curves", ("scale-keeps-training-stable",), "stored",
           ("study_learning",), ("data/study_learning.json",), data="study_learning"),
    Figure("dose response", "dose_response", ("norm-vs-accuracy",), "stored", ("dose_response",),
           ("data/dose_response.json",)),
    Figure("mechanism learning curves", "learning_curves", ("mechanism-across-n",), "stored",
           ("mechanism_learning",), ("data/mechanism_learning.json",), data="mechanism_learning"),
    Figure("real heads", "real_heads", ("real-model-regime",), "stored", ("real_heads", "real_heads_protocols"),
           ("real",)),
    Figure("Lipschitz on a ball", "lipschitz_ball", ("lipschitz-on-a-ball",), "stored", ("lipschitz_ball",),
           ("data/lipschitz_ball.json",)),
    Figure("audit compare", "audit_compare", ("relu-over-n", "sigmoid-bias-logn", "poly4-normalised"), "stored",
           ("audit_compare",), ("data/audit_compare.json",)),
    # drawn by sapa bench --scaling
    Figure("bench scaling", "bench_scaling", (), "bench", ("bench_scaling",)),
    # drawn by sapa compare --out
    Figure("compare scorecard", "compare_scorecard", (), "compare", ("compare_scorecard",)),
)


def figure_named(name: str) -> Figure:
    """The row called ``name`` (KeyError naming the known ones otherwise)."""
    for f in FIGURES:
        if f.name == name:
            return f
    raise KeyError(f"unknown figure {name!r}; known: {', '.join(f.name for f in FIGURES)}")
