"""The comparative audit figure of the other papers' entries: six activation families' growth against N, iid and tied
weights (:func:`sapa.empirics.experiments.activation_sampling.run_audit_compare`), computed once per ``sapa verify`` run."""

from __future__ import annotations

from sapa.ledger import Context, store_figure_data


def figure(ctx: Context) -> tuple[str, ...]:
    """The figure's paths (relative to the run's folder), drawn once per run and stored for ``sapa figures``."""
    if "audit_compare" not in ctx.cache:
        from sapa.empirics.experiments.activation_sampling import run_audit_compare
        from sapa.figures import audit_compare as fig

        res = run_audit_compare(trials=16 if ctx.budget.name == "quick" else 96, seed=ctx.budget.seed,
                                Ns=(8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384), mc_Ns=(32, 64, 128, 256))
        fig.check(res)
        stem = fig.stored_stem(res)
        store_figure_data(ctx, fig.NAME, res.to_json(), stem)
        paths = fig.draw(res, ctx.out_dir / "figures", stem)
        ctx.cache["audit_compare"] = tuple(str(p.relative_to(ctx.out_dir)) for p in paths)
    return ctx.cache["audit_compare"]
