"""Pins for issue 53 (one activation object): the hashes, plans and scale vectors that moving activation code must
not change.

Where the shipped training pack holds a value (``empirics/data/training/full``: design.json, evidence.json,
study.json, runs.parquet, mechanism.json.gz) the pin reads it from there; the rest are sha256 digests of the values
the code gave at 3058aa1/760a3a4, before the migration (config hashes of quick/tiny, chunk plans, float32 row
coefficients, the sweep's cell ids and resolved activations). A failing pin means stored results would be orphaned
or retrained: find the slip, never re-pin.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from sapa.empirics.montecarlo.sweep.cells import cell_id, cells, resolve_activation
from sapa.empirics.montecarlo.sweep.config import load_config
from sapa.empirics.training.mechanism import MECH_ARMS, mech_config, member_scales, plan_mech_chunks
from sapa.empirics.training.study_config import (ARMS, alpha_ps, arm_p, look2_chunks, plan_chunks, row_coefficients,
                                                 study_config)
from sapa.empirics.training.study_design import design_sha256

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "empirics" / "data" / "training" / "full"
CONFIGS = ROOT / "empirics" / "configs"


def _digest(x: object) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, default=str).encode()).hexdigest()


def _bytes(a) -> str:
    return hashlib.sha256(a.numpy().tobytes()).hexdigest()


def _json(name: str) -> dict:
    return json.loads((PACK / name).read_text())


# --------------------------------------------------------------------------- against the shipped pack


def test_the_full_study_config_is_the_shipped_packs():
    cfg = study_config("full")
    assert cfg.hash() == _json("evidence.json")["config_hash"] == _json("study.json")["config_hash"]


def test_the_design_rebuilt_from_code_has_the_stored_sha():
    stored = _json("design.json")
    design = json.loads(json.dumps({**stored["design"], "config": study_config("full").as_dict(),
                                    "mechanism": asdict(mech_config("full"))}, default=str))
    assert design == json.loads(json.dumps(stored["design"]))
    assert design_sha256(stored["design"]) == stored["sha256"] == _json("study.json")["design"]["sha256"]


def test_the_mechanism_config_and_chunks_are_the_shipped_packs():
    m = json.loads(gzip.open(PACK / "mechanism.json.gz").read())
    cfg = mech_config("full")
    assert cfg.hash() == m["config_hash"]
    assert [(c.task, c.N, c.family, [list(x) for x in c.members]) for c in plan_mech_chunks(cfg)] == \
        [(c["task"], c["N"], c["family"], c["members"]) for c in m["chunks"]]


def test_the_study_arms_write_the_shipped_p_and_scale_columns():
    runs = pd.read_parquet(PACK / "runs.parquet", columns=["arm", "p", "scale"]).drop_duplicates()
    for arm, p, scale in runs.itertuples(index=False):
        assert (arm_p(ARMS[arm]), ARMS[arm].rule) == (p, scale), arm


# --------------------------------------------------------------------------- against the values before the migration

HASHES = {"quick": "f57ce83a93856b93e0cc2c2d792fec81a1ca7937961b812e6622fbbe07bc435d",
          "full": "9382cf8370fd59be727d545e665c151d620e602c59aab00c658c14b1d374683a",
          "tiny": "4cf11b7e5d264a1b2f6bf4377afa65f6d776b3c3c543c6665b586c3f662291ca"}
CHUNKS = {"quick": "f84cb2aaf5bbfed5584e325d41776012dd231608755f55eb2ee128ca05d76493",
          "full": "6e0da5e19607b2f603bcf995d55952e9a7925f9ce1e3d7a712fe7c4de0fd9690",
          "tiny": "150103647fe3b7c3c4ea434444c88af39a018c4d965ec8f605245ec8cdb0afa7"}
LOOK2 = {"quick": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
         "full": "42f3e886dd3dcade2c2477b03c7c75125df71ca4d0f9ac63e6b36df4b760f0c1",
         "tiny": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"}
MECH = {"quick": ("82adaf6039366dd6ccdbf1d3df69b1a0828e2703cec6ee933bda5ca854b9fb71",
                  {"copy1": "dd17b8c13c7ebc31cc4e931040b4a89d4f2b77b6975fefb83391961320ee6495",
                   "copy2": "a6b950329e9eac8688bfa01a30d6ca3158c0c52a3e977ed79d936a74e8e655d3"},
                  "2274613967fff6b527b9567460c97b4ad757d4ecd6b4267e24eb886de42a7a41"),
        "full": ("b33fc4f70e709bd03410439f3cf2dc2ddbf73e39d9656adf72c9428b5430ce99",
                 {"copy1": "4dc99a315c8636e51134804df605bf374eece03d1e5d9b3f1b5e5025c91d9232",
                  "copy2": "b6dc594cdab3bcded6cf9be9f9288e4f64a3492b1fe5fb8b5ccdc340b8879813",
                  "copy_far": "48e16b836462e4a197b9e296781df6485764cbb5c758bd7594c3285cde4e9023",
                  "induction": "1e892f852f137b5b6fd2e597959531b8333b66032235f257f941a41fd682d48f",
                  "induction_lag": "6dc9eb53490c1b5f2213f283013ba88c87ed44444c9ab1063599ae622df7ee9c",
                  "mqar": "517dd50351716a3d4a7ccc1397e82d1bc4c3304080eab6798e8c559e92275736"},
                 "4fecd0162e670e80e651fae5f134c25a7c594303f269e586c004e1a55e96a8a0"),
        "tiny": ("82c6cf566e1ddd6e4e23f19c591de1a975adb70cdbdfca62419ec1e65f529b8a",
                 {"copy1": "b4b67d87cd5b9bc7b1b2185953b8f9373c34bf62886d4a953aae8bc993aa3f1b",
                  "mqar": "d5d5e0241c1e59a1ccfc983b6a2497ed39926882ce8844d21e3a00516db1e65f"},
                 "3c20e462a4d9e159e8bf04ed594b9b0d82678b6f6667cf802ec2100cdc19b4c1")}
SWEEP = {"quick": ("ae090a6eaeae1ccf142fe1edc4a8c5890bacd0c673373baa4575bc7f21d41d6d",
                   "3dbad555dea113507687f9fd9281d4506f1d3852e86809bdd58b90e558cf9513",
                   "4dafdba473b8a7970f993b440d9caa1336ec0d112c1c5e36b42bf5d6451d22eb"),
         "full": ("f3887a75a4f9e3e0d206e309ad46a6b27b1545625da16001157045c627787289",
                  "8dac1579484df369a51df57b3e10c4ce948a42510561e035deba47e1657aee76",
                  "175a0550ae61f6c4e5b2768de17f71fd92452bc5249b2226067996b50d31f4ef")}
LENGTHS = [*range(1, 513), 1024, 2048, 4096]


@pytest.mark.parametrize("budget", ["quick", "full", "tiny"])
def test_study_hashes_and_chunk_plans(budget):
    cfg = study_config(budget)
    assert cfg.hash() == HASHES[budget]
    one = {p: 1.0 for t in cfg.tasks for p in alpha_ps(cfg, t)}
    plan = [(c.file_name, [str(m) for m in c.members])
            for t in cfg.tasks for N in cfg.plan(t).Ns for c in plan_chunks(cfg, t, N, one)]
    assert _digest(plan) == CHUNKS[budget]
    strata = [(t, p, lr) for t in cfg.tasks for p in (1, 3) for lr in cfg.plan(t).lrs]
    assert _digest([(c.file_name, [str(m) for m in c.members]) for c in look2_chunks(cfg, strata)]) == LOOK2[budget]


@pytest.mark.parametrize("budget", ["quick", "full", "tiny"])
def test_mechanism_hashes_and_chunk_plans(budget):
    cfg = mech_config(budget)
    whole, per_task, chunks = MECH[budget]
    assert cfg.hash() == whole and {p.task: cfg.chunk_hash(p.task) for p in cfg.probes} == per_task
    assert _digest([(c.file_name, [list(x) for x in c.members]) for c in plan_mech_chunks(cfg)]) == chunks


def test_the_training_row_coefficients_keep_their_float32_bytes():
    """Every study arm's (N,) float32 r_i at N = 1 … 512 and three long lengths (grid arms at four α), and the
    mechanism arms' at N = 1 … 512: the bytes the shipped training runs multiplied S^p by."""
    vec = {f"{name}/{N}/{al}": _bytes(row_coefficients(a, N, al))
           for name, a in ARMS.items() for N in LENGTHS for al in (math.nan, 2.0, 0.125, 3.0)
           if a.rule in ("alpha", "dose", "temperature") or math.isnan(al)}
    assert _digest(vec) == "86e6c7b67c242163cb9c1f261507de341d477c26a997ad03e0b2f768d9e28a2a"
    mv = {f"{name}/{N}": None if (r := member_scales(a, N)) is None else _bytes(r)
          for name, a in MECH_ARMS.items() for N in range(1, 513)}
    assert _digest(mv) == "50aab7ecf151dd1c3e020a42dc224c10a7287e76215bfc3d45bd369d717cc7f7"


