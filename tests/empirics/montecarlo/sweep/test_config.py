"""Tests for `empirics/montecarlo/sweep/config.py`: built-in configs, labels, round trips, every bad key named."""

from __future__ import annotations

import pytest

from sapa.common.validate import InputError
from sapa.empirics.montecarlo.sweep import activation_label, builtin_config, config_from_dict, load_config
from tests.empirics.montecarlo.sweep.sweep_fixture import TINY, tiny


def test_builtin_configs_load():
    quick, full = load_config(builtin_config("quick")), load_config(builtin_config("full"))
    assert quick.N[0] == 8 and quick.N[-1] == 512 and quick.dtype == "float64"
    assert max(full.N) >= 4096 and set(full.D) >= {64, 384, 768}
    labels = {activation_label(a) for a in quick.activations}
    assert labels == {"softmax", "x^1/sqrt(N)", "x^3/sqrt(N)", "0.0625*x^1", "1*x^3"}
    assert set(quick.weight_model) == {"paper", "iid", "tied", "corr"}


def test_activation_labels():
    """The rows' ``label`` column: the stored text of the kernel cells (unchanged), a family's label, an expression."""
    assert activation_label(("softmax", 0, "inv_sqrt_d", None)) == "softmax"
    assert activation_label(("softmax", 0, "const", 0.5)) == "softmax(tau=0.5)"
    assert activation_label(("poly", 3, "inv_sqrt_n", None)) == "x^3/sqrt(N)"
    assert activation_label(("poly", 1, "const", 0.0625)) == "0.0625*x^1"
    assert activation_label(("poly", 1, "inv_sqrt_i", None)) == "x^1/sqrt(i)"
    assert activation_label(("relu_N", 0, "inv_n", None)) == "ReLU(x)/N"
    assert activation_label(("expr:x/(1+Abs(x))", 0, "expr", None)) == "x/(1+Abs(x))"
    assert activation_label(("row:x**2", 0, "expr", None)) == "row-normalised x**2"


def test_stored_dynamic_causal_parses_as_inv_sqrt_i():
    old = tiny(activation=[{"kind": "poly", "p": 1, "scale": "dynamic_causal"}])
    assert old == tiny(activation=[{"kind": "poly", "p": 1, "scale": "inv_sqrt_i"}])
    assert [a[2] for a in old.activations] == ["inv_sqrt_i"]  # (activation, p, scale_policy, c)


def test_config_round_trips_through_dict():
    cfg = tiny()
    assert config_from_dict(cfg.as_dict()) == cfg
    assert cfg.hash() == tiny().hash() != tiny(seed=4).hash()


@pytest.mark.parametrize(
    "raw,needle",
    [
        ({"Nn": [4]}, "'Nn'"),
        ({"activation": [{"kind": "poly", "p": 1, "sclae": "const"}]}, "'sclae'"),
    ],
)
def test_unknown_key_is_rejected_by_name(raw, needle):
    with pytest.raises(InputError, match="unknown config key") as exc:
        config_from_dict({**TINY, **raw})
    assert needle in str(exc.value)


@pytest.mark.parametrize(
    "raw,needle",
    [
        ({"N": [8, "16"]}, "N[1]"),
        ({"trials": 1.5}, "trials"),
        ({"seed": -1}, "seed"),
        ({"with_rows": 1}, "with_rows"),
        ({"dtype": "float16"}, "dtype"),
        ({"weight_model": ["shared"]}, "weight_model[0]"),
        ({"rho": [2.0]}, "rho[0]"),
        ({"mask": "diag"}, "mask[0]"),
        ({"d": ["d"]}, "d[0]"),
        ({"activation": [{"kind": "poly", "scale": "const", "p": 1}]}, "needs 'c'"),
        ({"activation": [{"kind": "poly"}]}, "needs 'p'"),
        ({"activation": [{"kind": "softmax", "p": 1}]}, "not used by softmax"),
        ({"activation": [{"kind": "softmax", "scale": "inv_sqrt_n"}]}, "scale"),
        ({"activation": []}, "activation"),
    ],
)
def test_config_types_are_checked(raw, needle):
    with pytest.raises(InputError) as exc:
        config_from_dict({**TINY, **raw})
    assert needle in str(exc.value)


def test_missing_required_and_bad_files(tmp_path):
    with pytest.raises(InputError, match="'N'"):
        config_from_dict({k: v for k, v in TINY.items() if k != "N"})
    with pytest.raises(InputError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("N = [4,\n")
    with pytest.raises(InputError, match="invalid TOML"):
        load_config(bad)
    good = tmp_path / "good.toml"
    good.write_text('N = 4\nD = 2\n[[activation]]\nkind = "softmax"\n')
    assert load_config(good).N == (4,)
