"""Tests for `figures/training_norms.py` (Figure 8): draws both figures from stored-style data, diverged runs included."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from empirics import figdata
from empirics.norm_accuracy import analyse
from empirics.training import HEAD_QUANTITIES, RUN_QUANTITIES
from figures import training_norms

ARMS = {"digits": ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3"),
        "text": ("softmax", "x_sqrtN", "x3_sqrtN", "x_16", "x3", "x3_sqrti")}


def _results(seeds: int = 3) -> dict:
    """Synthetic results shaped like ``run_experiment``'s: 2 tasks, every arm, 2 weight decays; one diverged run."""
    rng = np.random.default_rng(0)
    hist, final = [], []
    for task, arms in ARMS.items():
        for k, arm in enumerate(arms):
            for wd in (0.0, 0.05):
                for s in range(seeds):
                    div = task == "text" and arm == "x3" and s == 0 and wd == 0.0
                    steps = [0, 50, 100] if div else [0, 50, 100, 150, 200]
                    for st in steps:
                        for layer in range(2):
                            for h in range(2):
                                for q in HEAD_QUANTITIES:
                                    hist.append((task, arm, wd, s, st, layer, h, q, 10.0 ** (k - 2) * (1 + st / 50)
                                                 * math.exp(0.1 * rng.normal())))
                        for q in RUN_QUANTITIES:
                            hist.append((task, arm, wd, s, st, -1, -1, q, min(0.95, 0.1 + st / 250 + 0.02 * rng.normal())))
                    acc = 0.1 if div else 0.8 + 0.02 * k + 0.01 * rng.normal()
                    nrm = math.inf if div else 10.0 ** (k - 2) * 5
                    final.append({"task": task, "arm": arm, "label": arm, "weight_decay": wd, "seed": s, "diverged": div,
                                  "test_acc": acc, "test_loss": 1.0, "attn_fro": nrm, "jac_fro": 2 * nrm,
                                  "attn_fro_init": 0.01, "jac_fro_init": 0.01, "w_fro": 1.0})
    cols = ["task", "arm", "weight_decay", "seed", "step", "layer", "head", "quantity", "value"]
    return {"history": pd.DataFrame(hist, columns=cols), "final": pd.DataFrame(final),
            "provenance": {"config": {"name": "synthetic", "seeds": seeds, "digits": {"steps": 200},
                                      "text": {"steps": 200}, "seed": 0}}}


def test_draw_from_stored_data(tmp_path):
    results = _results()
    res = training_norms.compute(results, analyse(results["final"], n_boot=300))
    c = res["curves"]
    one = c[(c["task"] == "digits") & (c["arm"] == "x3") & (c["weight_decay"] == 0.0) & (c["quantity"] == "attn_fro")]
    assert list(one["n"]) == [3] * 5  # median over 3 seeds of the layer/head mean
    res = figdata.decode(json.loads(json.dumps(figdata.encode(res))))  # what ``sapa figures`` reads back
    stem = training_norms.file_stem(res["config"])
    assert stem == "training_norms_budgetsynthetic_seeds3_steps200-200_seed0"
    paths = training_norms.draw(res, tmp_path, stem)
    assert [p.name for p in paths] == [f"{stem}_curves.png", f"{stem}_curves.pdf", f"{stem}_acc_vs_norm.png",
                                       f"{stem}_acc_vs_norm.pdf"]
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_compute_one_task():
    results = _results(seeds=2)
    results["final"] = results["final"][results["final"]["task"] == "digits"]
    results["history"] = results["history"][results["history"]["task"] == "digits"]
    res = training_norms.compute(results, analyse(results["final"], n_boot=200))
    assert set(res["curves"]["task"]) == {"digits"} and set(res["analysis"]["tasks"]) == {"digits"}
    assert res["labels"]["x3_sqrtN"] == "x³/√N"