def _resolved(act, rs, mask) -> list:
    """What the norm kernels receive for a cell: kind, degree, the coefficient's exact bits, label, row scale, mask."""
    from sapa.empirics.kernels.norms import kernel_label

    return [act.kernel, act.p or 1, act.coef.hex(), kernel_label(act), None if rs is None else _bytes(rs), mask]


@pytest.mark.parametrize("name", ["quick", "full"])
def test_sweep_hash_cell_ids_and_resolved_activations(name):
    cfg = load_config(CONFIGS / f"{name}.toml")
    config_hash, ids, resolved = SWEEP[name]
    cs = cells(cfg)
    assert cfg.hash() == config_hash
    assert _digest([cell_id(cfg, c) for c in cs]) == ids
    assert _digest([_resolved(*resolve_activation(c)) for c in cs]) == resolved


# --------------------------------------------------------------------------- the done checks of issue 53

PACKAGE = [ROOT / d for d in ("common", "theory", "empirics", "figures", "sapa")]
PARALLEL_TYPES = (("sapa.empirics.training.ensemble", "Family"), ("sapa.empirics.training.study_config", "StudyArm"),
                  ("sapa.empirics.training.tiny_models", "Arm"), ("sapa.empirics.training.mechanism", "MechArm"),
                  ("sapa.empirics.montecarlo.sweep.config", "ActivationSpec"))


def test_the_deleted_activation_types_stay_deleted():
    """The norm kernels' Activation, the norm figure's Series and kernels/scale.py's Scale are gone: the family row
    (sapa.theory.families.Family) is what they take."""
    import importlib.util
    import inspect

    from sapa.empirics.kernels import norms
    from sapa.figures import norm_scaling

    assert not inspect.isclass(getattr(norms, "Activation", None)) and not hasattr(norm_scaling, "Series")
    assert importlib.util.find_spec("sapa.empirics.kernels.scale") is None


def _modules_with(text: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for d in PACKAGE for p in d.rglob("*.py") if text in p.read_text())


def test_one_activation_type_and_one_scale_vocabulary():
    """At most two classes describe an activation (the row and its parsed form, sapa.theory.activation.Activation),
    and the rule code inv_sqrt_n is spelled out in at most three modules (the rest use families.INV_SQRT_N)."""
    import importlib
    import inspect

    left = [f"{m}.{n}" for m, n in PARALLEL_TYPES if inspect.isclass(getattr(importlib.import_module(m), n, None))]
    assert left == []
    assert len(_modules_with("inv_sqrt_n")) <= 3, _modules_with("inv_sqrt_n")  # textual, docstrings too
