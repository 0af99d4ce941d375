"""Fuzzing the ``sapa`` command and the public API with random and hostile arguments (hypothesis).

Contract (docs/commands.md): a user error is one line ``sapa: error: ...`` on stderr, exit code 2,
nothing on stdout, no traceback and no partial result file; the public functions raise
:class:`InputError` (or return finite numbers) and nothing else. Every example runs under a
hard alarm, so a hang fails instead of stalling the suite.

Default run: a few hundred examples, derandomized (reproducible). ``-m slow``: > 1000 examples, also
derandomized so that CI on a fresh clone is reproducible; ``SAPA_FUZZ_FRESH=1 python3 -m pytest -m slow
tests/test_fuzz.py`` draws fresh random ones instead (how the regressions below were found).
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import math
import os
import shutil
import signal
import struct
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sapa.empirics.montecarlo import samplers
from sapa.common import seeds
from sapa.empirics.kernels.norms import attention_norms, kernel_family, paper_model_norms
from sapa.theory.families import power
from sapa.empirics.montecarlo.stats import fit_exponent
from sapa.empirics.montecarlo.sweep import cells, check_memory, config_from_dict
from sapa.cli import build_parser, main
from sapa.theory.moments import exact_moments
from sapa.common.validate import InputError

ALARM_S = 30  # a hang detector, far above any example's cost
HEAVY = {"verify", "bench", "figures", "train"}  # valid runs take minutes: only ever fed invalid arguments


class Hang(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: int = ALARM_S):
    def on_alarm(signum, frame):
        raise Hang(f"example ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def fuzz(strategy, check, n: int, *, derandomize: bool) -> collections.Counter:
    """Run ``check`` on ``n`` examples of ``strategy``; count the outcomes it returns ("ok", "error", ...)."""
    outcomes: collections.Counter = collections.Counter()

    @settings(max_examples=n, deadline=None, database=None, derandomize=derandomize, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(x):
        with alarm():
            outcomes[check(x)] += 1

    run()
    return outcomes


# --------------------------------------------------------------------------- files


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """Good and hostile .npy files, and the directory the CLI runs in."""
    d = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(0)
    arrays = {
        "x53": rng.standard_normal((5, 3)), "x42": rng.standard_normal((4, 2)), "x13": rng.standard_normal((1, 3)),
        "w33": rng.standard_normal((3, 3)), "w22": rng.standard_normal((2, 2)), "eye3": np.eye(3),
        "spd3": np.eye(3) * 2 + 0.1, "neg3": -np.eye(3), "xbig": np.full((4, 3), 1e200), "wbig": np.eye(3) * 1e300,
        "xnan": np.array([[np.nan, 1.0, 0.0]] * 4), "xinf": np.array([[np.inf, 1.0, 0.0]] * 4),
        "int": np.ones((4, 3), dtype=np.int64), "bool": np.ones((3, 3), dtype=bool),
        "complex": np.ones((4, 3), dtype=complex), "f16": np.ones((4, 3), dtype=np.float16),
        "f32big": np.full((3, 3), 3e38, dtype=np.float32), "str": np.array([["a", "b", "c"]] * 3),
        "rec": np.zeros((3, 3), dtype=[("a", "f8")]), "scalar": np.float64(2.0), "vec": np.ones(3),
        "cube": np.ones((2, 3, 3)), "empty": np.ones((0, 3)), "empty2": np.ones((3, 0)), "rect": np.ones((3, 2)),
    }
    paths = {}
    for k, a in arrays.items():
        np.save(d / f"{k}.npy", a)
        paths[k] = str(d / f"{k}.npy")
    np.save(d / "obj.npy", np.array([[1, None]], dtype=object), allow_pickle=True)
    paths["obj"] = str(d / "obj.npy")
    (d / "text.npy").write_text("not an array")
    paths["text"] = str(d / "text.npy")
    (d / "trunc.npy").write_bytes((d / "x53.npy").read_bytes()[:90])
    paths["trunc"] = str(d / "trunc.npy")
    (d / "zero.npy").write_bytes(b"")  # 0 bytes: EOFError inside numpy
    paths["zero"] = str(d / "zero.npy")
    from numpy.lib import format as npf

    with open(d / "hugehdr.npy", "wb") as f:  # claims ~93 GiB in a 200-byte file: MemoryError inside numpy
        npf.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (111111, 111111)})
        f.write(b"\0" * 64)
    paths["hugehdr"] = str(d / "hugehdr.npy")
    hdr3 = "{'descr': '<f8', 'fortran_order': False, 'shape': (111111, 111111), }"
    hdr3 += " " * (-(12 + len(hdr3) + 1) % 64) + "\n"  # a version-3.0 (UTF-8) header: crashed the loader once
    (d / "hugehdr3.npy").write_bytes(b"\x93NUMPY\x03\x00" + struct.pack("<I", len(hdr3)) + hdr3.encode() + b"\0" * 64)
    paths["hugehdr3"] = str(d / "hugehdr3.npy")
    for k, a in {"dt64": np.zeros((3, 3), "datetime64[s]"), "td64": np.ones((3, 3), "timedelta64[s]"),
                 "numstr": np.array([["1", "2", "3"]] * 3), "rec1": np.zeros((3, 3), [("a", "f8")])}.items():
        np.save(d / f"{k}.npy", a)  # non-numeric dtypes that numpy would convert silently
        paths[k] = str(d / f"{k}.npy")
    np.savez(d / "arch.npz", a=np.ones((3, 3)))
    paths["npz"] = str(d / "arch.npz")
    paths["dir"] = str(d)
    paths["missing"] = str(d / "missing.npy")
    paths["devnull"] = "/dev/null"
    return {"dir": d, "paths": paths}


# --------------------------------------------------------------------------- CLI


def rarely(good, bad, one_in: int = 8):
    """``good`` most of the time, ``bad`` about once in ``one_in`` draws."""
    return st.sampled_from([True] * (one_in - 1) + [False]).flatmap(lambda ok: good if ok else bad)


BAD_INTS = st.sampled_from(["0", "-1", "1.5", "1e3", "nan", "inf", "", " ", "abc", "0x10", "9" * 25, "1_0", "٣", "--1"])
BAD_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                       st.sampled_from(["0", "-0", "1e-320", "1e308", "1e309", "nan", "-inf", "", "x", "1/2"]))
TEXT = st.text(max_size=8)


def _opts(draw, table: dict, required=()) -> list[str]:
    """Required options almost always, the others with probability 1/2; values from their strategies; shuffled."""
    pairs = []
    for flag, values in table.items():
        keep = draw(rarely(st.just(True), st.just(False), 12)) if flag in required else draw(st.booleans())
        if keep:
            pairs.append([flag] if values is None else [flag, draw(values)])
    return [tok for pair in draw(st.permutations(pairs)) for tok in pair]


@st.composite
def norms_argv(draw, paths):
    good = draw(st.sampled_from([("x53", "w33"), ("x53", "eye3"), ("x42", "w22"), ("x13", "spd3"), ("int", "eye3")]))
    files = st.sampled_from(sorted(paths.values()))
    table = {"--x": rarely(st.just(paths[good[0]]), files), "--w": rarely(st.just(paths[good[1]]), files),
             "--activation": rarely(st.sampled_from(["softmax", "poly"]), st.sampled_from(["relu", ""])),
             "--p": rarely(st.integers(1, 9).map(str), st.one_of(BAD_INTS, st.sampled_from(["5000", str(2**70)]))),
             "--scale": rarely(st.floats(1e-3, 1e3).map(repr), BAD_FLOATS),
             "--mask": rarely(st.sampled_from(["none", "causal"]), st.just("diag")), "--json": None}
    return ["norms", *_opts(draw, table, required=("--x", "--w", "--activation"))]


@st.composite
def exact_argv(draw, paths):
    model = draw(rarely(st.sampled_from(["paper", "shared", "iid", "tied", "corr"]), st.just("x")))
    files = st.sampled_from([paths[k] for k in ("w33", "w22", "eye3", "spd3", "neg3", "wbig", "xnan", "rect",
                                                "vec", "empty", "complex", "text", "missing", "dir", "zero", "hugehdr",
                                                "dt64", "numstr")])
    good_w = st.sampled_from([paths["w33"], paths["eye3"], paths["spd3"]])
    def size(hi, huge=(str(10**400), str(2**53 + 1))):
        return rarely(st.integers(1, hi).map(str), st.one_of(BAD_INTS, st.sampled_from(huge)))

    table = {"--p": rarely(st.integers(1, 8).map(str), st.sampled_from(["0", "13", "99", "1.5", "x", str(10**30)])),
             "--model": st.just(model), "--N": size(300), "--D": size(100, (str(10**300), str(2**53 + 1))), "--d": size(64),
             "--rho": rarely(st.floats(-1, 1).map(repr), BAD_FLOATS),
             "--sigma": rarely(st.floats(1e-3, 1e3).map(repr), st.one_of(BAD_FLOATS, st.sampled_from(["1e300", "1e-300"]))),
             "--w": rarely(good_w, files), "--sigma-x": rarely(st.just(paths["spd3"]), files), "--json": None}
    required = {"paper": ("--p", "--model", "--N", "--d"), "shared": ("--p", "--model", "--N", "--w"),
                "corr": ("--p", "--model", "--N", "--D", "--d", "--rho")}.get(model, ("--p", "--model", "--N", "--D", "--d"))
    if model != "shared":
        table = {k: v for k, v in table.items() if k not in ("--w", "--sigma-x") or draw(rarely(st.just(False), st.just(True)))}
    return ["exact", *_opts(draw, table, required=required)]


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def _toml(raw: dict) -> str:
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in raw.items() if k != "activation"]
    acts = raw.get("activation")
    if isinstance(acts, list) and acts and all(isinstance(a, dict) for a in acts):
        for a in acts:
            lines.append("[[activation]]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in a.items()]
    elif "activation" in raw:
        lines.insert(0, f"activation = {_toml_value(acts)}")
    return "\n".join(lines) + "\n"


HOSTILE = st.sampled_from([0, -1, 1.5, "8", True, [], [[2]], {"a": 1}, math.nan, math.inf, -0.0, 2**40, "", "D"])


def _grid(good, n=3):
    """A TOML grid value: a short list (or a scalar) of good values, rarely hostile."""
    one = rarely(good, HOSTILE, 40)
    return rarely(st.one_of(one, st.lists(one, min_size=1, max_size=n)), st.one_of(st.just([]), HOSTILE), 40)


def _val(good):
    return rarely(good, HOSTILE, 40)


SOFTMAX = st.fixed_dictionaries({"kind": st.just("softmax")}, optional={
    "scale": st.sampled_from(["inv_sqrt_d", "const"])}).map(lambda a: {**a, "c": 0.5} if a.get("scale") == "const" else a)
POLY = st.fixed_dictionaries({"kind": st.just("poly"), "p": _grid(st.integers(1, 4), 2)}, optional={
    "scale": _grid(st.sampled_from(["inv_sqrt_n", "inv_sqrt_d", "dynamic_causal"]), 2)})
ACTIVATION = rarely(st.one_of(SOFTMAX, POLY, POLY), st.fixed_dictionaries(  # hostile: any mix of keys and values
    {"kind": st.sampled_from(["softmax", "poly", "relu", 3])},
    optional={"p": _grid(st.integers(1, 4), 2), "scale": _grid(st.sampled_from(
        ["inv_sqrt_n", "const", "inv_sqrt_d", "dynamic_causal", "x"]), 2), "c": st.sampled_from([0.5, 1e300, -1.0, "c"]),
        "extra": st.integers()}), 10)
CONFIG = st.fixed_dictionaries(
    {"N": _grid(st.integers(1, 8)), "D": _grid(st.integers(1, 4), 2),
     "activation": rarely(st.lists(ACTIVATION, min_size=1, max_size=3), HOSTILE, 20)},
    optional={
        "d": _grid(st.one_of(st.integers(1, 4), st.just("D")), 2),
        "weight_model": _grid(st.sampled_from(["paper", "iid", "tied", "corr"]), 2),
        "rho": _grid(st.floats(-1, 1), 2), "mask": _grid(st.sampled_from(["none", "causal"]), 2),
        "x_model": _grid(st.sampled_from(["iso", "aniso", "spiked"]), 2),
        "mean_norm": _grid(st.sampled_from([0.0, 1.0, 3.0, 1e200]), 2),
        "trials": _val(st.integers(1, 3)), "seed": _val(st.integers(0, 2**64)),
        "dtype": rarely(st.sampled_from(["float64", "float32"]), st.sampled_from(["float16", 64])),
        "device": rarely(st.just("cpu"), st.sampled_from(["cuda", "cuda:7", "tpu", "", "cpu:0", 0])),
        "with_rows": _val(st.booleans()), "sigma_w": _val(st.sampled_from([0.5, 1e300])),
        "sigma_ab": _val(st.sampled_from([1.0, 1e200])), "sigma_x": _val(st.sampled_from([1.0, 1e12, 1e200])),
        "aniso_alpha": _val(st.sampled_from([0.0, 1.0, 1e6])), "spikes": _val(st.integers(1, 5)),
        "spike_strength": _val(st.sampled_from([1.0, 1e300])), "memory_gib": rarely(st.just(3.0), st.one_of(st.just(1e-9), HOSTILE), 20),
        "threads": _val(st.integers(0, 2)), "name": _val(TEXT),
    },
).flatmap(lambda c: rarely(st.just(c), st.just({**c, "unknown_key": 1}), 20))


@st.composite
def sweep_argv(draw, paths):
    kind = draw(rarely(st.just("config"), st.sampled_from(["garbage", "path"]), 6))
    if kind == "config":
        source = _toml(draw(CONFIG))
    elif kind == "garbage":
        source = draw(st.one_of(st.text(max_size=40), st.sampled_from(["N = [", "\x00\x01", "[[activation]]\nkind=1"])))
    else:
        source = None
    config = draw(st.sampled_from([paths["missing"], paths["dir"], paths["x53"], paths["devnull"], "nope"])) if source is None else source
    table = {"--seed": rarely(st.integers(0, 9).map(str), BAD_INTS),
             "--workers": rarely(st.just("1"), st.sampled_from(["0", "-1", "x", "1.5", ""])),
             "--scheduler": st.sampled_from(["", "foo", "tcp://127.0.0.1:1", "udp://a:1", "missing.json"]),
             "--no-progress": None}
    table = {k: v for k, v in table.items() if k != "--scheduler" or draw(rarely(st.just(False), st.just(True), 6))}
    out = draw(rarely(st.just("out"), st.sampled_from([paths["x53"], "/dev/null/out", "/proc/sapa_out"])))
    return ["sweep", config, "--out", out, *_opts(draw, table)], source


def _invalid_heavy(draw) -> list[str]:
    cmd = draw(st.sampled_from(sorted(HEAVY)))
    bad = {"verify": [["--budget", "huge"], ["--seed", "-3"], ["--only", "no-such-claim"], ["--bogus"], ["--seed", "x"]],
           "bench": [["--bogus"], ["--quick", "extra"], ["--json=1"], ["--out"], ["--part", "gpu"]],
           "train": [["--budget", "huge"], ["--workers", "0"], ["--seed", "-1"], ["--bogus"], ["--out"]],
           "figures": [["--results", "missing-dir"], ["--results", "/dev/null"], ["--bogus"]]}[cmd]
    ok = {"verify": [["--budget", "quick"], ["--seed", "3"], ["--out", "vout"]], "bench": [["--quick"], ["--json"]],
          "train": [["--budget", "quick"], ["--out", "tout"], ["--no-progress"]],
          "figures": [["--out", "fout"]]}[cmd]
    parts = [draw(st.sampled_from(bad))] + draw(st.lists(st.sampled_from(ok), max_size=2))
    return [cmd] + [tok for part in draw(st.permutations(parts)) for tok in part]


@st.composite
def any_argv(draw, paths):
    """One of: norms, exact, sweep (with its TOML), an invalid heavy command, random tokens."""
    kind = draw(st.sampled_from(["norms", "exact", "sweep", "sweep", "heavy", "tokens"]))
    if kind == "norms":
        return draw(norms_argv(paths)), None
    if kind == "exact":
        return draw(exact_argv(paths)), None
    if kind == "sweep":
        return draw(sweep_argv(paths))
    if kind == "heavy":
        return _invalid_heavy(draw), None
    words = st.sampled_from(["norms", "exact", "sweep", "verify", "bench", "figures", "--json", "--p", "3", "--x",
                             "--help", "-h", "--", "-", "quick"])
    return draw(st.lists(st.one_of(words, TEXT), max_size=6)), None


def run_cli(argv: list[str]) -> tuple[int, str, str, list]:
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            code = main(argv)
        except SystemExit as exc:  # only argparse's --help may exit this way
            code = exc.code
    caught = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    return code, out.getvalue(), err.getvalue(), caught


def _would_run_heavy(argv: list[str]) -> bool:
    """True if argv parses as a valid heavy command (verify/bench/figures) or a built-in sweep."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = build_parser().parse_args(argv)
    except (InputError, SystemExit):
        return False
    return args.command in HEAVY or (args.command == "sweep" and args.config in ("quick", "full"))


