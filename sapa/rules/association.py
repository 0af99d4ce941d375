"""Arm-level rules: ρ̄ = mean_s ρ_S(arm-mean norm, arm-mean accuracy), permutation p (issues 12, 13).

``arm-association`` — tested statement: "across activation arms, a lower attention norm goes
with a higher test accuracy" (ρ̄ < 0), with the **activation arm** as the unit: in the training study
(``empirics.training.arm_statistics.study_arm_level``) each arm at its best learning rate, seeds averaged within each
(arm, N) cell, arm labels permuted jointly in every (task, N) stratum. Evidence
(:class:`empirics.training.arm_statistics.ArmAssociation`): one-sided permutation p-values for ρ̄ < 0 and ρ̄ > 0
(exact over all A! orders up to MAX_EXACT_ARMS = 8 arms, else N_PERM_MC = 9999 random orders) and a
cluster-bootstrap interval (arms resampled) at level 1 − 2·ALPHA.

* ``HOLDS``  if p(ρ̄ < 0) ≤ ALPHA and the interval lies below 0;
* ``FAILS``  if p(ρ̄ > 0) ≤ ALPHA and the interval lies above 0 (a higher norm goes with a higher accuracy);
* ``UNDETERMINED`` otherwise (no arm-level association is shown either way).

Symmetric by construction. Multiplicity: the ledger reads K = 4 such readings (2 tasks × 2
norms); ALPHA = 0.005 per reading and direction is Bonferroni for a family error ≤ K·ALPHA = 2 %
per direction. It was 0.01 (the per-reading false-FAILS target itself) until the study's designs:
there the within-run correlation leaks into arm means of 2–3 seeds and α = 0.01 measured false FAILS
1.25 % (400 trials, seed 0); α = 0.005 measures 0.75 %. The smallest p is 1/A! when exact
(7 arms: 1/5040) and 1/(N_PERM_MC + 1) = 1e-4 by Monte Carlo, both far below ALPHA. Calibration
(``simulate_study``) draws the study's designs, STUDY_DESIGNS.

``seed-contrast`` — the reviewer's pair: tested statement "x³ reaches a lower test accuracy
than x/16" (mean paired difference < 0). The unit is the replicate (its two weight-decay strata
are averaged: they share initial weights and minibatches). Evidence
(:class:`empirics.training.arm_statistics.SeedContrast`): exact sign-flip p-values (2^R sign vectors) and a
Student-t interval at 1 − 2·ALPHA_CONTRAST. ``HOLDS`` / ``FAILS`` / ``UNDETERMINED`` as above,
ALPHA_CONTRAST = 0.05/2 (Bonferroni over the 2 tasks). With R replicates the smallest p is 2^−R:
3 seeds (quick) or 5 (full) can never reach it, which calibration reports as zero power.
"""

from __future__ import annotations

import math

import numpy as np

from sapa.rules.base import Rule

K_READINGS = 4           # arm-association readings in the ledger: 2 tasks × 2 norms (‖φ(S)‖_F, ‖∂φ(S)/∂X‖_F)
ALPHA = 0.005            # per reading and direction (one-sided); Bonferroni: family error ≤ K_READINGS·ALPHA = 2 %
LEVEL = 1 - 2 * ALPHA    # two-sided level of the arm-bootstrap interval the rule reads (99 %)
K_CONTRASTS = 2          # seed-contrast readings: one per task
ALPHA_CONTRAST = 0.05 / K_CONTRASTS  # per reading and direction (one-sided)
CONTRAST_LEVEL = 1 - 2 * ALPHA_CONTRAST  # two-sided level of the t interval (95 %)

