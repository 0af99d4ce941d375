"""The dose-response readings of ``norm-vs-accuracy`` and its two looks: the dose tables, each reading's evidence and
verdict at a look, and the planner of the second look that the training study calls (:mod:`sapa.claims.norm_vs_accuracy`
states the design).

Here rather than in the claim so that the study (:mod:`sapa.evidence.training_study`) can plan its second look
without importing the claim that reads it.
"""

from __future__ import annotations

from sapa.prose.norm_vs_accuracy_words import POLY


def gather(study) -> dict:
    """{task: dose table at the task's smallest N} of the study's runs (tasks without a dose grid left out), each
    dose marked ``look`` 1 (on the config's grid of c, or a temperature) or 2 (a dose the second look added)."""
    import numpy as np

    from sapa.empirics.training.dose_response import dose_table

    grid = np.asarray((study.config or {}).get("alphas") or [], float)
    out = {}
    for task in ("digits", "text"):
        t = dose_table(study.runs, task)
        if len(t) and set(POLY) <= set(t["family"]):
            on_grid = np.isclose(t["dose"].to_numpy(float)[:, None], grid[None, :], rtol=1e-12).any(1) \
                if grid.size else np.ones(len(t), bool)
            out[task] = t.assign(look=np.where(on_grid | (t["family"] == "softmax(S/τ)"), 1, 2))
    return out


def looks(config: dict | None) -> int:
    """The design's looks at the dose-response: 2 when the study's config has a second look (look2_refine ≥ 2)."""
    return 2 if int((config or {}).get("look2_refine") or 0) >= 2 else 1


def first_look(tables: dict) -> dict:
    """The dose tables without the second look's doses."""
    return {task: t[t["look"] == 1] if "look" in t else t for task, t in tables.items()}


def judged(tables: dict, norm: str = "log10_attn_fro", delta: float | None = None) -> list[tuple[tuple, object]]:
    """[(key, evidence)]: every dose-association (one stratum per lr) and matched-norm evidence, the FAILS p-values of
    every stratum and matched reading Holm-adjusted together, the HOLDS p-values of the strata together (``norm`` and
    ``delta`` are varied only for robustness)."""
    from dataclasses import replace

    from sapa.empirics.training.censored_trend import holm
    from sapa.empirics.training.dose_response import dose_slope, matched_norm_contrast
    from sapa.rules import association as RA

    delta = RA.DELTA if delta is None else delta
    dose = [(("dose", task, fam), tuple(dose_slope(g, norm) for _, g in t[t["family"] == fam].groupby("lr")))
            for task, t in tables.items() for fam in POLY]
    raw = [[RA.raw_p(s, delta) for s in strata] for _, strata in dose]
    matched = [(("matched", task), RA.matched_evidence(matched_norm_contrast(t))) for task, t in tables.items()]
    pf = holm([p[0] for r in raw for p in r] + [m.p_fails for _, m in matched])
    ph = holm([p[1] for r in raw for p in r])
    out, k = [], 0
    for (key, strata), r in zip(dose, raw):
        out.append((key, RA.DoseEvidence(strata, tuple(pf[k:k + len(r)]), tuple(ph[k:k + len(r)]))))
        k += len(r)
    return out + [(key, replace(m, p_fails=f)) for (key, m), f in zip(matched, pf[k:])]


def decide(key: tuple, ev, a_fails: float | None = None, a_holds: float | None = None) -> str:
    """The reading's verdict (the rules' levels, or others for robustness)."""
    from sapa.rules import association as RA

    f = RA.ALPHA_FAILS if a_fails is None else a_fails
    if key[0] == "dose":
        return RA.decide_dose(ev, f, RA.ALPHA_HOLDS if a_holds is None else a_holds)
    return RA.decide_matched(ev, f)


def judge(tables: dict, n_looks: int = 1, norm: str = "log10_attn_fro", delta: float | None = None,
          a_fails: float | None = None, a_holds: float | None = None) -> list[tuple[tuple, object, str, int]]:
    """[(key, evidence, verdict, look)] of every reading: judged on the grid's doses at the family-wise levels /
    ``n_looks``; a dose reading still open there and holding second-look doses is judged again on all its doses
    (Holm over the entry's p-values at that look), at the same levels. ``a_fails``, ``a_holds``: family-wise levels
    other than the rules' (robustness only)."""
    from sapa.rules import association as RA

    af = (RA.ALPHA_FAILS if a_fails is None else a_fails) / n_looks
    ah = (RA.ALPHA_HOLDS if a_holds is None else a_holds) / n_looks
    later = {(task, fam) for task, t in tables.items() if "look" in t
             for fam in t.loc[t["look"] == 2, "family"].unique()}
    second = dict(judged(tables, norm, delta)) if later else {}
    out = []
    for key, ev in judged(first_look(tables), norm, delta):
        v = decide(key, ev, af, ah)
        if v == "UNDETERMINED" and key[0] == "dose" and key[1:] in later:
            out.append((key, second[key], decide(key, second[key], af, ah), 2))
        else:
            out.append((key, ev, v, 1))
    return out


def second_look(runs, cfg) -> list[tuple[str, int, float]]:
    """The (task, p, lr) strata the second look trains: of each dose reading the grid leaves open (at the levels /
    2), every lr stratum whose test at its observed slope decides with 80 % power with at most the finer grid's doses
    (:func:`sapa.rules.association.doses_to_decide`; (D − 1)·look2_refine + 1 for a grid of D). ``runs``: the
    study's phase-1 rows; ``cfg``: its StudyConfig."""
    from types import SimpleNamespace

    from sapa.empirics.training.study_config import look2_doses
    from sapa.rules import association as RA

    tables = gather(SimpleNamespace(runs=runs, config=cfg.as_dict()))
    if not tables:
        return []
    verdicts = judge(tables, n_looks=2)
    m = n_strata([(k, ev) for k, ev, _, _ in verdicts])
    most = len(cfg.alphas) + len(look2_doses(cfg))  # the finer grid: the grid's doses and those between them
    p_of = {"x/c": 1, "x³/c": 3}
    return [(key[1], p_of[key[2]], float(s.lr)) for key, ev, v, _ in verdicts if key[0] == "dose" and v ==
            "UNDETERMINED" for s in ev.strata
            if RA.doses_to_decide(s, m, RA.ALPHA_FAILS / 2, RA.ALPHA_HOLDS / 2) <= most]


def n_strata(evs: list) -> int:
    """How many p-values the entry's FAILS family holds (the Holm m of the power and seeds statements)."""
    return sum(len(ev.strata) if k[0] == "dose" else 1 for k, ev in evs)
