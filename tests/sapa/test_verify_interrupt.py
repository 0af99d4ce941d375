"""Tests for `sapa verify` interrupted (sapa/cli.py `_keep_interrupted`): the finished verdicts and a report stay."""

from __future__ import annotations

import json

import pytest

from sapa.claim_ids import ORDER
from sapa.cli import main


def _interrupt_at(monkeypatch, claim_id: str) -> None:
    """Ctrl-C as ``claim_id`` starts (the entries before it finish)."""
    import sapa.ledger as L

    real = L.run_claim

    def run(claim, ctx):
        if claim.id == claim_id:
            raise KeyboardInterrupt
        return real(claim, ctx)

    monkeypatch.setattr(L, "run_claim", run)


def test_an_interrupted_run_keeps_its_finished_verdicts_and_a_report(tmp_path, monkeypatch, capsys):
    _interrupt_at(monkeypatch, "other-powers")
    code = main(["verify", "--only", "thm4.1-norm", "other-powers", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 130
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    assert [c["id"] for c in ledger["claims"]] == ["thm4.1-norm"] and ledger["claims"][0]["verdict"] == "HOLDS"
    assert ledger["provenance"]["interrupted"] == {"finished": ["thm4.1-norm"], "not_run": ["other-powers"]}
    assert "thm4.1-norm" in (tmp_path / "report.md").read_text() and (tmp_path / "report.html").is_file()
    assert err.splitlines()[-1].startswith(f"sapa: interrupted; 1 of 2 entries finished; their verdicts are in "
                                           f"{tmp_path / 'ledger.json'} and {tmp_path / 'report.md'} (not run: other-powers)")
    assert not (tmp_path / ".sapa.lock").exists()


def test_into_a_ledger_of_the_same_budget_the_finished_entries_are_merged(tmp_path, monkeypatch, capsys):
    assert main(["verify", "--only", "thm4.1-norm", "poly4-normalised", "--out", str(tmp_path)]) == 0
    before = json.loads((tmp_path / "ledger.json").read_text())
    _interrupt_at(monkeypatch, "poly4-normalised")
    assert main(["verify", "--only", "thm4.1-norm", "poly4-normalised", "--out", str(tmp_path)]) == 130
    after = json.loads((tmp_path / "ledger.json").read_text())
    assert [c["id"] for c in after["claims"]] == [c["id"] for c in before["claims"]]  # nothing lost
    by = {c["id"]: c for c in after["claims"]}
    assert by["thm4.1-norm"].get("rerun") is True and "rerun" not in by["poly4-normalised"]
    assert by["poly4-normalised"]["verdict"] == {c["id"]: c for c in before["claims"]}["poly4-normalised"]["verdict"]
    assert after["provenance"]["interrupted"]["not_run"] == ["poly4-normalised"]


@pytest.mark.slow  # a whole ledger's start (the training study's workers begin): ~15 s
def test_a_ledger_of_another_budget_is_never_overwritten_by_part_of_a_run(tmp_path, monkeypatch, capsys):
    assert main(["verify", "--only", "thm4.1-norm", "--seed", "7", "--out", str(tmp_path)]) == 0
    before = (tmp_path / "ledger.json").read_text()
    first = {"thm4.1-norm"}
    from sapa.commands import verify

    real_order = verify.verify_order
    monkeypatch.setattr(verify, "verify_order", lambda claims: sorted(real_order(claims), key=lambda c: c.id not in first))
    _interrupt_at(monkeypatch, "thm4.1-jacobian")
    assert main(["verify", "--out", str(tmp_path)]) == 130
    assert (tmp_path / "ledger.json").read_text() == before
    part = json.loads((tmp_path / "ledger.interrupted.json").read_text())
    assert [c["id"] for c in part["claims"]] == ["thm4.1-norm"]
    assert (tmp_path / "report.interrupted.md").is_file()
    assert "ledger.interrupted.json" in capsys.readouterr().err


def test_interrupted_before_anything_finished_writes_nothing(tmp_path, monkeypatch, capsys):
    _interrupt_at(monkeypatch, "thm4.1-norm")
    assert main(["verify", "--only", "thm4.1-norm", "--out", str(tmp_path)]) == 130
    assert not (tmp_path / "ledger.json").exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"sapa: interrupted; no ledger entry had finished, so no ledger was written; finished results below {tmp_path} "
        "(sweep cells, training chunks) were kept, and a rerun resumes from them")


# --------------------------------------------------------------------------- every way a run ends (issue 52, 2-4)
# The entries are stand-ins (the mechanism under test is the keeping, not the checks): each "finishes" at once with a
# verdict derived from its id, or fails as told. The training study and the figures are not started.


def _stand_ins(monkeypatch, fail: dict | None = None) -> None:
    """``run_claim`` returns a small well-formed entry per claim; ``fail[id]`` (an exception) is raised instead."""
    import sapa.evidence.training_study as study
    import sapa.ledger as L
    from sapa.commands import verify

    def run(claim, ctx):
        if fail and claim.id in fail:
            raise fail[claim.id]
        return L.Entry(id=claim.id, statement=claim.statement, verdict="UNDETERMINED", evidence={"stand_in": True},
                       headline=f"stand-in for {claim.id}", kind=claim.kind)

    monkeypatch.setattr(L, "run_claim", run)
    monkeypatch.setattr(study, "prefetch_study", lambda ctx: None)
    monkeypatch.setattr(verify, "_attach_figures", lambda entries, out_dir, only: None)


def _printed(err: str) -> dict:
    """The verdicts a run printed: {id: verdict} from its ``[i/n] id: VERDICT (s)`` lines."""
    import re

    return {m[1]: m[2] for m in re.finditer(r"^\[\d+/\d+\] (\S+): (\S+) \(", err, re.M)}


def _kept(out) -> dict:
    doc = json.loads((out / "ledger.json").read_text())
    return {c["id"]: c["verdict"] for c in doc["claims"]}, doc["provenance"]


THREE = ["thm4.1-norm", "thm4.1-jacobian", "other-powers"]


def test_an_exception_raised_in_an_entry_keeps_the_verdicts_before_it(tmp_path, monkeypatch, capsys):
    _stand_ins(monkeypatch, {"other-powers": ValueError("a bug in the check")})
    with pytest.raises(ValueError) as raised:
        main(["verify", "--only", *THREE, "--out", str(tmp_path)])
    printed = _printed(capsys.readouterr().err)
    kept, prov = _kept(tmp_path)
    assert printed == kept == {"thm4.1-norm": "UNDETERMINED", "thm4.1-jacobian": "UNDETERMINED"}
    assert prov["interrupted"] == {"finished": THREE[:2], "not_run": ["other-powers"]}
    assert "other-powers" in prov["partial"]["not_run"] and len(prov["partial"]["not_run"]) == 17
    assert raised.value.__notes__[-1].startswith("2 of 3 entries finished; their verdicts are in ")
    assert "Partial ledger: 17 of the 19 entries never ran" in (tmp_path / "report.md").read_text()


def test_a_full_disk_in_an_entry_after_two_verdicts_keeps_both_and_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    import errno

    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "data" / "x.json"))
    _stand_ins(monkeypatch, {"other-powers": full})
    assert main(["verify", "--only", *THREE, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert _printed(err) == _kept(tmp_path)[0] and len(_kept(tmp_path)[0]) == 2
    assert err.splitlines()[-1] == (
        f"sapa: error: No space left on device: {tmp_path / 'data' / 'x.json'}; 2 of 3 entries finished; their verdicts "
        f"are in {tmp_path / 'ledger.json'} and {tmp_path / 'report'}.md (not run: other-powers); it says it is partial "
        "(17 entries never ran) until a run completes it")


def _disk_full_after(monkeypatch, k: int) -> None:
    """Every result file written after the first ``k`` fails as a full disk does (the file named, nothing replaced).

    The public writers of sapa.common.atomic are wrapped (a JSON write that goes through the text writer counts once).
    """
    import errno

    import sapa.common.atomic as atomic

    done, inside = [], []

    def failing(real):
        def write(path, *a, **kw):
            if inside:
                return real(path, *a, **kw)
            if len(done) >= k:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            done.append(path)
            inside.append(path)
            try:
                return real(path, *a, **kw)
            finally:
                inside.pop()
        return write

    for name in ("atomic_write_text", "atomic_write_json"):
        monkeypatch.setattr(atomic, name, failing(getattr(atomic, name)))


@pytest.mark.parametrize("k", range(13))  # 3 writes per verdict (ledger, report.md, report.html), then the last 3
def test_a_disk_that_fills_at_any_write_keeps_every_printed_verdict(tmp_path, monkeypatch, capsys, k):
    _stand_ins(monkeypatch)
    _disk_full_after(monkeypatch, k)
    code = main(["verify", "--only", *THREE, "--out", str(tmp_path)])
    err = capsys.readouterr().err
    printed = _printed(err)
    assert len(printed) == min((k + 2) // 3, 3)  # printed once its ledger is on disk (a report that fails: noted)
    if not printed:
        assert not (tmp_path / "ledger.json").exists() and code == 2
        return
    kept, prov = _kept(tmp_path)
    assert kept == printed and set(prov["partial"]["not_run"]) == set(ORDER) - set(kept)
    assert code == (0 if k >= 12 else 2) and "Traceback" not in err
    if code == 2:
        assert err.splitlines()[-1].startswith("sapa: error: No space left on device: ")
        assert f"{len(printed)} of 3 entries finished; their verdicts are in {tmp_path / 'ledger.json'}" in err
        assert ("could not be updated" in err) == (k % 3 != 0 and k < 9)


def test_a_stop_signal_that_surfaces_as_another_exception_is_one_line(tmp_path, monkeypatch, capsys):
    """numpy turned a SIGINT inside its product of exact fractions into a SystemError (168 chained, 1 903 lines)."""
    import os
    import signal
    import time

    def numpy_like():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises KeyboardInterrupt here
        except KeyboardInterrupt:
            pass
        raise SystemError("<built-in method reduce> returned a result with an exception set")  # no chain left

    class Surfaces(Exception):
        pass

    _stand_ins(monkeypatch, {"other-powers": Surfaces()})
    import sapa.ledger as L

    stand_in = L.run_claim

    def run(claim, ctx):
        if claim.id == "thm4.1-jacobian":
            numpy_like()
        return stand_in(claim, ctx)

    monkeypatch.setattr(L, "run_claim", run)
    assert main(["verify", "--only", *THREE, "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1] == (
        f"sapa: interrupted; 1 of 3 entries finished; their verdicts are in {tmp_path / 'ledger.json'} and "
        f"{tmp_path / 'report'}.md (not run: thm4.1-jacobian, other-powers); it says it is partial (18 entries never "
        "ran) until a run completes it")
    assert _kept(tmp_path)[0] == _printed(err) == {"thm4.1-norm": "UNDETERMINED"}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_two_interrupted_runs_beside_another_budget_merge_their_verdicts(tmp_path, monkeypatch, capsys):
    """The second run used to replace ledger.interrupted.json (two verdicts, then one: only thm4.1-norm left)."""
    from dataclasses import asdict

    from sapa.budget import budget_named

    other = {"claims": [], "provenance": {"budget": asdict(budget_named("quick", 7)), "seed": 7}}
    (tmp_path / "ledger.json").write_text(json.dumps(other))
    before = (tmp_path / "ledger.json").read_bytes()
    _stand_ins(monkeypatch, {"thm4.2-linear": KeyboardInterrupt()})
    assert main(["verify", "--out", str(tmp_path)]) == 130
    _stand_ins(monkeypatch, {"thm4.1-jacobian": KeyboardInterrupt()})
    assert main(["verify", "--out", str(tmp_path)]) == 130
    part = json.loads((tmp_path / "ledger.interrupted.json").read_text())
    assert [c["id"] for c in part["claims"]] == ["thm4.1-norm", "thm4.1-jacobian"]  # both runs' verdicts
    assert part["provenance"]["partial"]["not_run"] == ORDER[2:]
    assert "17 of the 19 entries never ran" in (tmp_path / "report.interrupted.md").read_text()
    assert (tmp_path / "ledger.json").read_bytes() == before  # another budget's ledger: never replaced by a part
    _stand_ins(monkeypatch)
    assert main(["verify", "--out", str(tmp_path)]) == 0  # a whole run supersedes the part
    assert not (tmp_path / "ledger.interrupted.json").exists() and "partial" not in _kept(tmp_path)[1]


def test_a_partial_ledger_says_so_until_it_is_whole(tmp_path, monkeypatch, capsys):
    """After an interrupted run (2 of 19), `verify --only thm4.1-norm` moved the marker into earlier_runs."""
    _stand_ins(monkeypatch, {"thm4.2-linear": KeyboardInterrupt()})
    assert main(["verify", "--out", str(tmp_path)]) == 130
    _stand_ins(monkeypatch)
    for only, missing in ((["thm4.1-norm"], ORDER[2:]), (ORDER[2:-1], ORDER[-1:]), (ORDER[-1:], [])):
        assert main(["verify", "--only", *only, "--out", str(tmp_path)]) == 0
        kept, prov = _kept(tmp_path)
        shown = [capsys.readouterr().out, (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()]
        if missing:
            line = f"Partial ledger: {len(missing)} of the 19 entries never ran ({', '.join(missing)})"
            assert prov["partial"] == {"not_run": missing} and all(line in text for text in shown)
        else:
            assert "partial" not in prov and list(kept) == ORDER
            assert not any("Partial ledger" in text for text in shown)




def test_a_malformed_entry_being_rerun_is_never_shown_even_if_the_run_stops_first(tmp_path, monkeypatch, capsys):
    _stand_ins(monkeypatch)
    assert main(["verify", "--only", *THREE, "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "ledger.json").read_text())
    doc["claims"][2]["readings"] = [{"name": "r", "verdict": "HOLDS", "rule": "bound", "calibration": "zzz"}]
    (tmp_path / "ledger.json").write_text(json.dumps(doc))
    _stand_ins(monkeypatch, {"other-powers": KeyboardInterrupt()})
    assert main(["verify", "--only", *THREE, "--out", str(tmp_path)]) == 130  # stopped before other-powers reran
    kept, prov = _kept(tmp_path)
    assert list(kept) == THREE[:2] and "other-powers" in prov["partial"]["not_run"]
    assert "Traceback" not in capsys.readouterr().err


# --------------------------------------------------------------------------- fresh interpreters, real signals (slow)


def _sapa(out, *extra) -> "subprocess.Popen":
    """``sapa verify`` on the three cheap entries in a fresh interpreter (this checkout first on the path), in its own
    process group, so a signal reaches it and its workers as Ctrl-C in a terminal does."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "sapa.cli", "verify", "--only", *THREE, "--budget", "quick",
                             "--out", str(out), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=root, start_new_session=True)


def _check_run(out, code: int, err: str, latest: dict) -> None:
    """One run of the sequence: every verdict printed so far (the latest of each id) is in the ledger, which says it
    is partial; a stopped run ends in one line."""
    latest.update(_printed(err))
    if not latest:
        assert not (out / "ledger.json").exists()
    else:
        kept, prov = _kept(out)
        assert {i: kept.get(i) for i in latest} == latest
        assert prov["partial"]["not_run"] == [i for i in ORDER if i not in kept]
        assert "Partial ledger:" in (out / "report.md").read_text()
    if code == 0:
        assert set(_printed(err)) == set(THREE)
    elif "sapa:" in err or _printed(err):  # sapa's main had started: one clear line, no traceback
        assert code == 130 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("sapa: interrupted; ")
    else:  # stopped while the interpreter was still importing sapa's entry point: Python's own ending, nothing kept
        assert code in (-2, 130, 1) and not _printed(err)


@pytest.mark.slow  # 20 fresh interpreters, each stopped at a seeded random moment of up to 30 s: 324 s on 2 busy cores
def test_sigint_at_twenty_random_moments_keeps_every_printed_verdict_across_runs(tmp_path):
    import os
    import random
    import signal
    import time

    rng = random.Random(2052)
    latest: dict = {}
    for moment in [rng.uniform(0.0, 30.0) for _ in range(20)]:
        p = _sapa(tmp_path)
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < moment:
            time.sleep(0.05)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=300)
        _check_run(tmp_path, p.returncode, err, latest)
    assert latest  # some runs got past their first verdict


@pytest.mark.slow  # a fresh interpreter stopped by SIGTERM right after its first verdict: ~30 s
def test_sigterm_keeps_every_printed_verdict(tmp_path):
    import os
    import signal

    p = _sapa(tmp_path)
    lines = []
    for line in p.stderr:
        lines.append(line)
        if line.startswith("[1/3] thm4.1-norm: "):
            os.killpg(p.pid, signal.SIGTERM)
            break
    _, rest = p.communicate(timeout=300)
    err = "".join(lines) + rest
    assert p.returncode == 130 and "thm4.1-norm" in _printed(err)
    _check_run(tmp_path, p.returncode, err, {})
