"""Tests for the sweep's family and expression activations (`config.py`, `cells.py`, `run.py`): the TOML spellings,
their stored columns and round trip, and the expression kernels against the exact ones on the same draws."""

from __future__ import annotations

import numpy as np
import pytest

from sapa.common.validate import InputError
from sapa.empirics.montecarlo.sweep import (
    cell_columns,
    cell_expression,
    cell_id,
    cells,
    config_from_dict,
    resolve_activation,
    run_cell,
    with_overrides,
)
from sapa.theory import families as F
from tests.empirics.montecarlo.sweep.sweep_fixture import tiny


def test_every_table_row_has_columns_or_names_its_free_parameter():
    for f in F.FAMILY_TABLE:
        if f.params:
            with pytest.raises(InputError, match=f.params[0]):
                cell_columns(f)
            continue
        kind, p, scale, c = cell_columns(f)
        if f.kernel is None:
            assert (kind, p, scale, c) == (f.id, 0, f.rule, None)
        else:
            assert kind == f.kernel and scale in (F.CONST, f.rule)


def test_a_kernel_family_is_the_kind_cell_it_is():
    """``family = "x3_sqrtN"`` and ``kind = "poly", p = 3`` are one activation (one part file, one hash)."""
    fam = tiny(activation=[{"family": ["x3_sqrtN", "x_16", "x3"]}])
    kind = tiny(activation=[{"kind": "poly", "p": 3}, {"kind": "poly", "p": 1, "scale": "const", "c": 0.0625},
                            {"kind": "poly", "p": 3, "scale": "const", "c": 1.0}])
    assert fam == kind and fam.hash() == kind.hash()
    assert [cell_id(fam, c) for c in cells(fam)] == [cell_id(kind, c) for c in cells(kind)]


def test_family_and_expression_entries_round_trip():
    cfg = tiny(activation=[{"family": ["relu_N", "poly4_row"]}, {"expr": "x/(1+Abs(x))"},
                           {"expr": ["x**2"], "normalize": "row"}, {"kind": "softmax"}])
    assert [a[0] for a in cfg.activations] == ["relu_N", "poly4_row", "expr:x/(1+Abs(x))", "row:x**2", "softmax"]
    assert cfg.as_dict()["activation"][:4] == [{"family": "relu_N"}, {"family": "poly4_row"},
                                               {"expr": "x/(1+Abs(x))"}, {"expr": "x**2", "normalize": "row"}]
    assert config_from_dict(cfg.as_dict()) == cfg and with_overrides(cfg, seed=3) == cfg
    assert cfg.hash() != tiny().hash()


@pytest.mark.parametrize(
    "entry,needle",
    [
        ({"family": "nope"}, "unknown activation family 'nope'"),
        ({"family": "x_alpha"}, "free parameter alpha"),
        ({"family": "relu_N", "p": 1}, ".p is not used"),
        ({"expr": "x", "family": "relu_N"}, "give one of"),
        ({"expr": "y**2"}, "y"),
        ({"expr": "x", "normalize": "col"}, "normalize"),
        ({"kind": "poly", "p": 1, "normalize": "row"}, "only used with 'expr'"),
        ({"expr": 3}, "expr[0]"),
    ],
)
def test_bad_family_and_expression_entries_are_named(entry, needle):
    with pytest.raises(InputError) as exc:
        tiny(activation=[entry])
    assert needle in str(exc.value)


def test_expression_cells_refuse_float32_and_the_exact_kernels():
    with pytest.raises(InputError, match="float64"):
        tiny(dtype="float32", activation=[{"family": "relu_N"}])
    c = next(iter(cells(tiny(activation=[{"family": "relu_N"}]))))
    with pytest.raises(InputError, match="no exact kernel"):
        resolve_activation(c)
    assert cell_expression(c).text.replace(" ", "") == "Max(x,0)/N"


def test_the_expression_is_in_the_part_file_id():
    """Two cells equal in every column but their φ (a table row edited under its id) get different part files."""
    cfg = tiny(activation=[{"family": "relu_N"}])
    c = cells(cfg)[0]
    from dataclasses import replace

    other = replace(c, activation="sigmoid_logN", scale_policy="inv_n")
    assert cell_id(cfg, c) != cell_id(cfg, other)


def _values(cfg, cell) -> np.ndarray:
    df = run_cell(cfg, cell)
    return df.sort_values(["quantity", "trial", "row"], kind="stable")["value"].to_numpy()


def test_expression_kernels_agree_with_the_exact_ones_on_the_same_draws():
    """softmax(S) = row-normalised exp(x), x³/√N and x³/√i (causal) as expressions: the same numbers to round-off,
    on the paper's model (Jacobian w.r.t. (A, B)) and the shared-X models, with and without the causal mask."""
    cfg = tiny(trials=3, N=[4, 8], with_rows=True, mask=["none", "causal"],
               activation=[{"family": ["softmax", "x3_sqrtN", "x3_sqrti"]},
                           {"expr": ["x**3/sqrt(N)", "x**3/sqrt(i)"]}, {"expr": "exp(x)", "normalize": "row"}])
    twin = {("softmax", "const"): "row:exp(x)", ("poly", "inv_sqrt_n"): "expr:x**3/sqrt(N)",
            ("poly", "inv_sqrt_i"): "expr:x**3/sqrt(i)"}
    by = {(c.activation, c.scale_policy, c.weight_model, c.mask, c.N): c for c in cells(cfg)}
    checked = 0
    for (a, scale, wm, mask, N), c in by.items():
        if a in ("softmax", "poly"):
            e = by[(twin[(a, scale)], "expr", wm, mask, N)]
            np.testing.assert_allclose(_values(cfg, e), _values(cfg, c), rtol=1e-12)
            checked += 1
    assert checked == 2 * 2 * 2 * 2 + 2 * 2  # (softmax, x³/√N) × models × masks × N, + x³/√i (causal only)


def test_non_polynomial_families_run_and_are_finite():
    cfg = tiny(trials=2, N=[4, 8], activation=[{"family": ["relu_N", "sigmoid_logN", "poly4_row"]},
                                               {"expr": "x/(1+Abs(x))"}])
    for c in cells(cfg):
        df = run_cell(cfg, c)
        assert set(df["quantity"]) == {"fro", "jac_fro", "max_abs"} and np.all(np.isfinite(df["value"]))
        assert (df["value"] > 0).all()


def test_analysis_takes_family_cells():
    """x/N (a kernel cell under the rule inv_n) gets its exact E‖φ‖² and a z-score; relu_N (no closed form here) NaN;
    both get growth exponents."""
    import pandas as pd

    from sapa.empirics.montecarlo.sweep import attach_exact, fit_exponents, summarise

    cfg = tiny(trials=8, N=[4, 8, 16], weight_model=["paper"], activation=[{"family": ["x_N", "relu_N"]}])
    df = pd.concat([run_cell(cfg, c) for c in cells(cfg)], ignore_index=True)
    s = attach_exact(summarise(df), cfg)
    fro = s[(s["quantity"] == "fro") & (s["row"] == -1)]
    exact = fro[fro["activation"] == "poly"]
    assert len(exact) == 3 and exact["expected_sq"].notna().all() and (exact["z"].abs() < 5).all()
    assert fro.loc[fro["activation"] == "relu_N", "expected_sq"].isna().all()
    fits = fit_exponents(df, n_boot=50)
    assert set(fits["activation"]) == {"poly", "relu_N"} and fits["slope"].notna().all()