def check_cli(case, workdir: Path) -> None:
    argv, source = case
    if _would_run_heavy(argv):
        return "skipped"  # a valid multi-minute run: not what a fuzzer should start
    ex = Path(tempfile.mkdtemp(dir=workdir))
    if source is not None:
        (ex / "config.toml").write_text(source, encoding="utf-8", errors="surrogatepass")
        argv = [str(ex / "config.toml") if a == source else a for a in argv]
    argv = [str(ex / a) if a in ("out", "vout", "fout") else a for a in argv]
    code, out, err, caught = run_cli(argv)
    try:
        assert code in (0, 2), f"exit {code} for {argv}: {err[-2000:]}"
        assert "Traceback" not in err, f"traceback for {argv}: {err[-2000:]}"
        assert not caught, f"warnings for {argv}: {[str(w.message) for w in caught]}"
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("sapa: error: "), f"{argv}: {err!r}"
            assert out == "", f"{argv}: stdout {out!r}"
            for name in ("vout", "fout"):
                assert not (ex / name).exists(), f"{argv} created {name} on error"
            assert not (ex / "out" / "results.parquet").exists(), f"{argv}: results written on error"
        if code == 0 and "--json" in argv and argv[0] in ("norms", "exact"):
            values = json.loads(out, parse_constant=lambda c: pytest.fail(f"{argv}: {c} in JSON output"))
            assert all(math.isfinite(v) for v in values.values() if isinstance(v, float)), (argv, values)
    finally:
        shutil.rmtree(ex, ignore_errors=True)
    return f"{argv[0] if argv else ''}:{'ok' if code == 0 else 'error'}"


