"""Tests for `empirics/training/study_chunk.py`: a family with no exact kernel (ReLU(x)/N, one row of the families
table) trains as a study arm, and its probe norms equal an autograd computation of the same attention map."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from sapa.empirics.training import ensemble as EN
from sapa.empirics.training import study_chunk as SC
from sapa.empirics.training.study_config import ARMS, TINY, study_config
from sapa.theory.families import FAMILIES


def test_relu_over_n_is_a_training_arm_from_its_table_row():
    f, a = FAMILIES["relu_N"], ARMS["relu_N"]
    assert f.train and a is f and a.label == "ReLU(x)/N" and a.kernel is None  # trained as its expression


def _autograd_norms(X: torch.Tensor, W: torch.Tensor, causal: bool) -> tuple[float, float]:
    """‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F of φ = ReLU(S)/N, S = X W Xᵀ (masked j > i: 0), by torch.autograd (float64)."""
    N = X.shape[0]
    mask = torch.ones(N, N, dtype=torch.bool).tril() if causal else torch.ones(N, N, dtype=torch.bool)

    def phi(x):
        return torch.where(mask, torch.relu(x @ W @ x.T) / N, torch.zeros((), dtype=x.dtype))

    J = torch.autograd.functional.jacobian(phi, X)  # (N, N, N, D)
    return float(torch.linalg.norm(phi(X))), float(torch.linalg.norm(J))


def test_the_probe_norms_of_an_expression_arm_are_autograd_s():
    cfg = study_config(replace(TINY, arms=("relu_N",), tasks=("text",)))
    data = SC._Data(cfg, "text", 8)
    spec = EN.EnsembleSpec("text", 8, cfg.model, ARMS["relu_N"], vocab=data.vocab, classes=data.classes)
    prm = EN.stack_members(spec, [torch.Generator().manual_seed(s) for s in (3, 4)])
    for v in prm.values():  # larger weights than the 0.02 initialisation, so that ReLU keeps and drops entries
        v.data.mul_(20.0)
    got = SC._probe_norms(prm, spec, None, data, torch.ones(2, dtype=torch.bool))
    xs = EN.attention_inputs(prm, data.probe.expand(2, *data.probe.shape), spec, None)
    for e in range(2):
        fro, jac = [], []
        for layer, X in enumerate(xs):
            for W in EN.head_Ws(prm, layer, spec)[e]:
                for x in X[e].to(torch.float64):
                    f, j = _autograd_norms(x, W, causal=True)
                    fro.append(f)
                    jac.append(j)
        np.testing.assert_allclose(got["attn_fro"][e], np.mean(fro), rtol=1e-10)
        np.testing.assert_allclose(got["jac_x_fro"][e], np.mean(jac), rtol=1e-10)


def test_an_expression_arm_trains_as_the_table_row_with_the_same_expression():
    """arm "expr:Max(x, 0)/N" (sapa compare's arm for any φ) is the relu_N row trained again: its own chunk, the same
    members' numbers; refused at once when φ cannot train."""
    import pytest

    from sapa.common.validate import InputError
    from sapa.empirics.training.study_config import arm_of, plan_chunks

    cfg = replace(study_config(TINY, 0), arms=("relu_N", "expr:Max(x, 0)/N"), tasks=("digits",))
    chunks = plan_chunks(cfg, "digits", 16, None)
    assert len(chunks) == 2 and chunks[1].family.startswith("expr-") and "/" not in chunks[1].file_name
    a, b = (SC.train_chunk(c, cfg)["rows"] for c in chunks)
    for x, y in zip(a, b):
        assert x["arm"] == "relu_N" and y["arm"] == "expr:Max(x, 0)/N"
        assert (x["val_acc_final"], x["val_loss_final"], x["attn_fro"]) == (
            y["val_acc_final"], y["val_loss_final"], y["attn_fro"])
    assert arm_of("relu_N") is ARMS["relu_N"]
    for bad in ("expr:", "expr:foo(", "nope"):
        with pytest.raises(InputError):
            arm_of(bad)
