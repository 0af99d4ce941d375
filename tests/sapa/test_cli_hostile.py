"""Hostile results folders and outputs (sapa/cli.py, figures/, common/figdata.py, common/): a name read from a
file never chooses where sapa writes, a device or pipe is never replaced or read, and each refusal is one line."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import warnings

import numpy as np
import pandas as pd
import pytest

from sapa.cli import main


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _deadline(seconds: int):
    """DeadlineExceeded if the block blocks for longer than ``seconds`` (a FIFO opened for reading waits for a writer)."""
    from sapa.common.deadline import deadline

    return deadline(seconds, "the test")


@pytest.fixture(scope="module")
def _overhead_bench() -> dict:
    """One tiny overhead benchmark per module (its numbers are not under test, only what is drawn from them)."""
    from sapa.empirics.timing.overhead import OverheadGrid, bench_overhead

    g = OverheadGrid(Ns=(16, 32), d=8, ps=(1,), repeats=1, methods=("naive",), crossover_ds=(4,),
                     crossover_masks=("none",), time_cap_s=1.0, block_s=0.002)
    return bench_overhead(grid=g, device="cpu", threads=1)


@pytest.fixture
def overhead_data(_overhead_bench) -> dict:
    import copy

    return copy.deepcopy(_overhead_bench)  # each test may edit its copy


@pytest.fixture
def only_stored(monkeypatch):
    import sapa.figures.regenerate as rg

    monkeypatch.setattr(rg, "JOBS", [])


def _files_under(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


# --------------------------------------------------------------------------- 1. names from files


@pytest.mark.parametrize("stem", ["../../escape", "../escape", "/ABS/escape", "..", ".hidden", "a/b", "x\0y"])
def test_a_stored_stem_never_chooses_where_figures_go(tmp_path, capsys, only_stored, overhead_data, stem):
    from sapa.common import figdata

    results = tmp_path / "deep" / "results"
    stem = stem.replace("/ABS", str(tmp_path))
    figdata.write(results / "data" / "overhead.json", overhead_data, stem)
    before = _files_under(tmp_path)
    code, out, err = _run(["figures", "--results", results], capsys)
    assert code == 2 and out == "", err
    assert "is not a plain file name" in err and "Traceback" not in err
    assert _files_under(tmp_path) == before  # nothing written, anywhere


def test_a_symlinked_figures_folder_is_refused(tmp_path, capsys, only_stored, overhead_data):
    from sapa.common import figdata

    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    elsewhere.mkdir()
    figdata.write(results / "data" / "overhead.json", overhead_data, "ov_tiny")
    (results / "figures").symlink_to(elsewhere)
    code, out, err = _run(["figures", "--results", results], capsys)
    assert code == 2 and list(elsewhere.iterdir()) == []
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sapa: error: ") and "symbolic link" in lines[0], err


def test_save_keeps_every_path_inside_its_folder(tmp_path):
    import matplotlib.pyplot as plt

    from sapa.common.validate import InputError
    from sapa.figures import style

    out = tmp_path / "figs"
    out.mkdir()
    (out / "sub").symlink_to(tmp_path)
    for bad in ("../x", "sub/x", str(tmp_path / "x")):
        with pytest.raises(InputError):
            style.save(plt.figure(), out, bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figs"]
    assert [p.name for p in style.save(plt.figure(), out, "fine_D64")] == ["fine_D64.png", "fine_D64.pdf"]


# --------------------------------------------------------------------------- 2. devices and pipes are never replaced


def _special_files(tmp_path) -> list:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    found = [fifo]
    dev = tmp_path / "null"
    with contextlib.suppress(OSError):  # a character device like /dev/null (root only)
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        found.append(dev)
    link = tmp_path / "link"
    link.symlink_to(fifo)  # /dev/stdout is such a link
    return found + [link]


def test_bench_out_is_never_a_device_or_pipe(tmp_path, capsys, monkeypatch):
    import sapa.empirics.timing.bench

    monkeypatch.setattr(sapa.empirics.timing.bench, "bench_all", lambda *a, **k: pytest.fail("work started"))
    for target in _special_files(tmp_path):
        mode = os.lstat(target).st_mode
        code, out, err = _run(["bench", "--quick", "--part", "kernels", "--out", target], capsys)
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and ("is not a regular file" in lines[0] or "is a symbolic link" in lines[0]), err
        assert os.lstat(target).st_mode == mode  # still the device / pipe / link


def test_bench_out_is_never_a_symbolic_link(tmp_path, capsys, monkeypatch):
    # /dev/stdout is a link to /proc/self/fd/1: with stdout a regular file the link's target is regular, and the
    # result would be renamed over the link itself, in /dev. Any link is refused, the file it names is not.
    import sapa.empirics.timing.bench

    monkeypatch.setattr(sapa.empirics.timing.bench, "bench_all", lambda *a, **k: pytest.fail("work started"))
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    code, out, err = _run(["bench", "--quick", "--part", "kernels", "--out", tmp_path / "link.json"], capsys)
    assert code == 2 and "is a symbolic link" in err and err.count("\n") == 1, err
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "{}"


@pytest.mark.parametrize("flag", ["--x", "--w"])
def test_npy_inputs_that_are_pipes_or_devices_are_named_as_such(tmp_path, capsys, flag):
    import numpy as np

    np.save(tmp_path / "ok.npy", np.eye(3))
    os.mkfifo(tmp_path / "p.npy")
    (tmp_path / "z.npy").symlink_to("/dev/zero")
    for bad, kind in (("p.npy", "a named pipe"), ("z.npy", "a character device")):
        files = {"--x": tmp_path / "ok.npy", "--w": tmp_path / "ok.npy", flag: tmp_path / bad}
        with _deadline(60):
            code, out, err = _run(["norms", "--x", files["--x"], "--w", files["--w"], "--activation", "softmax"], capsys)
        assert code == 2 and f"is not a regular file ({kind})" in err and err.count("\n") == 1, err


def test_atomic_write_never_renames_over_a_device_or_pipe(tmp_path):
    from sapa.common.atomic import atomic_write_text

    for target in _special_files(tmp_path):
        mode = os.lstat(target).st_mode
        if stat.S_ISLNK(mode):
            continue  # a link is replaced, its target untouched
        with pytest.raises(FileExistsError, match="not a regular file"):
            atomic_write_text(target, "x")
        assert os.lstat(target).st_mode == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


# --------------------------------------------------------------------------- 8. reading: regular files, bounded


def test_a_fifo_in_a_results_folder_does_not_hang_figures(tmp_path, capsys, only_stored, overhead_data):
    from sapa.common import figdata

    figdata.write(tmp_path / "data" / "overhead.json", overhead_data, "ov_tiny")
    os.mkfifo(tmp_path / "data" / "worst_case.json")
    with _deadline(60):
        code, out, err = _run(["figures", "--results", tmp_path], capsys)
    assert code == 0, err
    assert "sapa: skipped figure 'worst case':" in err and "is not a regular file (a named pipe)" in err


def test_a_link_to_dev_zero_is_not_read(tmp_path):
    from sapa.common import figdata
    from sapa.common.figdata import FigureDataError

    (tmp_path / "x.json").symlink_to("/dev/zero")
    with _deadline(60), pytest.raises(FigureDataError, match="not a regular file"):
        figdata.read(tmp_path / "x.json")


def test_a_parquet_bomb_is_refused_before_decompressing(tmp_path, monkeypatch):
    import sapa.common.readfile
    from sapa.common import figdata
    from sapa.common.figdata import FigureDataError

    df = pd.DataFrame({"a": np.zeros(2**19)})  # 4 MiB of float64 that compresses to a few kB
    path = figdata.write(tmp_path / "bomb.json", {"t": df}, "bomb")
    assert path.stat().st_size < 200_000
    monkeypatch.setattr(sapa.common.readfile, "MAX_READ_BYTES", 2**20)
    with pytest.raises(FigureDataError, match="declares 524,288 rows"):
        figdata.read(path)
    monkeypatch.setattr(sapa.common.readfile, "MAX_READ_BYTES", 2**23)
    pd.testing.assert_frame_equal(figdata.read(path)[0]["t"], df)


# --------------------------------------------------------------------------- 9. one line, no warning before it


def test_float128_beyond_float64_is_one_line_without_warnings(tmp_path, capsys):
    if np.finfo(np.longdouble).max <= np.finfo(np.float64).max:
        pytest.skip("no extended precision long double here")
    x = np.ones((4, 3), dtype=np.longdouble)
    x[0, 0] = np.longdouble("1e4000")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", np.eye(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = _run(["norms", "--x", tmp_path / "x.npy", "--w", tmp_path / "w.npy",
                               "--activation", "softmax"], capsys)
    assert [str(w.message) for w in caught] == []
    assert code == 2 and err.count("\n") == 1 and err.startswith("sapa: error: ") and "float64's range" in err, err


# --------------------------------------------------------------------------- 3–6. audits: bounded, no traceback, ∞ said


def _audit_json(argv, capsys) -> dict:
    code, out, err = _run(["audit", *argv, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("text,where", [("tan(x)", "pi/2"), ("1/(x - 1/40)", "1/40"), ("1/x", "x = 0"),
                                        ("Abs(x)**(-1)", "x = 0"), ("1/(x - 1000)", "x = 1000")])
def test_a_pole_on_the_real_line_gives_infinite_expectations_and_a_fails(text, where, capsys):
    a = _audit_json([text, "--D", "16", "--d", "4", "--logit-scale", "S"], capsys)  # the pole where written: x = S_ij
    assert a["infinite"] == ["fro", "jac_s", "jac"] and where in a["infinite_because"][0]
    assert a["expected_fro2"] is None and a["expected_jac_fro2"] is None  # ∞ is not JSON: null, named in "infinite"
    assert a["verdict"] == "FAILS" and "E‖φ(S)‖²_F = ∞" in a["verdict_by_construction"]


def test_a_log_singularity_leaves_the_norm_finite_and_the_jacobian_infinite(capsys):
    a = _audit_json(["log(Abs(x - 1/40))", "--D", "16", "--d", "4"], capsys)
    assert a["infinite"] == ["jac_s", "jac"] and a["expected_jac_fro2"] is None and a["expected_jac_s_fro2"] is None
    assert a["method"] == "quadrature" and a["expected_fro2"] > 0


def test_audit_work_beyond_the_limit_is_refused_unless_forced(capsys, monkeypatch):
    import sapa.commands.audit_conventions

    code, out, err = _run(["audit", "exp(x/8)", "--normalize", "row", "--trials", "1000000000"], capsys)
    assert code == 2 and "flops" in err and "--force" in err and err.count("\n") == 1
    seen = []
    monkeypatch.setattr(sapa.commands.audit_conventions, "audit_both", lambda *a, **k: seen.append(k) or {"forced": True})
    code, out, err = _run(["audit", "exp(x/8)", "--normalize", "row", "--trials", "1000000000", "--force", "--json"],
                          capsys)
    assert code == 0 and json.loads(out) == {"forced": True} and seen[0]["trials"] == 10**9, err


# --------------------------------------------------------------------------- 7. sapa exact: no silent underflow


def _exact(argv, capsys) -> dict:
    code, out, err = _run(["exact", "--p", "3", *argv, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def test_exact_log10_fields_survive_underflow(capsys, tmp_path):
    # E‖φ‖² and E‖∂φ/∂X‖² are homogeneous in the weights: degree 4p in σ (iid; S is quadratic in σ, and ∂S/∂X
    # linear in W = QKᵀ), 2p in W (shared). So log₁₀ at a scale 10^-300 is log₁₀ at scale 1 minus 300·degree:
    # an independent check of the exact log10 fields.
    size = ["--N", "16", "--D", "8", "--d", "4"]
    one, tiny = (_exact(["--model", "iid", *size, "--sigma", s], capsys) for s in ("1", "1e-300"))
    assert tiny["expected_fro2"] == 0.0  # below float64: the log10 fields carry it
    for k in ("expected_fro2", "expected_jac_fro2", "m_off", "m_diag"):
        assert tiny[f"log10_{k}"] == pytest.approx(np.log10(one[k]) - 300 * 12, abs=1e-9), k
    W = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [1.0, 0.0, 1.0]])
    np.save(tmp_path / "w1.npy", W)
    np.save(tmp_path / "w300.npy", 1e-300 * W)
    a, b = (_exact(["--model", "shared", "--w", tmp_path / f, "--N", "16"], capsys) for f in ("w1.npy", "w300.npy"))
    assert b["expected_fro2"] == 0.0
    for k in ("expected_fro2", "expected_jac_fro2"):
        assert b[f"log10_{k}"] == pytest.approx(np.log10(a[k]) - 300 * 6, abs=1e-9), k


@pytest.mark.parametrize("argv", [["verify", "--out", ""], ["sweep", "--out", " "], ["train", "--out", ""],
                                  ["figures", "--results", ""]])
def test_an_empty_out_is_refused_not_taken_for_the_current_folder(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(argv, capsys)
    assert code == 2 and "expected a path" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_verify_refuses_a_results_folder_with_a_link_inside(tmp_path, capsys):
    out, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    (out).mkdir()
    elsewhere.mkdir()
    (out / "data").symlink_to(elsewhere)
    code, _, err = _run(["verify", "--out", out, "--only", "thm4.1-norm"], capsys)
    assert code == 2 and "symbolic link" in err and err.count("\n") == 1
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("where", ["ledger.json", "train/mechanism/copy1_N16_p1.json"])
def test_a_named_pipe_in_the_results_folder_is_refused_at_once(tmp_path, capsys, where):
    """A FIFO at OUT/ledger.json used to hang verify (and one among the mechanism chunks, train)."""
    out = tmp_path / "results"
    (out / where).parent.mkdir(parents=True)
    os.mkfifo(out / where)
    with _deadline(20):
        code, _, err = _run(["verify", "--out", out, "--only", "thm4.1-norm"], capsys)
    assert code == 2 and "named pipe" in err and err.count("\n") == 1
    assert stat.S_ISFIFO(os.lstat(out / where).st_mode)


def test_expected_seconds_never_blocks_on_a_pipe_or_reads_a_device(tmp_path):
    from sapa.budget import budget_named
    from sapa.commands.verify_progress import expected_seconds

    def not_from_the_ledger():  # no ledger read: the shipped costs' estimate (sapa/commands/verify_eta.py)
        return expected_seconds(tmp_path, budget_named("quick", 0), probe=lambda: 0.01)[1].startswith("first quick run")

    os.mkfifo(tmp_path / "ledger.json")
    with _deadline(20):
        assert not_from_the_ledger()
    (tmp_path / "ledger.json").unlink()
    (tmp_path / "ledger.json").symlink_to("/dev/zero")
    with _deadline(20):
        assert not_from_the_ledger()


def test_a_parquet_dictionary_bomb_is_refused_before_it_is_decoded(tmp_path):
    """One 1 MiB string referenced by 300 rows: 49 KB on disk, 300 MiB decoded; refused from the dictionary."""
    import resource

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sapa.common.readfile import read_parquet_table
    from sapa.common.validate import InputError

    arr = pa.DictionaryArray.from_arrays(pa.array(np.zeros(300, dtype=np.int32)), pa.array(["x" * (1 << 20)]))
    pq.write_table(pa.table({"s": arr}), tmp_path / "bomb.parquet", store_schema=False)  # read back as plain text
    assert (tmp_path / "bomb.parquet").stat().st_size < 100_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match="decode to more than the limit"):
        read_parquet_table(tmp_path / "bomb.parquet", "bomb")
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 100 * 2**20
    ok = read_parquet_table(tmp_path / "bomb.parquet", "bomb", limit=2**30)
    assert ok.schema.field("s").type == pa.string() and len(ok.column("s")[0].as_py()) == 1 << 20


@pytest.mark.parametrize("command,kept", [("audit", "nothing was written"),
                                          ("train", "every training chunk that had finished is kept")])
def test_an_interrupt_says_what_was_kept_for_that_command(tmp_path, capsys, monkeypatch, command, kept):
    """'finished results were kept' was printed where nothing was (an interrupted audit)."""
    from sapa.commands import command_module

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(command_module(command), "run", interrupted)
    argv = ["audit", "x/sqrt(N)"] if command == "audit" else ["train", "--out", tmp_path / "t"]
    code, _, err = _run(argv, capsys)
    assert code == 130 and err.strip().splitlines()[-1] == f"sapa: interrupted; {kept}" + (
        "; a rerun resumes from them" if command == "train" else "")


def test_a_full_disk_names_the_file(tmp_path, monkeypatch):
    import errno

    from sapa.common.atomic import atomic_write

    def full(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as err:
        atomic_write(tmp_path / "ledger.json", full)
    assert err.value.filename == str(tmp_path / "ledger.json") and err.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_messages_name_what_is_wrong_in_one_short_line(tmp_path, capsys):
    """A D mismatch says which inputs disagree; a nested dtype is not kilobytes; a FIFO is not 'not found'."""
    x, wq, nested = tmp_path / "x.npy", tmp_path / "wq.npy", tmp_path / "nested.npy"
    np.save(x, np.ones((4, 6)))
    np.save(wq, np.ones((7, 7)))
    dt = np.dtype([("a", np.float64)])
    for _ in range(60):
        dt = np.dtype([("f", dt)])
    np.save(nested, np.zeros(2, dtype=dt))
    os.mkfifo(tmp_path / "sched.json")
    cases = [(["norms", "--x", x, "--wq", wq, "--wk", wq, "--activation", "x"], "--x and --wq do not match"),
             (["norms", "--x", nested, "--w", wq, "--activation", "softmax"], "structured array"),
             (["train", "--out", tmp_path / "t", "--scheduler", tmp_path / "sched.json"], "named pipe"),
             (["audit", "x", "--model", "iid", "--rho", "0.3"], "--rho applies to --model corr only")]
    for argv, needle in cases:
        with _deadline(30):
            code, _, err = _run(argv, capsys)
        assert code == 2 and needle in err and err.count("\n") == 1 and len(err) < 400, (argv, err)


@pytest.mark.slow  # a fresh interpreter drawing a figure (~3 s)
def test_matplotlib_writes_no_cache_into_home(tmp_path):
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    env["HOME"] = str(home)
    script = "from sapa.cli import main\nmain(['audit', 'x', '--json'])\nimport matplotlib; matplotlib.get_cachedir()"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    assert list(home.iterdir()) == []
    subprocess.run([sys.executable, "-c", "import matplotlib; matplotlib.get_cachedir()"], env=env, check=True)
    assert list(home.iterdir()) != []  # without sapa's main, matplotlib does write there: the test can fail


@pytest.mark.parametrize("exc", [MemoryError("Unable to allocate 20.0 GiB for an array"),
                                 RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't "
                                              "allocate memory: you tried to allocate 21474836480 bytes.")])
def test_a_failed_allocation_is_one_line_not_a_traceback(capsys, monkeypatch, exc):
    """`audit "exp(x/8)" --normalize row --N 100000 --force` ended in a 20 GB torch allocation traceback."""
    from sapa.commands import command_module

    def too_big(args):
        raise exc

    monkeypatch.setattr(command_module("audit"), "run", too_big)
    code, _, err = _run(["audit", "exp(x/8)", "--normalize", "row", "--N", "100000", "--force"], capsys)
    assert code == 2 and err.startswith("sapa: error: out of memory (") and err.count("\n") == 1


def test_other_runtime_errors_still_raise(monkeypatch):
    from sapa.commands import command_module

    def broken(args):
        raise RuntimeError("a bug, not a request")

    monkeypatch.setattr(command_module("audit"), "run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["audit", "x"])
