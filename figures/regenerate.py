"""Regenerate every figure from a results directory written by ``sapa verify`` (arXiv 2410.18613).

Figures drawn from stored data (the sweep under ``RESULTS/sweep``; the typed results of the
``empirics`` experiments, stored by the ledger as JSON under ``RESULTS/data/NAME.json``, which each
figure module's ``draw`` accepts as they are) or from exact curves; nothing is resampled here: a
figure whose data is missing is reported instead of silently recomputed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sapa.figures.catalogue import FIGURES


@dataclass(frozen=True)
class FigureJob:
    """One figure: its name, the claims it illustrates, and how to draw it into ``out``."""

    name: str
    claims: tuple[str, ...]
    draw: Callable[[Path, Path], list[Path]]  # (results_dir, out_dir) -> saved paths
    needs: tuple[str, ...] = field(default=())  # files under results_dir it reads


def _landscape(results: Path, out: Path) -> list[Path]:
    from sapa.figures import jacobian_landscape

    return jacobian_landscape.main(out)


def _norms(quantity: str) -> Callable[[Path, Path], list[Path]]:
    def draw(results: Path, out: Path) -> list[Path]:
        from sapa.figures import norm_scaling

        return norm_scaling.main(out, results=results / "sweep", quantity=quantity)

    return draw


def _regime(results: Path, out: Path) -> list[Path]:
    from sapa.figures import regime_map

    return regime_map.main(out)


def _stored(module: str) -> Callable[[Path, Path], list[Path]]:
    """Redraw a figure from the data its ledger check stored under RESULTS/data/<module>.json (never pickle)."""

    def draw(results: Path, out: Path) -> list[Path]:
        import importlib

        from sapa.common import figdata

        res, stem = figdata.read(results / "data" / f"{module}.json")
        return importlib.import_module(f"sapa.figures.{module}").draw(res, out, stem)

    return draw


def _drawer(fig) -> Callable[[Path, Path], list[Path]]:
    """How a catalogue row is drawn from a results directory."""
    custom = {"jacobian_landscape": _landscape, "regime_map": _regime,
              "training_vs_n": lambda results, out: _training(results, out),
              "real_heads": lambda results, out: _real(results, out)}
    if fig.module in custom:
        return custom[fig.module]
    if fig.module == "norm_scaling":
        return _norms("jac_fro" if fig.stems[0].startswith("jac_") else "fro")
    if fig.module == "learning_curves":
        return lambda results, out: _learning(results, out, fig.data)
    return _stored(fig.data or fig.module)


def _jobs(drawn: str) -> list[FigureJob]:
    return [FigureJob(f.name, f.claims, _drawer(f), f.needs) for f in FIGURES if f.drawn == drawn]


# Figures drawn after the checks by ``sapa verify``, and those its checks draw (``sapa figures`` redraws them from
# stored data): both read from the one table, figures/catalogue.py.
JOBS = _jobs("run")
STORED_JOBS = _jobs("stored")


def _learning(results: Path, out: Path, name: str) -> list[Path]:
    """Learning curves (and, for the mechanism tasks, steps to solve) from RESULTS/data/NAME.json."""
    from sapa.common import figdata
    from sapa.figures import learning_curves

    data, stem = figdata.read(results / "data" / f"{name}.json")
    return learning_curves.draw_stored(data, out, stem)


def _training(results: Path, out: Path) -> list[Path]:
    """The training study's figures, drawn from its stored tables (RESULTS/train)."""
    from sapa.empirics.training.train_study import load_study
    from sapa.figures import training_vs_n

    return training_vs_n.draw(load_study(results / "train"), out)


def _real(results: Path, out: Path) -> list[Path]:
    from sapa.figures import real_heads

    return real_heads.draw_stored(results, out)


def regenerate(results: str | Path, out: str | Path | None = None, *, jobs: list[FigureJob] | None = None
               ) -> list[Path]:
    """Draw every figure whose inputs exist under ``results``; return the saved paths."""
    jobs = jobs if jobs is not None else JOBS + STORED_JOBS
    return [p for paths, _ in run_jobs(results, out, jobs=jobs).values() for p in paths]


def run_jobs(results: str | Path, out: str | Path | None = None, *, jobs: list[FigureJob] | None = None,
             report: bool = True, progress: bool = False) -> dict[str, tuple[list[Path], str | None]]:
    """Run each figure job; map its name to (paths, error). A figure that fails is reported (stderr), not fatal.

    ``progress``: a line ``[i/n] figure NAME ...`` before each job, and a line every 10 s while one draws.
    """
    import contextlib

    from sapa.common.progress import say, stage

    results = Path(results)
    if out is None and (results / "figures").is_symlink():  # a link in an exchanged folder could point anywhere
        from sapa.common.validate import InputError

        raise InputError(f"{results / 'figures'} is a symbolic link; sapa writes figures only into a real folder "
                         "(remove the link, or choose the figure folder with --out)")
    out = Path(out) if out is not None else results / "figures"
    done: dict[str, tuple[list[Path], str | None]] = {}
    jobs = list(jobs if jobs is not None else JOBS)
    for i, job in enumerate(jobs, 1):
        missing = [n for n in job.needs if not (results / n).exists()]
        if missing:
            old = [n for n in missing if n.endswith(".json") and (results / n).with_suffix(".pkl").exists()]
            hint = "; an old .pkl beside it is never read (unpickling can run code): rerun sapa verify" if old else ""
            done[job.name] = ([], f"missing stored results: {', '.join(missing)}{hint}")
            continue
        tag = f"[{i}/{len(jobs)}] figure {job.name!r}"
        if progress:
            say(f"{tag} ...")
        try:
            with stage(tag) if progress else contextlib.nullcontext():
                done[job.name] = (job.draw(results, out), None)
        except Exception as exc:  # a figure's own claim check failing is a finding: report it
            msg = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
            if report:
                print(f"figure {job.name!r} failed: {msg}", file=sys.stderr)
            done[job.name] = ([], msg)
    return done