# --------------------------------------------------------------------------- public API


HOSTILE_ARRAYS = st.sampled_from([
    np.full((3, 3), np.nan), np.full((3, 3), 1e200), np.eye(3) * 1e300, np.ones((3, 3), complex), np.ones((3, 3), bool),
    np.ones((3, 3), np.float16), np.array([["a"] * 3] * 3), None, "X", 3.0, [[1, 2], [3]], np.ones(3), np.ones((2, 3, 3)),
    np.ones((0, 3)), np.ones((3, 0)), torch.ones(3, 3), torch.full((3, 3), float("nan")), torch.ones(3, 3, dtype=torch.complex64),
    torch.ones(3, 3, dtype=torch.bool), torch.ones(3, 3, dtype=torch.int64), torch.full((3, 3), 1e300, dtype=torch.float64)])


def _matrix(rows, cols, lo=-3.0, hi=3.0):
    """A float64 (rows, cols) array with entries in [lo, hi]."""
    return st.lists(st.floats(lo, hi), min_size=rows * cols, max_size=rows * cols).map(
        lambda v: np.array(v, dtype=np.float64).reshape(rows, cols))


@st.composite
def norms_case(draw):
    N, D = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["softmax", "poly"]))
    act = (kind, 1 if kind == "softmax" else draw(st.integers(1, 6)), draw(st.floats(1e-3, 1e3)))
    case = {"X": _matrix(N, D), "W": _matrix(D, D), "act": st.just(act), "mask": st.sampled_from(["none", "causal"]),
            "row_scale": st.one_of(st.none(), _matrix(1, N, 0.1, 2).map(lambda a: a[0])),
            "chunk": st.one_of(st.none(), st.integers(1, 5)), "device": st.sampled_from([None, "cpu"]),
            "dtype": st.sampled_from([torch.float64, torch.float32, "float32"]), "with_rows": st.booleans(),
            "paper": st.booleans()}
    bad = {"X": HOSTILE_ARRAYS, "W": st.one_of(HOSTILE_ARRAYS, _matrix(D + 1, D + 1)),
           "act": st.tuples(st.sampled_from(["softmax", "poly", "relu", 3]), st.one_of(st.integers(-1, 9), HOSTILE, st.just(2**70)),
                            st.one_of(st.floats(allow_nan=True, allow_infinity=True), HOSTILE)),
           "mask": st.sampled_from(["full", None, 3]), "row_scale": st.one_of(HOSTILE_ARRAYS, _matrix(1, N + 1)),
           "chunk": st.one_of(st.integers(-1, 0), HOSTILE), "device": st.sampled_from(["cuda", "cuda:3", "tpu", 0, "x", "meta"]),
           "dtype": st.sampled_from([torch.float16, np.float64, "x", None])}
    out = {}
    for key, good in case.items():  # each argument hostile with probability 1/(3·#args)
        out[key] = draw(rarely(good, bad.get(key, good), 3 * len(case)))
    if draw(rarely(st.just(False), st.just(True), 6)):  # and one more, for sure, now and then
        key = draw(st.sampled_from(sorted(bad)))
        out[key] = draw(bad[key])
    if out["paper"] and isinstance(out["W"], np.ndarray) and isinstance(out["X"], np.ndarray) and out["W"].shape == (D, D):
        out["W"] = draw(_matrix(N, D))  # the paper model takes B (N, d) like A
    return out


