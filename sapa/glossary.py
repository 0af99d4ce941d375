"""The words of the ledger, defined once: verdict labels and the terms the entries use (reports and README).

Plain data. The reports print both lists before any table that uses them; a test checks that the README's
glossary defines every label and term listed here.
"""

from __future__ import annotations

from sapa.labels import DEFINITIONS as VERDICTS  # noqa: E402  one meaning per label: defined once, in sapa.labels

TERMS: dict[str, str] = {
    "reading": "one precise version of a claim (its object, quantifier and randomness model), decided by a calibrated "
               "rule; an entry's first reading is its headline, the paper's most defensible one",
    "paper": "weight model: S = A Bᵀ with A, B ∈ R^{N×d} independent, i.i.d. N(0, σ²) entries (the paper's "
             "assumption: every entry of S alike)",
    "shared": "weight model: S = X W Xᵀ for one fixed D × D matrix W (`--w`), token rows x_i ~ N(0, I_D) or N(0, Σ) "
              "(`--sigma-x`)",
    "iid": "weight model: S = X W_Q W_Kᵀ Xᵀ with W_Q, W_K ∈ R^{D×d} independent, N(0, σ²) entries (σ = 1/√D unless "
           "given), averaged over X and the weights",
    "tied": "weight model: as iid with W_K = W_Q (correlation ρ = 1)",
    "corr": "weight model: as iid with W_K = ρ W_Q + √(1 − ρ²) W_⊥, entrywise correlation ρ (`--rho`, default 0.5)",
    "E-RMS": "√E‖·‖², the root of the expected squared norm: what the exact moments give and what Monte Carlo "
             "estimates; sizes are compared with softmax's bound ‖softmax(S)‖_F ≤ √N",
    "growth exponent": "the local slope d log(E-RMS norm) / d log N at N; √N growth is exponent ½, N growth 1",
    "N*": "1 + m_diag/m_off with m_off = E S_12^{2p}, m_diag = E S_11^{2p}: the length at which the N² term of "
          "E‖S^{∘p}‖²_F = N(N−1)·m_off + N·m_diag overtakes the N term; x^p/√N grows like √N only for N ≫ N* and is "
          "nearly flat below",
    "N_reg": "the smallest N from which the growth exponent stays within 0.05 of the predicted rate; a tight-rate "
             "reading that HOLDS_IN_REGIME holds for N ≥ N_reg",
    "α*": "the divisor of the training study's fixed-scale arms x/α* and x³/α*: tuned once at the task's smallest N "
          "(a grid, on validation accuracy), then held fixed at every N, like the paper's x/16",
    "logit convention": "the theorems' S = X W_Q W_Kᵀ Xᵀ, without 1/√d, unless an entry says otherwise; "
                        "transformers compute S/√d, which divides x^p by d^{p/2} (512 for x³ at d = 64): growth "
                        "exponents in N stay, constants against softmax change. The training study, the real model "
                        "and the other papers' activations use S/√d",
}
