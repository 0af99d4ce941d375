"""What ``sapa train`` prints: accuracy per arm and N at the best learning rate, as a table, and what was reused.

A rerun of a finished study trains nothing: the summary then says how many finished ensemble chunks it reused and
from which folder (``sapa verify`` fills ``results/train``, the default ``--out`` of ``sapa train``).
"""

from __future__ import annotations

from pathlib import Path

from sapa.display import sig, text_table


def summary(res, out: Path, seconds: float) -> str:
    """The table (task, N, arm, best lr, test accuracy, divergences, ‖φ(S)‖_F) and the lines below it."""
    from empirics.training.study_analysis import best_lr, flattening
    from empirics.training.study_config import ARMS
    from empirics.training.train_study import best_lr_summary
    from sapa.claims.study_claims import alpha_line, flattening_line

    best = best_lr(res.runs)
    tab = best_lr_summary(res.runs, best)
    rows = [[r.task, r.N, ARMS[r.arm].label if r.arm in ARMS else r.arm, f"{r.lr:.0e}", f"{r.test_acc_median:.3f}",
             f"{r.test_acc_min:.3f}–{r.test_acc_max:.3f}", f"{int(r.diverged)} of {r.seeds}",
             f"{int(r.diverged_grid)} of {r.runs_grid}", sig(r.attn_fro_median, 4)] for r in tab.itertuples()]
    lines = text_table(["task", "N", "arm", "best lr", "test acc", "min–max over seeds", "diverged at best lr",
                        "diverged over lr grid", "‖φ(S)‖_F"], rows,
                       right=[False, True, False, True, True, True, True, True, True])
    prov = res.provenance
    lines += ["",
              "test acc: median over seeds at the arm's best learning rate (chosen on validation accuracy; a diverged "
              "member counts at chance); diverged: members whose training loss went non-finite or ended above its "
              "start; ‖φ(S)‖_F: median final attention norm (float64, exact kernels).",
              alpha_line(prov), flattening_line(flattening(res.history, best)), reuse_line(prov, out, seconds)]
    return "\n".join(lines)


def reuse_line(prov: dict, out: Path, seconds: float) -> str:
    """How much of the study this run trained and how much it found finished in ``out/chunks``."""
    members, chunks = int(prov["members"]), int(prov["chunks"])
    now = int(prov.get("members_trained_now", 0))
    chunks_now = prov.get("chunks_trained_now")
    where = Path(out) / "chunks"
    if now == 0:
        return (f"Nothing to train: all {members} members ({chunks} ensemble chunks) were already finished in {where} "
                f"(same budget, seed and design; `sapa verify` trains into results/train). This summary reads them "
                f"({seconds:.1f} s); to train again, give another --out or delete that folder.")
    if now < members:
        reused = "" if chunks_now is None else f" ({chunks - int(chunks_now)} ensemble chunks)"
        return (f"Trained {now} of {members} members now and reused the other {members - now}{reused}, finished "
                f"earlier in {where}; {seconds:.1f} s. Training float32, norms float64; results in {out}.")
    return (f"Trained all {members} members ({chunks} ensemble chunks) in {seconds:.1f} s. Training float32, norms "
            f"float64; results in {out}.")