NORMS_CASE = norms_case()


def check_norms(case) -> None:
    kind, p, scale = case["act"]
    try:
        act = kernel_family(kind, p if kind != "softmax" else 1, scale)
    except InputError:
        act = case["act"]  # hand the junk to the kernel as is
    kw = {k: case[k] for k in ("mask", "row_scale", "chunk", "device", "dtype", "with_rows") if k in case}
    if isinstance(kw.get("row_scale"), np.ndarray) and kw["row_scale"].ndim == 2 and len(kw["row_scale"]):
        kw["row_scale"] = kw["row_scale"][0]  # more often the right rank (an empty (0, k) array goes as is)
    fn = paper_model_norms if case.get("paper") else attention_norms
    try:
        r = fn(case["X"], case["W"], act, **kw)
    except InputError:
        return "error"
    assert all(math.isfinite(v) for v in (r.fro, r.jac_fro, r.max_abs)), r
    assert r.fro >= 0 and r.jac_fro >= 0
    return "ok"


@st.composite
def exact_case(draw):
    model = draw(rarely(st.sampled_from(["paper", "shared", "iid", "tied", "corr"]), st.just("x"), 20))
    D = draw(st.integers(1, 6))
    good = {"p": st.integers(1, 6), "model": st.just(model), "N": st.integers(1, 300), "D": st.just(D),
            "d": st.integers(1, 64), "rho": st.floats(-1, 1), "sigma": st.floats(1e-3, 1e3),
            "W": _matrix(D, D), "sigma_x": st.integers(1, 3).map(lambda k: np.eye(D) * k)}
    if model != "shared":
        good = {k: v for k, v in good.items() if k not in ("W", "sigma_x")}
    if model == "shared" and draw(st.booleans()):
        del good["sigma_x"]
    bad = {"p": st.one_of(st.integers(-1, 0), st.just(13), HOSTILE), "N": st.one_of(HOSTILE, st.sampled_from([10**400, 2**53 + 1])),
           "D": st.one_of(HOSTILE, st.just(10**30)), "d": HOSTILE, "rho": st.one_of(st.floats(1.01, 9), HOSTILE),
           "sigma": st.one_of(st.sampled_from([1e300, 1e-300]), HOSTILE), "W": HOSTILE_ARRAYS, "sigma_x": HOSTILE_ARRAYS}
    out = {k: draw(rarely(v, bad.get(k, v), 3 * len(good))) for k, v in good.items()}
    if draw(rarely(st.just(False), st.just(True), 6)):
        key = draw(st.sampled_from(sorted(bad)))
        out[key] = draw(bad[key])
    return out


