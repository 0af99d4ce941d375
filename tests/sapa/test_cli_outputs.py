"""Tests for where `sapa` writes (sapa/cli.py): unwritable locations refused before any work, one run per
results directory, `sapa figures` exit 2 when it drew nothing, `verify --only` merged into the ledger, and no
pickle read from a results folder."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from sapa.cli import main

# ids no figure job of `verify` draws for (so a faked verify draws nothing)
A, B = "thm4.1-norm", "causal-masking"


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code, out, err, needle: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sapa: error: ") and needle in lines[0], err
    assert "Traceback" not in err


@pytest.fixture
def no_work(monkeypatch):
    """Every command's work fails the test if it starts."""
    import sapa.empirics.timing.bench
    import sapa.empirics.timing.overhead
    import sapa.empirics.montecarlo.sweep
    import sapa.empirics.training.train_study
    import sapa.figures.regenerate
    import sapa.ledger

    def fail(*a, **k):
        pytest.fail("work started before the output location was checked")

    for mod, name in [(sapa.ledger, "run_claim"), (sapa.empirics.montecarlo.sweep, "run_sweep"), (sapa.empirics.training.train_study, "run_study"),
                      (sapa.empirics.timing.bench, "bench_all"), (sapa.empirics.timing.overhead, "bench_overhead"),
                      (sapa.figures.regenerate, "run_jobs")]:
        monkeypatch.setattr(mod, name, fail)


def _commands(where: str, tmp_path) -> list[list[str]]:
    return [["verify", "--only", A, "--out", where], ["sweep", "quick", "--out", where], ["train", "--out", where],
            ["bench", "--out", f"{where}/bench.json"], ["figures", "--results", tmp_path, "--out", where]]


@pytest.mark.parametrize("where, needle", [("/proc/x", "cannot write in /proc"), ("/proc", "cannot write in /proc"),
                                           ("/dev/null/x", "/dev/null is not a directory")])
@pytest.mark.parametrize("k", range(5))
def test_unwritable_output_is_refused_before_any_work(tmp_path, capsys, no_work, where, needle, k):
    argv = _commands(where, tmp_path)[k]
    _one_error_line(*_run(argv, capsys), needle)


@pytest.mark.parametrize("k", range(5))
def test_an_existing_file_as_output_directory(tmp_path, capsys, no_work, k):
    f = tmp_path / "file"
    f.write_text("x")
    _one_error_line(*_run(_commands(str(f), tmp_path)[k], capsys), str(f))


@pytest.mark.parametrize("k", range(5))
def test_a_read_only_output_directory(tmp_path, capsys, no_work, k, read_only_dir):
    # read-only for root too (tests/conftest.py: chattr +i), as CI runs
    _one_error_line(*_run(_commands(str(read_only_dir), tmp_path)[k], capsys), "cannot write in")


def test_figures_from_proc_is_refused(capsys, no_work):
    _one_error_line(*_run(["figures", "--results", "/proc"], capsys), "figure directory /proc/figures")


