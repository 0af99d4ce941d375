"""Figure 6: ‖diag(s) − s sᵀ‖_F over the probability simplex Δ₃, the picture of the sharp constant.

Theorem 4.1 / Eq. 4.2 of arXiv 2410.18613: the maximum of the row Jacobian's Frobenius norm is
1/2, attained at the midpoints of the edges (mass 1/2 on exactly two entries), not at the
vertices (one-hot rows give 0) nor at the centroid (√2/3 ≈ 0.471).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.tri as mtri
import numpy as np

from sapa.figures import style
from sapa.theory.softmax import row_jacobian_fro, sharp_row_jacobian_fro_bound


def simplex_grid(n: int) -> np.ndarray:
    """All points (i, j, k)/n of Δ₃ with i + j + k = n: ((n+1)(n+2)/2, 3)."""
    pts = [(i, j, n - i - j) for i in range(n + 1) for j in range(n + 1 - i)]
    return np.array(pts, dtype=np.float64) / n


def to_cartesian(s: np.ndarray) -> np.ndarray:
    """Barycentric (…, 3) → plane (…, 2), vertices at (0,0), (1,0), (½, √3/2)."""
    return np.stack([s[..., 1] + 0.5 * s[..., 2], (math.sqrt(3) / 2) * s[..., 2]], axis=-1)


def main(out_dir: str | Path = "results/figures", small: bool = False) -> list[Path]:
    """Draw the landscape, assert the sharp maximum 1/2 at the edge midpoints, save PNG + PDF."""
    n = 60 if small else 240
    s = simplex_grid(n)
    f = row_jacobian_fro(s)  # (M,)
    sharp = float(sharp_row_jacobian_fro_bound())
    # The claim, asserted before drawing: max = 1/2, attained only at the three edge midpoints.
    assert f.max() <= sharp + 1e-12
    argmax = s[np.isclose(f, f.max(), atol=1e-12)]
    mids = np.array([[0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    assert abs(f.max() - sharp) < 1e-12 and all(np.isclose(argmax, m).all(1).any() for m in mids)

    xy = to_cartesian(s)
    tri = mtri.Triangulation(xy[:, 0], xy[:, 1])
    with plt.rc_context(style.RC):
        fig, ax = plt.subplots(figsize=(5.8, 6.0))
        cf = ax.tricontourf(tri, f, levels=np.linspace(0, 0.5, 21), cmap="viridis")
        ax.tricontour(tri, f, levels=[0.1, 0.2, 0.3, 0.4, 0.45, 0.49], colors="white", linewidths=0.6)
        cb = fig.colorbar(cf, ax=ax, shrink=0.7, pad=0.08)
        cb.set_label(r"$\|\mathrm{diag}(s) - s s^\top\|_F$")
        corners = to_cartesian(np.eye(3))
        ax.plot(*np.vstack([corners, corners[:1]]).T, color="black", lw=1)
        m = to_cartesian(mids)
        ax.plot(m[:, 0], m[:, 1], "r*", ms=14, mec="white", label=f"maximum {sharp:g} (mass ½ on two entries)")
        c = to_cartesian(np.full(3, 1 / 3))
        ax.plot(*c, "wo", mec="black", ms=7, label=r"centroid: $\sqrt{2}/3 \approx 0.471$")
        ax.plot(corners[:, 0], corners[:, 1], "ks", ms=7, label="one-hot rows: 0 (the reviewer's example)")
        for k, (x, y) in enumerate(corners):
            ax.annotate(f"$s_{k + 1} = 1$", (x, y), textcoords="offset points",
                        xytext=[(-20, -16), (-20, -16), (10, -4)][k])
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title("Row-softmax Jacobian norm over the simplex Δ₃\n"
                     "sharp bound ½ per row ⇒ ‖∂softmax(S)/∂S‖_F ≤ √N/2 (paper: 2√N)")
        ax.set_ylim(-0.12, math.sqrt(3) / 2 + 0.05)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), framealpha=0.9, fontsize=8, ncol=1)
        return style.save(fig, out_dir, style.stem("softmax_jacobian_landscape", grid=n))


if __name__ == "__main__":  # pragma: no cover
    print(main())