EXACT_CASE = exact_case()


def check_exact(case) -> None:
    kw = dict(case)
    try:
        m = exact_moments(kw.pop("p"), kw.pop("model"), kw.pop("N"), kw.pop("D", None), kw.pop("d", None), **kw)
    except InputError:
        return "error"
    assert math.isfinite(m.expected_fro2) and math.isfinite(m.expected_jac_fro2), m
    return "ok"


def check_config(raw) -> None:
    try:
        cfg = config_from_dict(raw)
        check_memory(cfg, cells(cfg))
    except InputError:
        return "error"
    return "ok"


@st.composite
def fit_case(draw):
    K = draw(st.integers(2, 5))
    good = {"N": st.lists(st.integers(1, 1000), min_size=K, max_size=K, unique=True),
            "samples": st.lists(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=4), min_size=K, max_size=K),
            "level": st.floats(0.5, 0.99), "n_boot": st.integers(2, 50), "seed": st.integers(0, 5)}
    bad = {"N": st.one_of(HOSTILE, st.lists(st.one_of(st.floats(allow_nan=True), st.text(max_size=2)), max_size=3),
                          st.just([1] * K), st.lists(st.integers(-3, 0), min_size=K, max_size=K)),
           "samples": st.one_of(HOSTILE, st.lists(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), HOSTILE),
                                                           max_size=3), max_size=4)),
           "level": st.one_of(st.floats(-1, 2), HOSTILE), "n_boot": st.one_of(st.integers(-2, 1), HOSTILE),
           "seed": st.one_of(st.integers(-2, -1), HOSTILE)}
    out = {k: draw(rarely(v, bad[k], 3 * len(good))) for k, v in good.items()}
    if draw(rarely(st.just(False), st.just(True), 6)):
        key = draw(st.sampled_from(sorted(bad)))
        out[key] = draw(bad[key])
    return out


