"""``sapa calibrate``: every verdict rule's false-FAILS and false-HOLDS rates and power on synthetic truth."""

from __future__ import annotations

import argparse
import json

from sapa.common.validate import InputError
from sapa.commands.shared import select


def add_parser(sub) -> None:
    """Declare ``sapa calibrate`` and its arguments on the subparsers ``sub``."""
    import argparse
    from sapa.commands.arguments import nonneg_int, positive_int

    c = sub.add_parser("calibrate", help="measure every verdict rule's error rates on synthetic evidence with a known truth",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    c.add_argument("--rule", nargs="+", action="extend", metavar="NAME",
                   help="only these rules (default: all); repeatable: --rule A --rule B runs both")
    c.add_argument("--trials", type=positive_int, help="synthetic evidences per truth (default: each rule's own)")
    c.add_argument("--seed", type=nonneg_int, default=0)
    c.add_argument("--json", action="store_true", help="print one JSON object {\"rules\": [...]}")
    c.add_argument("--force", action="store_true",
                   help="with --trials: run even beyond the work limit of sapa sweep or the available memory "
                        "(estimated up front from a timed pilot)")
    c.add_argument("--store", action="store_true",
                   help="also store the calibrations the ledger cites (sapa/rules/calibrations.json; default trials, "
                        "seed 0 only)")


PILOT_TRIALS = 4  # synthetic evidences per truth a rule's pilot times (after one untimed, for imports and caches)
VERDICT_BYTES = 16  # calibrate keeps every verdict (two list slots of 8 bytes per trial) until it counts them


def calibration_cost(rules, trials: int, seed: int = 0):
    """The :class:`sapa.empirics.montecarlo.workload.Cost` of calibrating ``rules`` at ``trials`` per truth: memory from
    the verdicts kept, CPU seconds from a timed pilot of :data:`PILOT_TRIALS` per rule (skipped when memory alone
    already rules the request out, as ``--trials 9007199254740992`` does)."""
    import time

    from sapa.empirics.montecarlo.workload import Cost, available_memory
    from sapa.rules import calibrate

    how = f"{len(rules)} rule{'s' if len(rules) != 1 else ''} × 2 truths × {trials:,} trials"
    nbytes = VERDICT_BYTES * trials
    if nbytes > (available_memory() or 0):
        return Cost(flops=0, bytes=nbytes, how=how)
    seconds = 0.0
    for rule in rules:
        calibrate(rule, trials=1, seed=seed)
        t0 = time.process_time()
        calibrate(rule, trials=PILOT_TRIALS, seed=seed)
        seconds += (time.process_time() - t0) / PILOT_TRIALS * trials
    return Cost(flops=0, bytes=nbytes, how=how, seconds=seconds)


def run(args: argparse.Namespace) -> int:
    """``sapa calibrate``: false-FAILS / false-HOLDS rates and power of every verdict rule on synthetic truth."""
    from sapa.common.progress import say, stage
    from sapa.rules import FALSE_FAILS_TARGET, FALSE_HOLDS_TARGET, all_rules, calibrate

    rules = select(all_rules(), args.rule, lambda r: r.name, "rule")
    if args.trials is not None and not args.force:  # each rule's own default is its designed calibration
        from sapa.empirics.montecarlo.workload import check_cost

        check_cost(calibration_cost(rules, args.trials, args.seed), "the calibration", "reduce --trials")
    results = []
    for i, rule in enumerate(rules, 1):
        say(f"[{i}/{len(rules)}] calibrating {rule.name} ...")  # notes the log's clock: no stage line right after
        with stage(f"[{i}/{len(rules)}] calibrating {rule.name}"):
            results.append(calibrate(rule, trials=args.trials, seed=args.seed))
    if args.store:
        from sapa.rules.calibration_store import SEED, write_store

        if args.seed != SEED or args.trials is not None:
            raise InputError(f"--store keeps the ledger's calibrations only: seed {SEED}, each rule's default trials")
        write_store(list(zip(rules, results)))
    from sapa.rules.base import EXACT_NOTE

    if args.json:
        print(json.dumps({"rules": [{**c.as_dict(), "evidence": r.evidence,
                                     **({"note": EXACT_NOTE} if r.evidence == "exact" else {})}
                                    for r, c in zip(rules, results)],
                          "targets": {"false_fails_rate": FALSE_FAILS_TARGET, "false_holds_rate": FALSE_HOLDS_TARGET}}))
        return 0
    w = max(len(c.rule) for c in results)
    print(f"{'rule':<{w}}  false FAILS  false HOLDS   power  undetermined (null)  trials  targets")
    for r, c in zip(rules, results):
        if r.evidence == "exact":  # rates of 0 / 0 / 100 % would only restate the decision logic
            print(f"{c.rule:<{w}}  {EXACT_NOTE} (decision logic on synthetic exact evidence: {c.false_fails_rate:.2%} / "
                  f"{c.false_holds_rate:.2%} / {c.power:.1%}, {c.trials} trials)")
            continue
        print(f"{c.rule:<{w}}  {c.false_fails_rate:>11.2%}  {c.false_holds_rate:>11.2%}  {c.power:>6.1%}  "
              f"{c.undetermined_rate_null:>19.1%}  {c.trials:>6}  {'met' if c.meets_targets else 'MISSED'}")
    print(f"targets: false FAILS ≤ {FALSE_FAILS_TARGET:.0%} (statement true, least favourable case), "
          f"false HOLDS ≤ {FALSE_HOLDS_TARGET:.0%} (designed effect)")
    return 0