# Synthetic truth for calibration, shaped like the training study (empirics.training.train_study QUICK / FULL, read by
# empirics.training.arm_statistics.study_arm_level): one design per (budget, task) reading; each synthetic experiment draws one.
STUDY_DESIGNS = (        # (arms, strata = the task's N cells, seeds averaged within each (arm, N) cell)
    (5, 2, 2),           # quick digits: 5 arms (exact p over 5! orders: never below ALPHA, a smoke test), N ∈ {16, 64}
    (6, 2, 3),           # full digits: 6 arms (exact p over 6! orders), N ∈ {16, 64}, 3 seeds
    (7, 2, 3),           # full text: + x³/√i, 7 arms (exact p), N ∈ {64, 128}, 3 seeds
)
SIM_N_BOOT = 4000        # arm resamples: empirics.training.arm_statistics.N_BOOT, what study_arm_level uses in the ledger
# seed-contrast (simulate_contrast) keeps the earlier single-N experiment's shape:
SIM_STRATA = 2           # weight decay 0 and 0.05, paired: a replicate's seed effect is shared by both
SIM_SEEDS = 3            # replicates per arm and stratum (quick budget)
SIM_RHO = 0.9            # designed effect: correlation of the true arm effects (norm, accuracy), positive
SIM_SEED_SD = 0.5        # replicate (shared-init) and run sd of accuracy and log-norm, in units of the arm-effect sd
SIM_STRATUM_SD = 0.2     # (arm × stratum, replicate × stratum) noise sd, in the same units
SIM_WITHIN_RHO = 0.6     # run-level correlation of norm and accuracy *within* an arm (the pseudo-replication trap)
SIM_T_DF = 3             # replicate / run effects are Student-t with 3 df (heavy tails), scaled to SIM_SEED_SD
SIM_DELTA = 1.0          # seed-contrast designed effect: +1 replicate sd (x³ better than x/16)


def decide_arm(ev, alpha: float = ALPHA) -> str:
    """HOLDS if p(ρ̄ < 0) ≤ ALPHA and interval < 0; FAILS if p(ρ̄ > 0) ≤ ALPHA and interval > 0; else UNDETERMINED.

    ``alpha`` is varied only for robustness (the interval stays the one computed at the declared level)."""
    return _decide(ev.p_less, ev.p_greater, ev.lo, ev.hi, alpha)


def decide_contrast(ev, alpha: float = ALPHA_CONTRAST) -> str:
    """HOLDS if p(mean < 0) ≤ ALPHA_CONTRAST and interval < 0; FAILS if p(mean > 0) ≤ ALPHA_CONTRAST, interval > 0."""
    return _decide(ev.p_less, ev.p_greater, ev.lo, ev.hi, alpha)


def _decide(p_less: float, p_greater: float, lo: float, hi: float, alpha: float) -> str:
    vals = (p_less, p_greater, lo, hi)
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
        return "UNDETERMINED"
    if p_less <= alpha and hi < 0:
        return "HOLDS"
    if p_greater <= alpha and lo > 0:
        return "FAILS"
    return "UNDETERMINED"


