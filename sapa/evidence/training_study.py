"""The training study of a ``sapa verify`` run, shared by its three training entries: trained (or resumed) once.

``scale-keeps-training-stable``, ``norm-vs-accuracy`` and ``mechanism-across-n`` read the same study
(:func:`sapa.empirics.training.train_study.run_study`): :func:`prefetch_study` starts it in the background when the run
begins, :func:`get_study` hands it (or the error it ended with) to every reader from ``ctx.cache``, and
:func:`study_figures` draws its figures once. :func:`bigram_by_n` is the text task's floor, the bigram predictor.
"""

from __future__ import annotations

from sapa.ledger import Context

CACHE_KEY = "train_study"
FIG_KEY = "train_study_figures"
HEADLINE_ARMS = ("x_sqrtN", "x3_sqrtN")  # the paper's scale rule, p = 1 and 3: what every training entry judges
PLATEAU_MARGIN = 0.02  # a text cell "left the bigram plateau": every seed's test accuracy > the bigram predictor's + this


# The prefetched study's workers run at lower priority: the checks that ``sapa verify`` runs meanwhile (in this
# process and the run pool) keep the cores, and the study takes what they leave idle. At normal priority the study
# finished early and the last ~50 s of checks ran on one core (quick budget, 2 cores, one run each: 185 s → 167 s).
PREFETCH_NICENESS = 10


TRAINING_RULES = ("stability-trend", "divergence-trend", "final-gap-trend", "slowdown-growth", "dose-association",
                  "matched-norm")  # the rules the three training entries judge with


def study_design(budget: str, seed: int = 0) -> dict:
    """The part of the study's design that ``sapa`` decides — rules, looks, levels — fixed with the config before the
    first member trains (:func:`sapa.empirics.training.study_design.fix_design`; DESIGN.md item 10)."""
    from sapa.empirics.training.train_study import study_config
    from sapa.evidence.dose_looks import looks
    from sapa.rules import association as RA, rule_named

    n = looks(study_config(budget, seed).as_dict())
    return {"rules": {name: dict(rule_named(name).thresholds) for name in TRAINING_RULES},
            "looks": {"dose-response": n, "second_look_planner": "sapa.evidence.dose_looks.second_look"
                      if n == 2 else None},
            "levels": {"dose-response per look": {"fails": RA.ALPHA_FAILS / n, "holds": RA.ALPHA_HOLDS / n},
                       "family-wise": {"fails": RA.ALPHA_FAILS, "holds": RA.ALPHA_HOLDS}}}


class _Prefetch:
    """The study running in a background (daemon) thread; its chunks train in ``pool``'s worker processes, which an
    interrupt stops from the main thread (:func:`stop_prefetch`)."""

    def __init__(self, ctx: Context) -> None:
        import threading

        from sapa.common.pool import process_pool

        self.pool = process_pool(max(2, ctx.workers), PREFETCH_NICENESS)  # its workers start with the first chunk
        self.result: object = None
        self.tally = None  # the study's work done (flops, members), kept quiet: the verify log gets one line per stage
        self._thread = threading.Thread(target=self._run, args=(ctx,), name="sapa-train-study", daemon=True)
        self._thread.start()

    def _run(self, ctx: Context) -> None:
        from sapa.empirics.training.train_study import run_study
        from sapa.evidence.dose_looks import second_look

        try:
            self.result = run_study(ctx.budget.name, ctx.out_dir / "train", seed=ctx.budget.seed,
                                    executor=self.pool, progress=self._tally, second_look=second_look,
                                    design=study_design(ctx.budget.name, ctx.budget.seed))
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, who raises it
            self.result = exc
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)  # at once after a stop_pool

    def _tally(self, total: float):
        from sapa.common.progress import Tally

        self.tally = Tally(total, desc="training study (in the background since the run began)")  # total: flops
        return self.tally

    def wait(self, every_s: float | None = None):
        """The study's result; while it still trains, a line with its progress and ETA every ``every_s`` seconds."""
        from sapa.common.progress import EVERY_S, say

        every_s = EVERY_S if every_s is None else every_s
        while self._thread.is_alive():
            self._thread.join(timeout=every_s)
            if self._thread.is_alive() and self.tally is not None:
                say(self.tally.line())
        return self.result