FIT_CASE = fit_case()


def check_fit(case) -> None:
    kw = dict(case)
    try:
        f = fit_exponent(kw.pop("N"), kw.pop("samples"), **kw)
    except InputError:
        return "error"
    assert math.isfinite(f.slope) and all(math.isfinite(v) for v in f.ci), f
    return "ok"


SIZE = rarely(st.integers(1, 5), st.sampled_from([0, -1, 1.5, "3", True, None]), 12)
SAMPLER_CASE = st.fixed_dictionaries({
    "fn": st.sampled_from(["trials", "trials", "paper", "population", "x", "qk", "generator", "cov"]),
    "cfg": st.fixed_dictionaries({}, optional={
        "weights": rarely(st.sampled_from(["iid", "tied", "corr"]), st.sampled_from(["paper", "x"]), 10),
        "rho": rarely(st.floats(-1, 1), HOSTILE, 20),
        "sigma_w": rarely(st.sampled_from([None, 0.5]), st.one_of(st.just(1e300), HOSTILE), 10),
        "inputs": st.sampled_from(["iso", "aniso", "spiked"]),
        "sigma_x": rarely(st.just(1.0), st.one_of(st.just(1e200), HOSTILE), 10),
        "aniso_alpha": rarely(st.sampled_from([0.0, 2.0, 1e6]), HOSTILE, 20), "spikes": rarely(st.integers(1, 3), HOSTILE, 20),
        "spike_strength": rarely(st.just(1.0), st.one_of(st.just(1e300), HOSTILE), 10),
        "mean_norm": rarely(st.sampled_from([0.0, 2.0]), st.one_of(st.just(1e300), HOSTILE), 10)}),
    "N": SIZE, "D": SIZE, "d": SIZE, "T": SIZE,
    "rng": rarely(st.sampled_from(["gen", "list"]), st.sampled_from(["short", "junk", None]), 10),
    "seed": rarely(st.integers(0, 9), HOSTILE, 10),
    "key": rarely(st.sampled_from([{"a": 1}, [1, 2], "k", None]), st.sampled_from([{"a": math.nan}, {"a": object()}]), 10),
    "trial": rarely(st.integers(0, 3), st.one_of(st.just(-1), HOSTILE), 10),
    "W": rarely(st.none(), HOSTILE_ARRAYS, 10), "population_D": st.none(),
})