def study_runs(rng: np.random.Generator, n_arms: int, arm_rho: float, *, strata: int, seeds: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic final (log10 norm, accuracy) cubes of shape (A, S, R) with the training study's cluster structure.

    value[a, s, r] = arm effect[a] + N-cell offset[s] + seed effect[s, r] (shared by every arm at one N: same
    initial weights and batches) + arm × N + run effect[a, s, r]. The N cells are independent models, so nothing
    of a replicate is shared across strata. Arm effects of (norm, accuracy) are bivariate normal with correlation
    ``arm_rho``; run effects are Student-t (SIM_T_DF df, sd SIM_SEED_SD), correlated SIM_WITHIN_RHO between norm
    and accuracy *within* a run, so a run-level analysis would see an association that the arm level must not.
    """
    arm = rng.multivariate_normal([0.0, 0.0], [[1.0, arm_rho], [arm_rho, 1.0]], size=n_arms)  # (A, 2)
    z = rng.standard_t(SIM_T_DF, size=(2, n_arms, strata, seeds)) / math.sqrt(SIM_T_DF / (SIM_T_DF - 2))
    run = (SIM_SEED_SD * z[0], SIM_SEED_SD * (SIM_WITHIN_RHO * z[0] + math.sqrt(1 - SIM_WITHIN_RHO**2) * z[1]))
    cubes = []
    for k in range(2):
        offs = rng.normal(size=(1, strata, 1))  # the N cell shifts every arm alike
        seed = SIM_SEED_SD * rng.normal(size=(1, strata, seeds))  # (1, S, R): one initialisation for all arms
        inter = SIM_STRATUM_SD * rng.normal(size=(n_arms, strata, 1))
        cubes.append(arm[:, k, None, None] + offs + seed + inter + run[k])  # (A, S, R)
    return cubes[0], cubes[1]


def simulate_study(truth: str, rng: np.random.Generator, design: tuple[int, int, int] | None = None):
    """Evidence from the ledger's own estimator on a synthetic training study (the rule's ``simulate``).

    ``design`` = (arms, strata, seeds), one of STUDY_DESIGNS drawn at random unless given; the estimator is
    ``arm_association`` at the interval level and resample count ``study_arm_level`` uses in the ledger, with
    Monte Carlo permutation p beyond ``MAX_EXACT_ARMS`` arms. holds: independent arm effects (with the within-run
    correlation); fails: arm effects correlated SIM_RHO = +0.9 (a higher norm goes with a higher accuracy).
    """
    from empirics.training.arm_statistics import _seed_means, arm_association

    A, S, R = design if design is not None else STUDY_DESIGNS[int(rng.integers(len(STUDY_DESIGNS)))]
    lnorm, acc = study_runs(rng, A, 0.0 if truth == "holds" else SIM_RHO, strata=S, seeds=R)
    return arm_association(_seed_means(lnorm), _seed_means(acc), level=LEVEL, n_boot=SIM_N_BOOT, seed=rng)


def simulate_contrast(truth: str, rng: np.random.Generator, seeds: int = SIM_SEEDS):
    """Replicate-level evidence: d[s, r] = δ + replicate effect (t, shared by strata) + stratum noise; the
    test averages the strata. holds: δ = 0 (the edge of "x³ trains worse"); fails: δ = +SIM_DELTA replicate sd."""
    from empirics.training.arm_statistics import paired_seed_test

    delta = 0.0 if truth == "holds" else SIM_DELTA
    rep = rng.standard_t(SIM_T_DF, size=seeds) / math.sqrt(SIM_T_DF / (SIM_T_DF - 2))
    d = delta + rep[None, :] + SIM_STRATUM_SD * rng.normal(size=(SIM_STRATA, seeds))
    return paired_seed_test(d.mean(axis=0), level=CONTRAST_LEVEL)


ARM_ASSOCIATION = Rule(
    name="arm-association",
    summary=f"Across activation arms (unit: the arm at its best learning rate; seeds averaged within each (arm, N) "
            f"cell, arm labels permuted jointly in every (task, N) stratum), ρ̄ = mean over strata of Spearman "
            f"ρ(arm-mean log10 norm, arm-mean accuracy): HOLDS (lower norm, higher accuracy) if the one-sided "
            f"permutation p(ρ̄ < 0) ≤ {ALPHA} (exact up to 8 arms, else Monte Carlo) and the {LEVEL:.0%} arm-bootstrap interval lies below 0; FAILS if "
            f"p(ρ̄ > 0) ≤ {ALPHA} and the interval lies above 0; else UNDETERMINED "
            f"(Bonferroni over {K_READINGS} readings: family error ≤ {K_READINGS * ALPHA:.0%} per direction)",
    thresholds={"alpha_per_reading_one_sided": ALPHA, "interval_level": LEVEL, "readings": K_READINGS},
    decide=decide_arm,
    simulate=simulate_study,
    design={"holds": f"no arm-level association (independent arm effects) with a within-run correlation "
                     f"{SIM_WITHIN_RHO} (it leaks ρ̄ ≈ +0.03 to +0.05 into the arm means: conservative for false "
                     f"FAILS); (arms, N strata, seeds) drawn from {list(STUDY_DESIGNS)} (quick digits, full digits, "
                     f"full text), t{SIM_T_DF} run effects (sd {SIM_SEED_SD} of the arm sd), {SIM_N_BOOT} arm "
                     f"resamples",
            "fails": f"arm effects correlated ρ = +{SIM_RHO} (a higher norm goes with a higher accuracy)",
            "estimator": "empirics.training.arm_statistics.arm_association (as study_arm_level calls it)"},
    trials=400,
)

SEED_CONTRAST = Rule(
    name="seed-contrast",
    summary=f"Paired pair contrast with the replicate as the unit (strata averaged): HOLDS if the exact sign-flip "
            f"p(mean < 0) ≤ {ALPHA_CONTRAST} and the {CONTRAST_LEVEL:.0%} t interval lies below 0; FAILS if "
            f"p(mean > 0) ≤ {ALPHA_CONTRAST} and the interval lies above 0; else UNDETERMINED "
            f"(Bonferroni over {K_CONTRASTS} tasks)",
    thresholds={"alpha_per_reading_one_sided": ALPHA_CONTRAST, "interval_level": CONTRAST_LEVEL,
                "readings": K_CONTRASTS},
    decide=decide_contrast,
    simulate=simulate_contrast,
    design={"holds": f"mean difference 0, {SIM_SEEDS} replicates × {SIM_STRATA} paired strata, t{SIM_T_DF} replicates",
            "fails": f"mean difference +{SIM_DELTA} replicate sd",
            "note": f"the smallest exact p with R replicates is 2^-R: R = {SIM_SEEDS} cannot reach {ALPHA_CONTRAST}"},
    trials=400,
)

RULES = (ARM_ASSOCIATION, SEED_CONTRAST)