def shipped_study(ctx: Context):
    """The study shipped with sapa for this budget and seed (:mod:`sapa.empirics.training.evidence_pack`), every file's
    sha256 verified first — InputError, one line, when one fails —, unless ``OUT/train`` holds a study of its own
    (``sapa train --out OUT/train``: a user's regeneration is read instead); None when none is shipped."""
    from sapa.empirics.training.evidence_pack import load, shipped_for

    pack = shipped_for(ctx.budget.name, ctx.budget.seed)
    if pack is None or (ctx.out_dir / "train" / "study.json").is_file():
        return None
    return load(pack)


def prefetch_study(ctx: Context) -> None:
    """Start the training study now, beside the other checks (both cores stay busy); :func:`get_study` waits for it.

    A shipped study of this budget (:func:`shipped_study`) is read instead, at once: nothing trains.
    The study's numbers do not depend on when or where its chunks train (one thread per worker
    process, explicit generators), so prefetching changes the wall time only.
    """
    if CACHE_KEY not in ctx.cache:
        shipped = shipped_study(ctx)
        ctx.cache[CACHE_KEY] = shipped if shipped is not None else _Prefetch(ctx)


def stop_prefetch(ctx: Context) -> None:
    """On an interrupt: stop a prefetched study's worker processes now (finished chunks are already on disk)."""
    got = ctx.cache.get(CACHE_KEY)
    if isinstance(got, _Prefetch):
        from sapa.common.pool import stop_pool

        stop_pool(got.pool)  # exiting must not wait for the chunks in flight


def wait_for_prefetch(ctx: Context) -> float:
    """Wait until a prefetched training study has finished (its workers load the cores); seconds waited."""
    import time

    got = ctx.cache.get(CACHE_KEY)
    if not isinstance(got, _Prefetch):
        return 0.0
    t0 = time.perf_counter()
    ctx.cache[CACHE_KEY] = got.wait()
    return round(time.perf_counter() - t0, 3)


def get_study(ctx: Context):
    """The training study of this run: ``ctx.cache["train_study"]``, else ``run_study`` (or its stored error)."""
    got = ctx.cache.get(CACHE_KEY)
    if isinstance(got, _Prefetch):
        got = ctx.cache[CACHE_KEY] = got.wait()
    if got is not None:
        if isinstance(got, BaseException):
            raise got
        return got
    try:
        from sapa.empirics.training.train_study import run_study
        from sapa.evidence.dose_looks import second_look

        study = shipped_study(ctx)
        study = study if study is not None else run_study(ctx.budget.name, ctx.out_dir / "train", seed=ctx.budget.seed, second_look=second_look,
                          design=study_design(ctx.budget.name, ctx.budget.seed))
    except Exception as exc:  # keep the failure: the second reader must not retrain
        ctx.cache[CACHE_KEY] = exc
        raise
    ctx.cache[CACHE_KEY] = study
    return study


def study_figures(ctx: Context, study, bigram: dict | None = None) -> tuple[str, ...]:
    """Draw the study's figures once per run (``ctx.cache["train_study_figures"]``); paths relative to out_dir.

    ``bigram``: {N: the bigram predictor's text test accuracy}, drawn as the text task's floor.
    """
    if FIG_KEY not in ctx.cache:
        from sapa.figures import training_vs_n as fig

        paths = fig.draw(study, ctx.out_dir / "figures", floors={"text": bigram} if bigram else None)
        ctx.cache[FIG_KEY] = tuple(str(p.relative_to(ctx.out_dir)) for p in paths)
    return ctx.cache[FIG_KEY]


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def bigram_by_n(Ns, config: dict) -> dict:
    """{N: test accuracy of the bigram predictor on the text windows of context N} (None where the corpus fails)."""
    from sapa.empirics.training.bigram import bigram_accuracy
    from sapa.empirics.training.train_data import load_text

    tc = (config or {}).get("text") or ((config or {}).get("tasks") or {}).get("text") or {}
    windows = int(tc.get("eval_size", tc.get("eval_windows", 128))) if isinstance(tc, dict) else 128
    out = {}
    for N in Ns:
        try:
            t = load_text(int(N), windows)
            out[int(N)] = bigram_accuracy(t.train.numpy(), t.test_x.numpy(), t.test_y.numpy())
        except Exception:  # the corpus is unavailable: no plateau finding at this N
            out[int(N)] = None
    return out