def check_samplers(case) -> None:
    T = case["T"]
    gens = {"gen": torch.Generator().manual_seed(1), "junk": "rng", None: None,
            "list": [torch.Generator().manual_seed(i) for i in range(T if isinstance(T, int) and 0 < T < 10 else 1)],
            "short": [torch.Generator()]}
    rng = gens[case["rng"]]
    try:
        cfg = samplers.RandomnessModel(**case["cfg"])
        fn = case["fn"]
        if fn == "generator":
            seeds.trial_generator(case["seed"], case["key"], case["trial"])
            return "ok"
        if fn == "cov":
            cov = samplers.power_law_cov(case["D"], case["cfg"].get("aniso_alpha", 1.0), torch.Generator(), case["cfg"].get("sigma_x", 1.0))
            assert bool(torch.isfinite(cov).all())
            return "ok"
        pop = None
        if case["population_D"] is not None or fn == "population":
            pop = samplers.make_population(cfg, case["population_D"] or case["D"], torch.Generator().manual_seed(2))
        if fn == "population":
            return "ok"
        if fn == "paper":
            out = samplers.sample_paper_ab(cfg, T, case["N"], case["d"], rng)
        elif fn == "x":
            out = (samplers.sample_x(pop if pop is not None else samplers.Population(), T, case["N"], case["D"], rng),)
        elif fn == "qk":
            out = samplers.sample_qk(cfg, T, case["D"], case["d"], rng)
        else:
            out = samplers.sample_trials(cfg, case["N"], case["D"], case["d"], T, rng, population=pop, W=case["W"])
    except InputError:
        return "error"
    assert all(isinstance(t, torch.Tensor) and bool(torch.isfinite(t).all()) for t in out)
    return "ok"


# --------------------------------------------------------------------------- tests


@pytest.fixture
def cli_dir(pool, monkeypatch):
    work = pool["dir"] / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)  # relative paths (and a stray "--out .") stay in the sandbox
    return work


API = {"norms": (NORMS_CASE, check_norms), "exact": (EXACT_CASE, check_exact), "config": (CONFIG, check_config),
       "fit": (FIT_CASE, check_fit), "samplers": (SAMPLER_CASE, check_samplers)}


def _not_vacuous(outcomes: collections.Counter, *kinds: str) -> None:
    """Both outcomes occur: the fuzzer reaches real runs, not only the first validation line."""
    for kind in kinds:
        assert outcomes[f"{kind}ok"] >= 3 and outcomes[f"{kind}error"] >= 3, outcomes


def test_fuzz_cli(pool, cli_dir):
    outcomes = fuzz(any_argv(pool["paths"]), lambda c: check_cli(c, cli_dir), 120, derandomize=True)
    _not_vacuous(outcomes, "norms:", "exact:", "sweep:")


@pytest.mark.parametrize("name", sorted(API))
def test_fuzz_api(name):
    strategy, check = API[name]
    _not_vacuous(fuzz(strategy, check, 80, derandomize=True), "")


@pytest.mark.slow
def test_fuzz_thorough(pool, cli_dir):
    """> 1000 examples: 700 command lines and 150 per public function (fresh ones with SAPA_FUZZ_FRESH=1)."""
    fixed = os.environ.get("SAPA_FUZZ_FRESH", "") != "1"
    outcomes = fuzz(any_argv(pool["paths"]), lambda c: check_cli(c, cli_dir), 700, derandomize=fixed)
    _not_vacuous(outcomes, "norms:", "exact:", "sweep:")
    for strategy, check in API.values():
        _not_vacuous(fuzz(strategy, check, 150, derandomize=fixed), "")


# --------------------------------------------------------------------------- regressions