def test_figures_exit_2_when_no_figure_was_written(tmp_path, capsys, monkeypatch):
    import sapa.figures.regenerate as rg

    monkeypatch.setattr(rg, "JOBS", [])
    code, out, err = _run(["figures", "--results", tmp_path], capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == len(rg.STORED_JOBS) + 1
    assert "sapa: skipped figure 'scale direction': missing stored results: data/scale_direction.json" in lines
    assert lines[-1] == f"sapa: error: no figure could be written ({len(rg.STORED_JOBS)} skipped: see above)"


def test_figures_draws_from_stored_json(tmp_path, capsys, monkeypatch):
    import sapa.figures.regenerate as rg
    from sapa.common import figdata
    from sapa.empirics.timing.overhead import OverheadGrid, bench_overhead

    monkeypatch.setattr(rg, "JOBS", [])
    g = OverheadGrid(Ns=(16, 32), d=8, ps=(1,), repeats=1, methods=("naive",), crossover_ds=(4,),
                     crossover_masks=("none",), time_cap_s=1.0, block_s=0.002)  # short blocks: only the data is drawn
    figdata.write(tmp_path / "data" / "overhead.json", bench_overhead(grid=g, device="cpu", threads=1), "ov_tiny")
    code, out, err = _run(["figures", "--results", tmp_path], capsys)
    assert code == 0, err
    assert out.split() == [str(tmp_path / "figures" / f"ov_tiny{s}") for s in
                           (".png", ".pdf", "_crossover.png", "_crossover.pdf", "_model.png", "_model.pdf")]
    assert "sapa: skipped figure 'worst case'" in err
    # one progress line per figure drawn, numbered among all; every figure not drawn is named with its reason
    n = len(rg.STORED_JOBS)
    k = [j.name for j in rg.STORED_JOBS].index("overhead") + 1
    assert f"[{k}/{n}] figure 'overhead' ..." in err.splitlines()
    skipped = [ln for ln in err.splitlines() if ln.startswith("sapa: skipped figure")]
    assert len(skipped) == n - 1
    for name in ("study learning curves", "mechanism learning curves"):
        assert any(ln.startswith(f"sapa: skipped figure {name!r}: missing stored results: data/") for ln in skipped)


# --------------------------------------------------------------------------- no pickle from a results folder


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def test_a_malicious_pickle_in_a_results_folder_does_nothing(tmp_path, capsys, monkeypatch):
    """Pickles as the old ``.pkl`` files and under the new ``.json`` names: nothing is unpickled, nothing runs."""
    import sapa.figures.regenerate as rg

    monkeypatch.setattr(rg, "JOBS", [])
    calls = []
    for name in ("load", "loads"):
        monkeypatch.setattr(pickle, name, lambda *a, _n=name, **k: calls.append(_n))
    marker = tmp_path / "pwned"
    data = tmp_path / "res" / "data"
    data.mkdir(parents=True)
    evil = pickle.dumps({"res": _Payload(str(marker)), "stem": "x"})
    for name in ("scale_direction", "causal_masking", "overhead", "training_norms", "worst_case"):
        (data / f"{name}.pkl").write_bytes(evil)
    (data / "overhead.json").write_bytes(evil)
    code, _, err = _run(["figures", "--results", tmp_path / "res"], capsys)
    assert code == 2 and not marker.exists() and calls == []
    assert "an old .pkl beside it is never read" in err and "not a figure-data JSON file" in err


def _unpickling_calls(tree) -> list[tuple[int, str]]:
    """Calls in a module's AST that can unpickle: ``pickle/dill/cloudpickle/joblib.load(s)``, ``Unpickler``,
    ``read_pickle``, ``shelve.open``, any ``allow_pickle=True``, ``torch.load`` without ``weights_only=True``."""
    import ast

    hits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        kw = {k.arg: k.value for k in node.keywords}
        true = lambda v: isinstance(v, ast.Constant) and v.value is True
        if (owner in ("pickle", "dill", "cloudpickle", "joblib", "_pickle") and name in ("load", "loads")
                or name in ("Unpickler", "read_pickle") or (owner, name) == ("shelve", "open")
                or "allow_pickle" in kw and not (isinstance(kw["allow_pickle"], ast.Constant)
                                                 and kw["allow_pickle"].value is False)
                or (owner, name) == ("torch", "load") and not true(kw.get("weights_only"))):
            hits.append((node.lineno, f"{owner}.{name}" if owner else name))
    return hits


def test_no_source_can_unpickle():
    """No module of sapa reads pickle: checked on the syntax tree of every source file (not on comments)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    hits = [f"{path.relative_to(root)}:{line}: {what}"
            for pkg in ("sapa", "empirics", "figures", "theory", "notebooks")
            for path in sorted((root / pkg).rglob("*.py"))
            for line, what in _unpickling_calls(ast.parse(path.read_text(encoding="utf-8")))]
    assert hits == []


def test_the_source_check_sees_each_way_to_unpickle():
    import ast

    bad = ["pickle.load(f)", "pickle.loads(b)", "pickle.Unpickler(f).load()", "np.load(p, allow_pickle=True)",
           "np.load(p, allow_pickle=flag)", "torch.load(p)", "torch.load(p, weights_only=False)",
           "pd.read_pickle(p)", "joblib.load(p)", "shelve.open(p)"]
    good = ["np.load(p, allow_pickle=False)", "np.load(p)", "torch.load(p, weights_only=True)", "json.loads(s)",
            "'pickle.load(f)'"]
    assert all(_unpickling_calls(ast.parse(c)) for c in bad)
    assert not any(_unpickling_calls(ast.parse(c)) for c in good)


# --------------------------------------------------------------------------- one run per results directory


def _holder(out) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        import time
        from sapa.common.outdir import exclusive
        with exclusive({str(out)!r}):
            print("held", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("argv, held", [
    (["verify", "--only", A], ""), (["sweep", "quick"], ""), (["train"], ""), (["verify", "--only", A], "train"),
    (["verify", "--only", A], "sweep"),
])
def test_a_second_run_into_one_out_is_refused(tmp_path, capsys, no_work, argv, held):
    out = tmp_path / "res"
    proc = _holder(out / held if held else out)
    try:
        _one_error_line(*_run([*argv, "--out", out], capsys), "is in use by another sapa run")
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- verify --only merges


@pytest.fixture
def fake_claims(monkeypatch):
    """``run_claim`` made instant: evidence {"run": k} counts the calls."""
    import sapa.ledger
    from sapa.ledger import Entry

    calls = []

    def run_claim(claim, ctx):
        calls.append(claim.id)
        return Entry(id=claim.id, statement=claim.statement, verdict="HOLDS", evidence={"run": len(calls)})

    monkeypatch.setattr(sapa.ledger, "run_claim", run_claim)
    return calls


def test_verify_only_merges_into_the_existing_ledger(tmp_path, capsys, fake_claims):
    out = tmp_path / "res"
    assert _run(["verify", "--only", A, B, "--out", out], capsys)[0] == 0
    first = json.loads((out / "ledger.json").read_text())
    assert _run(["verify", "--only", B, "--out", out], capsys)[0] == 0
    led = json.loads((out / "ledger.json").read_text())
    assert [c["id"] for c in led["claims"]] == [A, B]
    a, b = led["claims"]
    assert a == first["claims"][0] and "rerun" not in a  # kept as it was
    assert b["evidence"] == {"run": 3} and b["rerun"] is True and b["rerun_utc"] == led["provenance"]["started_utc"]
    prov = led["provenance"]
    assert prov["reran"] == [B] and prov["earlier_runs"] == [first["provenance"]]
    report = (out / "report.md").read_text()
    assert A in report and B in report


def test_verify_only_refuses_a_ledger_of_another_budget_or_seed(tmp_path, capsys, fake_claims):
    out = tmp_path / "res"
    assert _run(["verify", "--only", A, "--out", out], capsys)[0] == 0
    before = (out / "ledger.json").read_bytes()
    fake_claims.clear()
    _one_error_line(*_run(["verify", "--only", A, "--seed", "1", "--out", out], capsys),
                    "is from budget 'quick', seed 0, this run is budget 'quick', seed 1")
    _one_error_line(*_run(["verify", "--only", A, "--budget", "full", "--out", out], capsys), "would mix budgets")
    assert fake_claims == [] and (out / "ledger.json").read_bytes() == before
    (out / "ledger.json").write_text('{"claims": [')
    _one_error_line(*_run(["verify", "--only", A, "--out", out], capsys), "cannot be read")
    assert fake_claims == []


# --------------------------------------------------------------------------- ledger_merge edge cases (mutation testing)


_ENTRY = {"id": A, "statement": "s", "verdict": "HOLDS", "evidence": {}}  # the least an entry kept in a merge has


def _ledger_at(out, budget: dict, claims=None, **prov) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"claims": [_ENTRY] if claims is None else claims,
           "provenance": {"budget": budget, **prov}}
    (out / "ledger.json").write_text(json.dumps(doc))


def test_prior_ledger_accepts_a_matching_budget_and_names_what_differs(tmp_path):
    from dataclasses import asdict

    from sapa.budget import budget_named
    from sapa.commands.ledger_merge import prior_ledger
    from sapa.common.validate import InputError

    quick = budget_named("quick", 0)
    assert prior_ledger(tmp_path / "none", quick) is None
    theirs = json.loads(json.dumps(asdict(quick)))
    _ledger_at(tmp_path / "ok", theirs, seed=0)
    assert prior_ledger(tmp_path / "ok", quick)["claims"] == [_ENTRY]
    _ledger_at(tmp_path / "noseed", {k: v for k, v in theirs.items() if k != "seed"} | {"seed": 0})
    assert prior_ledger(tmp_path / "noseed", quick) is not None  # the seed read from the budget when absent
    _ledger_at(tmp_path / "seed1", theirs, seed=1)
    with pytest.raises(InputError, match=r"is from budget 'quick', seed 1, this run is budget 'quick', seed 0;"):
        prior_ledger(tmp_path / "seed1", quick)
    _ledger_at(tmp_path / "rows", {**theirs, "random_rows": 7, "mc_trials": 3}, seed=0)
    with pytest.raises(InputError, match=r"seed 0 with other parameters \(mc_trials, random_rows\), this run is "
                                         r"budget 'quick', seed 0; rerun"):
        prior_ledger(tmp_path / "rows", quick)
    _ledger_at(tmp_path / "extra", {**theirs, "old_knob": 1}, seed=0)
    with pytest.raises(InputError, match=r"seed 0 with other parameters \(old_knob\), this run"):
        prior_ledger(tmp_path / "extra", quick)
    (tmp_path / "nob").mkdir()
    (tmp_path / "nob" / "ledger.json").write_text(json.dumps({"claims": [], "provenance": {"budget": "quick"}}))
    with pytest.raises(InputError, match=r"is from an unknown budget, this run"):
        prior_ledger(tmp_path / "nob", quick)


def test_prior_ledger_says_why_it_cannot_be_read(tmp_path):
    from sapa.budget import budget_named
    from sapa.commands.ledger_merge import prior_ledger
    from sapa.common.validate import InputError

    cases = {"k": ({"claims": []}, r"\('provenance' is a required property\)"),
             "l": ({"claims": {}, "provenance": {}}, r"\(claims: \{\} is not of type 'array'\)"),
             "i": ({"claims": [{"x": 1}], "provenance": {}}, r"\(claims\[0\]: 'id' is a required property\)"),
             "e": ({"claims": ["id"], "provenance": {}}, r"\(claims\[0\]: 'id' is not of type 'object'\)"),
             "p": ({"claims": [], "provenance": {"earlier_runs": 5}},
                   r"\(provenance.earlier_runs: 5 is not of type 'array'\)"),
             "m": ({"claims": [], "provenance": {}, "monte_carlo": {"checks": "garbage"}},
                   r"\(monte_carlo.checks: 'garbage' is not of type 'array'\)")}
    for name, (doc, why) in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "ledger.json").write_text(json.dumps(doc))
        with pytest.raises(InputError, match=r"^--only would merge into .*ledger\.json, which cannot be read " + why
                           + r".*; rerun without --only or choose another --out$"):
            prior_ledger(tmp_path / name, budget_named("quick", 0))


def test_merge_into_keeps_every_earlier_run_and_summary():
    from sapa.commands.ledger_merge import ledger_entries, merge_into

    fresh = {"claims": [{"id": "b", "v": 2}, {"id": "c", "v": 3}], "provenance": {"started_utc": "T2"}, "mc": "new"}
    assert merge_into(None, fresh) is fresh
    assert merge_into({"claims": [], "provenance": {"x": 1}}, fresh)["provenance"]["earlier_runs"] == [{"x": 1}]
    prior = {"claims": [{"id": "a"}, {"id": "b", "v": 1}], "mc": "old",
             "provenance": {"started_utc": "T1", "earlier_runs": [{"started_utc": "T0"}]}}
    got = merge_into(prior, fresh)
    assert got["claims"] == [{"id": "a"}, {"id": "b", "v": 2, "rerun": True, "rerun_utc": "T2"},
                             {"id": "c", "v": 3, "rerun": True, "rerun_utc": "T2"}]
    assert got["mc"] == "old" and set(got) == {"claims", "mc", "provenance"}
    assert got["provenance"] == {"started_utc": "T2", "reran": ["b", "c"], "rerun_summaries": {"mc": "new"},
                                 "earlier_runs": [{"started_utc": "T0"}, {"started_utc": "T1"}]}
    entries = ledger_entries({"claims": [{"id": "a", "statement": "s", "verdict": "HOLDS", "evidence": {},
                                          "rerun": True}]})
    assert [(e.id, e.verdict) for e in entries] == [("a", "HOLDS")]


@pytest.mark.parametrize("bad,why", [({"readings": "garbage"}, "readings: 'garbage' is not of type 'array'"),
                                     ({"verdict": None}, "verdict: None is not one of"),
                                     ({"figures": [123, None]}, r"figures\[\d\]: (123|None) is not of type 'string'"),
                                     ({"readings": [{"name": "r"}]}, r"readings\[0\]: 'verdict' is a required"),
                                     ({"seconds": "long"}, "seconds: 'long' is not of type 'number'"),
                                     ({"evidence": []}, r"evidence: \[\] is not of type 'object'"),
                                     ({"readings": [{"name": "r", "verdict": "HOLDS", "rule": "bound",
                                                     "calibration": "zzz"}]},
                                      r"readings\[0\].calibration: 'zzz' is not of type 'object', 'null'")])
def test_a_malformed_kept_entry_is_refused_before_any_work_unless_it_is_rerun(tmp_path, bad, why):
    """A tampered ledger.json used to crash `verify --only` after ledger.json was rewritten."""
    from dataclasses import asdict

    from sapa.common.validate import InputError
    from sapa.budget import budget_named
    from sapa.commands.ledger_merge import prior_ledger

    quick = budget_named("quick", 0)
    theirs = json.loads(json.dumps(asdict(quick)))
    _ledger_at(tmp_path, theirs, claims=[{**_ENTRY, **bad}], seed=0)
    before = (tmp_path / "ledger.json").read_bytes()
    with pytest.raises(InputError, match=why):
        prior_ledger(tmp_path, quick, {"some-other-entry"})
    assert prior_ledger(tmp_path, quick, {A}) is not None  # rerunning the entry replaces it
    assert (tmp_path / "ledger.json").read_bytes() == before



@pytest.mark.parametrize("planted", ["cells", "results.parquet"])
def test_a_link_planted_in_out_mid_run_takes_no_write_outside(tmp_path, capsys, monkeypatch, planted):
    """Issue 52, case 5: the link check ran at start-up only. Between the sweep's first and second part file a link
    is planted inside --out (the part files' folder, or the final result's name); no file lands outside --out."""
    import sapa.empirics.montecarlo.sweep.run as sweep_run
    from tests.sapa.test_cli_commands import TINY

    cfg, out, elsewhere = tmp_path / "tiny.toml", tmp_path / "out", tmp_path / "elsewhere"
    cfg.write_text(TINY)
    elsewhere.mkdir()
    victim = elsewhere / "victim"
    victim.write_text("theirs")
    real_write, writes = sweep_run._write_parquet, []

    def write_then_plant(path, df, meta):
        real_write(path, df, meta)
        writes.append(path)
        if len(writes) == 1:  # mid-run: one part file written, three to go
            if planted == "cells":
                (out / "cells").rename(out / "cells.old")
                (out / "cells").symlink_to(elsewhere)
            else:
                (out / planted).symlink_to(victim)

    monkeypatch.setattr(sweep_run, "_write_parquet", write_then_plant)
    code, _, err = _run(["sweep", cfg, "--out", out, "--no-progress"], capsys)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["victim"] and victim.read_text() == "theirs"
    if planted == "cells":  # refused at the next write, in one line
        _one_error_line(code, "", err, f"{out / 'cells'} is a symbolic link")
        assert len(writes) == 1
    else:  # the final name is replaced by the result, never written through
        assert code == 0, err
        assert not (out / planted).is_symlink() and (out / planted).stat().st_size > 0


@pytest.mark.slow  # a real verify run in a fresh interpreter (~40 s on 2 cores)
def test_a_link_planted_in_a_running_verify_sends_nothing_elsewhere(tmp_path):
    """Issue 52, case 5 as reported: `ln -s elsewhere R1/data` while `verify --only causal-masking --out R1` runs sent
    causal_masking.json (4 MB) elsewhere. The link is planted as soon as the run holds R1; nothing lands outside."""
    import time

    out, elsewhere = tmp_path / "R1", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "sapa.cli", "verify", "--only", B, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        t0 = time.monotonic()
        while not (out / ".sapa.lock").exists() and proc.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before the link could be planted"
        (out / "data").symlink_to(elsewhere)
        _, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert list(elsewhere.iterdir()) == []
    lines = err.strip().splitlines()
    assert proc.returncode == 2 and lines[-1].startswith("sapa: error: ") and "is a symbolic link" in lines[-1], err
    assert "Traceback" not in err


def test_sapa_figures_holds_its_folder_while_it_draws(tmp_path, monkeypatch, capsys):
    """`sapa figures` writes below RESULTS (or --out) only through folders, never a link planted once it started."""
    import sapa.figures.regenerate as regenerate
    from sapa.common.atomic import atomic_write_text

    results, elsewhere = tmp_path / "R", tmp_path / "elsewhere"
    results.mkdir()
    elsewhere.mkdir()

    def draw_after_a_link_is_planted(results_dir, out, **kw):
        (results / "figures").symlink_to(elsewhere)  # mid-run, at the default figure folder's own name
        atomic_write_text(results / "figures" / "f.png", "x")
        return {}

    monkeypatch.setattr(regenerate, "run_jobs", draw_after_a_link_is_planted)
    code, _, err = _run(["figures", "--results", results], capsys)
    _one_error_line(code, "", err, f"{results / 'figures'} is a symbolic link")
    assert list(elsewhere.iterdir()) == []
