"""One caption per kind of figure: what the figure shows, what to look at, and what the reader should see.

The reports (``sapa/report/__init__.py``) caption every figure from here, by the start (and, for a figure module that saves
several figures, the end) of its file stem; the stem itself, which encodes the configuration
(``norm_vs_n_D16_d16_rho0p5_trials768_N8-512``), is shown beside the caption as the file's name. Plain data: no
matplotlib, so the report imports it cheaply. A test checks that every stem a figure module can save has a caption
here and that each caption is sentences.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caption:
    """The caption of every figure whose file stem starts with ``prefix`` (and ends with ``suffix``, when given)."""

    prefix: str
    title: str          # a few words, for links ("Figure 3: the regime map")
    text: str           # sentences: what is drawn, what to look at, what it shows
    suffix: str = ""


_PROTOCOLS = ("Each head's measured growth exponent (with a 90 % interval) under the four token protocols (special "
              "tokens in or out; re-encoded prefixes or one fixed-context pass), for softmax, x/√N and x³/√N, with the "
              "O(√N) edge ½ + 0.05. Softmax's heads stay below the edge; look at how many x/√N and x³/√N heads cross it "
              "under each protocol.")  # drawn under two stems: real_heads_protocols_…, or <stem>_protocols

CAPTIONS: tuple[Caption, ...] = (
    Caption("softmax_jacobian_landscape", "the softmax Jacobian over the simplex",
            "The Frobenius norm ‖diag(s) − s sᵀ‖_F of one softmax row's Jacobian over every probability vector s of "
            "three entries. Look at where it peaks: at the midpoints of the edges (mass ½ on two entries), with "
            "value ½, and not at the corners (one-hot rows give 0) nor at the centre (≈ 0.471). So the sharp "
            "constant of Eq. 4.2 is √N/2, four times below the paper's 2√N."),
    Caption("norm_vs_n", "‖φ(S)‖_F against N",
            "The norm ‖φ(S)‖_F against N on log–log axes for softmax and the paper's polynomial activations, one panel per "
            "weight model (paper, iid, tied, corr). Markers are Monte Carlo RMS norms with ±2-standard-error "
            "intervals, lines the exact E-RMS, grey guides √N (softmax's bound) and N, dotted verticals the "
            "crossover N*. Look first for the markers on the lines (Monte Carlo agrees with the exact moments); then "
            "see x/√N and x³/√N run parallel to √N only to the right of N*, and compare their height with "
            "softmax's: where both grow like √N, the constant is what separates them."),
    Caption("jac_norm_vs_n", "‖∂φ(S)/∂X‖_F against N",
            "The Jacobian norm ‖∂φ(S)/∂X‖_F against N on log–log axes, drawn like the figure of ‖φ(S)‖_F (markers "
            "Monte Carlo, lines exact, grey guides √N and N, dotted verticals N*). Look for the same pattern as in "
            "the norm: the markers sit on the exact lines, and the scaled polynomials reach the √N slope only "
            "beyond N*."),
    Caption("regime_map", "the regime map over (N, D)",
            "The local growth exponent of E-RMS ‖x^p/√N‖_F over the sequence length N and the token width D "
            "(rows p = 1 and 3; columns iid, tied and correlated weights; head width d = 64). Where the map reads ½ "
            "the √N rate of Cor. 4.3/4.5 has set in; where it reads near 0 the norm is flat in N. Look at how far "
            "to the right the ½ region starts with tied weights and p = 3: ViT-Base (N = 196, D = 768) is still in "
            "the flat region there."),
    Caption("scale_direction", "the direction of the scale",
            "Which way the scale of x^p must move as N shrinks, with the scale read as the paper writes it: the "
            "divisor α of x^p/α. Left (a): softmax's typical norm against N. Middle (b) and right (c), p = 1, 3: "
            "the divisor α(N) = 1/c(N) that brings the polynomial to softmax's level (its typical norm, or its bound "
            "√N), normalised to N = 256, beside the paper's α = √N; the stars mark the reviewer's coefficient "
            "c = 1/√N at N = 256, 64, 16, 8. Look at the shading: it is the paper's direction (α falls as N falls), "
            "and every curve lies inside it, as the ledger's HOLDS says; read as the coefficient c = 1/α the same "
            "curves rise as N falls, the reviewer's direction."),
    Caption("causal_masking", "row norms under a causal mask",
            "Row norms of attention under a causal mask, where row i sees only i tokens. Top: the E-RMS of each "
            "row against i at two sequence lengths, for softmax (its bound and its typical rows) and for x^p with "
            "the global scale 1/√N or the per-row scale 1/√i. Look at the global-scale rows rising like √i while "
            "the 1/√i rows stay level, as softmax's do. Bottom: the scale fixed at a training length and the "
            "sequence 8× shorter or longer."),
    Caption("overhead", "attention runtime against N",
            "CPU seconds per attention call against N on log–log axes, forward and forward+backward, without and "
            "with a causal mask: softmax's fused kernel (black) against the naive and linearised polynomial forms, "
            "under the mask also the form that skips the blocks above the diagonal, and torch.compile of the naive "
            "form where the run timed it (the legend says which forms were not timed; p = 3 thick, p = 2 dashed, "
            "p = 1 dotted), with guides ∝ N² and ∝ N. Compare each coloured line with the black one at the same N: "
            "the gap is the overhead the reviewers asked about (one thread, float32, process CPU time, so a busy "
            "machine does not move it)."),
    Caption("overhead", "where the linearisation pays off",
            "The sequence length from which the exact linearisation φ_p(Q)(φ_p(K)ᵀV) beats the naive N² form, "
            "measured on the forward pass and predicted from flop counts, per power p and head width d. Look at "
            "how steeply it grows with p: for x³ at d = 64 the feature count makes the linearisation pay off only "
            "far beyond the lengths measured here.", suffix="_crossover"),
    Caption("overhead", "the cost model against the measurement",
            "Each timed form's ratio to softmax, measured, against the ratio the cost model predicts from its flops, "
            "element-wise work and bytes of N×N data at this machine's measured rates (hollow: forward; filled: "
            "forward + backward; larger markers: larger p). Look at which forms leave the grey ±1.5× band: there "
            "the simple model misses what the measurement shows (caches, the fused kernel's own blocking).",
            suffix="_model"),
    Caption("worst_case", "worst case beside typical case",
            "The worst case beside the typical case of ‖x^p/√N‖_F and its Jacobian against N (rows p; columns the "
            "input set: every token on a sphere ‖x_i‖ = r, or only the total ‖X‖_F = r√N bounded). Shaded: the "
            "exact bracket from a witness input to an upper bound; markers: the best input found by gradient "
            "ascent; grey: a random input. Look at the slopes: with every token bounded the worst case grows like "
            "√N; with only ‖X‖_F bounded, x³/√N grows like N^2.5, because the energy gathers on one or two "
            "tokens."),
    Caption("audit_compare", "six activations compared",
            "Six attention activations under iid (top) and tied (bottom) weights, with logits qᵀk/√d: left, the "
            "local growth exponent (softmax's bound: ½); right, E-RMS ‖φ‖_F/√N (softmax's bound: 1). Lines are "
            "closed forms or quadrature, points Monte Carlo. An activation that behaves like softmax stays at or "
            "below ½ on the left and near or below 1 on the right; look at where x/√N and x³/√N sit beside ReLU/N, "
            "sigmoid(x − log N) and the row-normalised degree-4 polynomial."),
    Caption("training_vs_n", "test accuracy against N",
            "Test accuracy against N for every arm of the training study, each at its own best learning rate "
            "(median over seeds, bars from the worst to the best seed); softmax thick and black, the task's floor "
            "dotted grey (text: the bigram predictor); below, the share of each arm's learning-rate grid that "
            "diverged. Look at each arm's distance to softmax as N grows: an arm whose scale transfers across N "
            "keeps it; an arm that stays on the floor has not learnt the task, and its trend says nothing.",
            suffix="_acc"),
    Caption("training_vs_n", "attention norms during training",
            "The attention norm ‖φ(S)‖_F over the training steps (log scale), one panel per task and N, one line per arm at its best "
            "learning rate (median over seeds). Read the level at which each arm settles and whether it rises with "
            "N; set it beside the accuracy figure to see whether a lower norm goes with a better accuracy.",
            suffix="_norms"),
    Caption("training_vs_n", "learning-rate sensitivity",
            "Validation accuracy against the learning rate, one panel per task and N, one line per arm (median "
            "over seeds); the filled marker is the rate each arm was judged at. Look for selected rates at the edge "
            "of the grid: there a better rate may lie outside it.", suffix="_lr"),
    Caption("dose_response", "accuracy against the attention norm over the doses of a scale",
            "Test accuracy against the final attention norm (top ‖φ(S)‖_F, bottom ‖∂φ(S)/∂X‖_F, log10, seed means) "
            "for x/c and x³/c over a log grid of c and softmax(S/τ) over a grid of τ, one panel per task at its "
            "smallest N, each dose labelled with its c (τ). Within a curve only the scale moves: read whether "
            "accuracy rises as the norm falls (the paper's thesis) or the other way, and where each curve peaks. "
            "Compare the ringed points, x³/1 and x/16, the reviewers' pair."),
    Caption("mechanism_learning", "the slowdown against N, seed by seed",
            "The paired log2 slowdown, steps to accuracy 0.5 of x/√N or x³/√N over softmax's at the same seed, "
            "against N, one panel per probe task and arm: each seed is a vertical interval (its exits are known to "
            "one evaluation step; an arrow: beyond the step cap) and the black line is the maximum-likelihood fit "
            "whose change over the range is Δ. Look at the line's rise: 1 is a doubling of the slowdown over the "
            "range; only the N cells softmax solves are drawn.", suffix="_slowdown"),
    Caption("mechanism_learning", "mechanism learning curves",
            "Median validation accuracy against training steps (log scale), one panel per probe task and N, one line "
            "per arm; a member stops once it solves the task (accuracy 0.9) and its curve is held there. Look at how "
            "far to the right of softmax the polynomial arms rise as N grows.", suffix="_curves"),
    Caption("mechanism_learning", "steps to accuracy 0.5 against N",
            "The Kaplan–Meier median steps to validation accuracy 0.5 against N (log–log), one line per task and "
            "arm; an open marker lies beyond the step cap. Compare each polynomial arm's slope with softmax's: a "
            "steeper one is a slowdown that grows with N.", suffix="_exit"),
    Caption("mechanism_learning", "solved fraction against N",
            "The fraction of seeds that reach validation accuracy 0.9 within the step cap against N, one panel per "
            "task; a shaded N is one softmax itself does not solve in 90 % of its seeds, which enters no verdict. "
            "Look for the N at which each polynomial arm stops solving a task softmax still solves.",
            suffix="_solved"),
    Caption("study_learning", "learning curves of the training study",
            "Median validation accuracy against training steps (log scale), one panel per task and N, one line per "
            "arm at its best learning rate; the dotted line is the task's floor (text: the bigram predictor). Look at "
            "when each arm leaves the floor relative to softmax.", suffix="_curves"),
    Caption("study_learning", "steps to leave the floor against N",
            "The Kaplan–Meier median steps to leave the floor (+0.03) against N (log–log), one line per task and arm; "
            "an open marker lies beyond the step cap. Compare each arm's slope with softmax's.", suffix="_exit"),
    Caption("study_learning", "the slowdown to leave the floor against N, seed by seed",
            "The paired log2 slowdown of each arm of the training study, steps to leave the task's floor (+0.03) "
            "over softmax's at the same seed, against N, one panel per task and arm: each seed is a vertical interval "
            "(its exit is known to one evaluation step; an up-triangle: beyond the step cap, a lower bound) and the "
            "black line is the maximum-likelihood fit whose change over the range is Δ. Read the line's rise: 1 is a "
            "doubling of the slowdown over the range, 0 a slowdown that does not grow with N; at the quick budget the "
            "red note on the figure says the fit is a smoke test, not a finding.", suffix="_slowdown"),
    Caption("study_learning", "solved fraction of the training study against N",
            "The fraction of seeds of each arm of the training study that reach validation accuracy 0.9 within the "
            "step cap against N, one panel per task; a shaded N is one softmax itself does not solve in 90 % of its "
            "seeds, which enters no verdict. Look for the N at which an arm stops solving a task softmax still "
            "solves.", suffix="_solved"),
    Caption("real_heads", "a trained model's heads on the regime map",
            "The 72 heads of the trained all-MiniLM-L6-v2 on the regime map of Cor. 4.3/4.5 (rows p = 1 and 3). "
            "Left: each head at the model's training length N = 128 against the N* of its own weights (filled: the "
            "measured token covariance; grey: N(0, I)), with random ViT-like heads for reference. Right: the "
            "growth exponent measured on the model's own hidden states against the N* of a matched Gaussian head, "
            "with that head's exact curve. A head in the √N regime sits at ½; look at how many real heads lie "
            "above it."),
    Caption("real_heads", "each head under four token protocols", _PROTOCOLS, suffix="_protocols"),
    Caption("real_heads_protocols", "each head under four token protocols", _PROTOCOLS),
    Caption("lipschitz_ball", "the Lipschitz constant on a token ball, softmax beside x/√N and x³/√N",
            "The spectral norm σ₁(∂f/∂X) of one attention head against the sequence length n on log–log axes, one "
            "panel per activation (softmax, x/√N, x³/√N) and a fourth for the real hidden states of all-MiniLM-L6-v2."
            " Markers are certified lower bounds of the Lipschitz constant on the ball ‖x_i‖ ≤ R found by a seeded "
            "ascent, one colour per ball (named by its largest logit β); the dashed line of the same colour is sapa's"
            " proven upper bound, so the true constant lies between them; black crosses on the softmax panel are the "
            "half-attention family, explicit inputs whose certified σ₁ grows at least like √n while one far token can "
            "take half of every query's attention. Look at softmax: on the large ball it "
            "climbs close to the √n guide, on the small ball it is flat from a few tokens on (the mean-field regime);"
            " x/√N and x³/√N follow √n on both balls and never flatten. In the last panel compare the real layers' "
            "slopes with the n^¼ and √n guides."),
    Caption("bench_scaling", "the sweep on 1 and K workers",
            "Wall time of one fixed Monte Carlo sweep on 1 and K local workers (start-up hatched on top), beside the "
            "ideal time T₁/K, with the parallel efficiency over each bar. Compare each bar with the ideal: the gap "
            "is start-up and scheduling. Every worker count gives byte-identical results; the time is measured, "
            "not asserted, and moves with the machine's load."),
    Caption("compare_scorecard", "activations side by side against softmax",
            "One row per activation (softmax first, the reference), one column per axis: E-RMS ‖φ(S)‖_F/√N at "
            "ViT-Base, the growth and worst-case exponents, the Lipschitz exponent on the β = 4 ball, CPU time against "
            "SDPA and training steps against softmax. Each cell gives its value and interval; its colour is the "
            "calibrated rule's verdict (green holds, red fails, white no rule applies) and a hatched cell could not be "
            "computed for that activation. Read a row across: an activation that behaves like softmax is green on "
            "every axis a rule decides."),
)


def caption_for(stem: str) -> Caption | None:
    """The caption of the figure saved as ``stem`` (``None`` when no kind matches): a matching suffix wins, then
    the longest matching prefix."""
    hits = [c for c in CAPTIONS if stem.startswith(c.prefix) and (not c.suffix or stem.endswith(c.suffix))]
    if not hits:
        return None
    return max(hits, key=lambda c: (bool(c.suffix), len(c.prefix)))