def test_overflow_surfaces_as_one_line_via_cli(pool, cli_dir):
    """x^p overflow names p, N, D; huge softmax logits stay finite or are reported, never inf/NaN."""
    paths = pool["paths"]
    code, out, err, _ = run_cli(["norms", "--x", paths["xbig"], "--w", paths["eye3"], "--activation", "poly", "--p", "3"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "x^3 (p=3" in err and "overflows float64 at N=4, D=3" in err
    code, out, err, _ = run_cli(["norms", "--x", paths["x53"], "--w", paths["w33"], "--activation", "softmax",
                                 "--scale", "1e150", "--json"])  # logits ~1e150: one-hot rows
    assert code == 0, err
    r = json.loads(out)
    assert 1 <= r["fro_norm"] <= math.sqrt(5) + 1e-12
    # The Jacobian is of order e^(-gap), gap ~1e150: below float64's range, so null with a finite log10, never 0.
    for key in ("jac_fro_norm", "jac_s_fro_norm"):
        assert r[key] is None and key in r["below_double_range"]
        assert math.isfinite(r["log10_" + key]) and r["log10_" + key] < -307
    code, _, err, _ = run_cli(["exact", "--p", "3", "--model", "iid", "--N", "5", "--D", "4", "--d", "2", "--sigma", "1e300"])
    assert code == 2 and "overflows float64" in err


def test_fuzz_found_regressions(pool, cli_dir):
    """Each of these raised a traceback (or printed a silent inf / a warning) before it was fixed."""
    paths = pool["paths"]
    bad_argv = [
        ["exact", "--p", "3", "--model", "iid", "--N", str(10**400), "--D", "4", "--d", "2"],
        ["norms", "--x", paths["x53"], "--w", paths["w33"], "--activation", "poly", "--p", str(10**30)],
        ["norms", "--x", paths["complex"], "--w", paths["w33"], "--activation", "poly"],
        ["sweep", paths["missing"], "--out", "/dev/null/x"],
    ]
    # a log (stderr not a TTY): the softmax cell finished, then x^1 overflowed — the half-way progress line
    # once printed at close came before the error line
    overflow = cli_dir / "overflow_after_one_cell.toml"
    overflow.write_text('"N" = 1\n"D" = 1\n"sigma_x" = 1e+200\n[[activation]]\n"kind" = "softmax"\n'
                        '[[activation]]\n"kind" = "poly"\n"p" = 1\n', encoding="utf-8")
    bad_argv.append(["sweep", str(overflow), "--out", str(cli_dir / "overflow_out")])
    for argv in bad_argv:
        code, out, err, caught = run_cli(argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and not caught, (argv, err)
    # the harness itself: an empty (0, k) row scale once raised IndexError in check_norms, not in the kernel
    empty_rows = {"X": np.array([[0.0]]), "W": np.array([[0.0]]), "act": ("softmax", 1, 1.0), "mask": "none",
                  "row_scale": np.zeros((0, 3)), "chunk": None, "device": None, "dtype": torch.float64,
                  "with_rows": False, "paper": False}
    assert check_norms(empty_rows) == "error"
    with pytest.raises(InputError, match="n_boot"):
        fit_exponent([1, 2], [[1.0], [2.0]], n_boot=0)
    with pytest.raises(InputError, match="seed"):
        fit_exponent([1, 2], [[1.0], [2.0]], seed=-1)
    with pytest.raises(InputError, match="numeric"):
        fit_exponent(["a", "b"], [[1.0], [2.0]])
    with pytest.raises(InputError, match="T must be"):
        samplers.sample_paper_ab(samplers.RandomnessModel(weights="paper"), -1, 3, 2, torch.Generator())
    with pytest.raises(InputError, match="rng must be"):
        samplers.sample_trials(samplers.RandomnessModel(), 3, 2, 2, 2, "rng")
    with pytest.raises(InputError, match="key must be plain JSON"):
        seeds.trial_generator(0, {"a": math.nan}, 0)
    with pytest.raises(InputError, match="population"):
        pop = samplers.make_population(samplers.RandomnessModel(inputs="aniso"), 4, torch.Generator())
        samplers.sample_trials(samplers.RandomnessModel(inputs="aniso"), 3, 2, 2, 2, torch.Generator(), population=pop)
    with pytest.raises(InputError, match="overflows"):
        samplers.sample_trials(samplers.RandomnessModel(sigma_w=1e300), 3, 2, 2, 2, torch.Generator())
    with pytest.raises(InputError, match="not available"):
        attention_norms(np.ones((2, 2)), np.eye(2), power(1), device="cuda:99")
    with pytest.raises(InputError, match="device"):
        config_from_dict({"N": [4], "D": [2], "activation": [{"kind": "softmax"}], "device": "tpu"})


def test_exact_huge_D_with_default_sigma_is_one_line(cli_dir):
    code, out, err, _ = run_cli(["exact", "--p", "1", "--model", "iid", "--N", "4", "--D", str(10**400), "--d", "2"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("bad", ["zero", "hugehdr", "hugehdr3", "dt64", "td64", "numstr", "rec1", "bool"])
def test_hostile_npy_files_are_one_line(pool, cli_dir, bad):
    """Empty, huge-header and non-numeric .npy files: one line naming the file, exit 2."""
    paths = pool["paths"]
    for argv in (["norms", "--x", paths[bad], "--w", paths["eye3"], "--activation", "poly"],
                 ["norms", "--x", paths["x53"], "--w", paths[bad], "--activation", "softmax"],
                 ["exact", "--p", "1", "--model", "shared", "--N", "4", "--w", paths[bad]]):
        code, out, err, caught = run_cli(argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and not caught, (argv, err)
        assert paths[bad] in err, err
