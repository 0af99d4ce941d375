"""``sapa bench``: the exact kernels against autograd and GEMM, polynomial against softmax runtime, ensemble training."""

from __future__ import annotations

import argparse
import json

from sapa.common.validate import InputError


def add_parser(sub) -> None:
    """Declare ``sapa bench`` and its arguments on the subparsers ``sub``."""
    from sapa.commands.arguments import path_arg

    b = sub.add_parser("bench", help="benchmark the exact kernels, polynomial vs softmax attention runtime, ensemble training")
    b.add_argument("--quick", action="store_true", help="small sizes (seconds), for smoke tests")
    b.add_argument("--part", choices=("all", "kernels", "overhead", "training"), default="all",
                   help="kernels: exact norm kernels vs jacrev and vs forming S; overhead: attention runtime; "
                        "training: ensemble vs one-at-a-time training (ensemble_speedup)")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.add_argument("--out", type=path_arg, help="also write the JSON to this file")
    b.add_argument("--scaling", action="store_true",
                   help="also time a fixed sweep serially and on LocalCluster(2) (efficiency T1/(2·T2))")


def run(args: argparse.Namespace) -> int:
    """``sapa bench``: exact kernels vs torch.func.jacrev, and vs the cost of forming S once."""
    from sapa.common.atomic import atomic_write_json
    from sapa.empirics.timing.bench import bench_all
    from sapa.empirics.timing.overhead import bench_overhead

    if args.out is not None and args.out.is_dir():
        raise InputError(f"--out {args.out} is a directory; give a file name for the JSON")
    from sapa.common.progress import stage

    if args.part in ("all", "kernels"):
        with stage("bench kernels (exact norms vs jacrev, vs forming S)"):
            res: dict = bench_all(quick=args.quick)
    else:
        res = {"vs_autograd": [], "vs_gemm": []}
    if args.part in ("all", "overhead"):
        res["overhead"] = bench_overhead(quick=args.quick, progress=not args.json, threads=1)
    if args.part in ("all", "training"):
        from sapa.empirics.training.train_bench import bench_training

        with stage("bench training (ensemble vs one member at a time)"):
            res["training"] = bench_training(quick=args.quick)
    if args.scaling:
        from sapa.figures.bench_scaling import scaling_benchmark

        with stage("bench scaling (a fixed sweep on 1 and 2 workers)"):
            res["scaling"] = scaling_benchmark((1, 2), small=args.quick)
    flat = _flat(res)
    if args.out:
        atomic_write_json(args.out, flat)
    if args.json:
        print(json.dumps(flat, default=float))
    else:
        _print_text(res, args.scaling)
    return 0


def _flat(res: dict) -> dict:
    """The JSON object of ``sapa bench``: the headline numbers keyed by size, then every result in full."""
    from sapa.empirics.timing.overhead import flat_summary

    return {
        "speedup_vs_autograd": {f"{r['activation']}@N={r['N']}": r["speedup_vs_autograd"] for r in res["vs_autograd"]},
        "cost_vs_gemm": {f"{r['kernel']}@N={r['N']}": r["cost_vs_gemm"] for r in res["vs_gemm"]},
        "peak_memory_mib": {f"{r['kernel']}@N={r['N']}": r["peak_mem_bytes"] / 2**20 for r in res["vs_gemm"]},
        **(flat_summary(res["overhead"]) if "overhead" in res else {}),
        **({"ensemble_speedup": res["training"]["ensemble_speedup"], "speedup_ceiling": res["training"]["speedup_ceiling"],
            "member_steps_per_s": {f"N={r['N']}": r["member_steps_per_s"] for r in res["training"]["member_steps_per_s"]}}
           if "training" in res else {}),
        **res,
    }


def _print_text(res: dict, scaling: bool) -> None:
    """``sapa bench``'s readable lines: kernels vs autograd and GEMM, the overhead, training, scaling."""
    from sapa.display import ratio, sig

    for r in res["vs_autograd"]:
        print(f"N={r['N']:>5} D={r['D']:>4} {r['activation']:<22} kernel {r['kernel_s']:.4g} s  "
              f"jacrev {r['autograd_s']:.4g} s  speedup {ratio(r['speedup_vs_autograd'])}")
    for r in res["vs_gemm"]:
        print(f"N={r['N']:>5} D={r['D']:>4} {r['kernel']:<22} {r['seconds']:.4g} s  "
              f"cost vs forming S {ratio(r['cost_vs_gemm'])}  peak {sig(r['peak_mem_bytes'] / 2**20, 3)} MiB")
    if "overhead" in res:
        from sapa.empirics.timing.overhead import summary_lines

        print("\n".join(summary_lines(res["overhead"])))
    if "training" in res:
        for r in res["training"]["cells"]:
            print(f"training {r['task']} N={r['N']}: {r['members']} members × {r['steps']} steps, ensemble "
                  f"{r['ensemble_members_per_s']:.3g} members/s vs one at a time {r['loop_members_per_s']:.3g}: "
                  f"{ratio(r['speedup'])} (GEMM {r['loop_gemm_fraction']:.0%} of the loop's time: ceiling "
                  f"{ratio(r['speedup_ceiling'])}; ensemble's GEMM {r['ensemble_gemm_fraction']:.0%})")
        print("member-steps per second (one thread, ensemble of 6, text shape): " + ", ".join(
            f"N={r['N']} {r['member_steps_per_s']:.0f}" for r in res["training"]["member_steps_per_s"]))
        print(f"ensemble_speedup {ratio(res['training']['ensemble_speedup'])} ({res['training']['note']})")
    if scaling:
        sc = res["scaling"]
        print(f"sweep of {sc['cells']} cells: serial {sc['seconds'][0]:.2f} s, LocalCluster(2) {sc['seconds'][1]:.2f} s "
              f"(+{sc['startup_s'][1]:.1f} s start-up), efficiency T1/(2·T2) = {sc['efficiency'][1]:.0%}")


def output_guard(args: argparse.Namespace):
    """``--out`` names a writable file (checked before any work starts)."""
    import contextlib

    from sapa.common.outdir import check_file

    if args.out is not None:
        check_file(args.out, "--out")
    return contextlib.ExitStack()
