"""Mechanism tasks x (B, N) → targets y (B, N), −100 where not scored: copy at lag k, induction head, MQAR.

The cheap capability probes the field uses for attention alternatives, each a causal
next-token task whose solution needs one specific attention pattern:

* ``copy1`` / ``copy2`` — N uniform tokens of a vocabulary of V; y_t = x_{t−k} for t ≥ k (a head
  that attends to offset k);
* ``copy_far`` — the long-lag copy: the same at lag k = N/2 (⌊N/2⌋), every position t ≥ k scored (dense): a head
  that attends to one offset as far back as half the context, the positional counterpart of induction (an
  earlier probe repeated a random half-sequence, which is this copy at lag N/2 − 1 one token ahead);
* ``induction`` — uniform filler tokens of 0 … V − 2, a trigger token T = V − 1 followed by a
  token b at a uniform position, and T again as the last token: y_{N−1} = b (a head that finds the
  earlier T and copies the token after it; two layers);
* ``induction_lag`` — induction at a random lag, every repeated token scored: N distinct tokens (drawn without
  replacement from 0 … V − 1, so V ≥ N), a segment of length L = N/4 copied again at a lag uniform in L … N − L
  (the copies do not overlap), the first copy's start uniform; at the j-th token of the repeat (j = 0 … L − 2) the
  target is the (j+1)-th: find the current token's earlier occurrence by content and copy its successor (no single
  lag carries more than 12 % of the probability at N = 16, 4 % at N = 64);
* ``mqar`` — multi-query associative recall as defined in Zoology (Arora, Eyuboglu et al. 2023,
  "Zoology: Measuring and improving recall in efficient language models"): D key–value pairs
  (keys distinct from 1 … V/2 − 1, values distinct from V/2 … V − 1) fill the first 2D positions;
  each key is queried once in the rest of the sequence, at position 2D + 2g with the gaps g drawn
  without replacement from P(g) ∝ a·g^(a−1), g = 1 … (N − 2D)/2 (power law, a = 0.01 as Zoology's
  default: short gaps are likely); at a query position y = the key's value; every other position
  holds a uniform random token (Zoology's ``random_non_queries``). Zoology uses a vocabulary larger
  than N (8 192); a CPU study uses a small one (V = 32 by default), which the task allows as long as
  D ≤ V/2 − 1.

Chance: 1/V (copy), 1/(V − 1) (induction: the answer is a filler token) and 2/V (MQAR: a value is one of V/2
tokens). All draws come from an
explicit ``torch.Generator``.
"""

from __future__ import annotations

import torch

from sapa.common.validate import InputError, choice, positive_int

__all__ = ["TASKS", "IGNORE", "MQAR_PAIRS", "MQAR_POWER", "batch", "chance", "check_task", "lag"]

TASKS = ("copy1", "copy2", "copy_far", "induction", "induction_lag", "mqar")
IGNORE = -100  # F.cross_entropy's ignore_index: positions that are not scored
MQAR_PAIRS = 4  # D key–value pairs (Zoology varies 4 … 64)
MQAR_POWER = 0.01  # a of the power-law gap distribution (Zoology's default power_a)


def check_task(task: str, N: int, vocab: int) -> None:
    """Refuse a (task, N, V) the task cannot be built at (one clear :class:`InputError`)."""
    choice("mechanism task", task, TASKS)
    positive_int("N", N)
    positive_int("vocab", vocab)
    if task.startswith("copy") and N <= lag(task, N):
        raise InputError(f"{task} needs N > {lag(task, max(N, 1))}, got {N}")
    if task == "copy_far" and N < 4:
        raise InputError(f"copy_far needs N ≥ 4, got {N}")
    if task == "induction" and (N < 4 or vocab < 3):
        raise InputError(f"induction needs N ≥ 4 and V ≥ 3, got N = {N}, V = {vocab}")
    if task == "induction_lag" and (N < 8 or vocab < N):
        raise InputError(f"induction_lag needs N ≥ 8 and V ≥ N (distinct tokens), got N = {N}, V = {vocab}")
    if task == "mqar" and (4 * MQAR_PAIRS > N or MQAR_PAIRS > vocab // 2 - 1):
        raise InputError(f"mqar with {MQAR_PAIRS} pairs needs N ≥ {4 * MQAR_PAIRS} and V ≥ {2 * MQAR_PAIRS + 2}, "
                         f"got N = {N}, V = {vocab}")


def lag(task: str, N: int) -> int:
    """k of a copy task: 1, 2, or ⌊N/2⌋ (copy_far).

    >>> lag("copy2", 64), lag("copy_far", 64)
    (2, 32)
    """
    return N // 2 if task == "copy_far" else int(task[-1])


def chance(task: str, vocab: int) -> float:
    """Accuracy of a uniform guess over the scored tokens' range."""
    return 2.0 / vocab if task == "mqar" else 1.0 / (vocab - 1) if task == "induction" else 1.0 / vocab


def batch(task: str, B: int, N: int, vocab: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(x (B, N) int64 tokens, y (B, N) int64 targets, IGNORE where not scored) of ``task``."""
    check_task(task, N, vocab)
    if task.startswith("copy"):
        k = lag(task, N)
        x = torch.randint(0, vocab, (B, N), generator=gen)
        y = torch.full((B, N), IGNORE, dtype=torch.int64)
        y[:, k:] = x[:, :-k]
        return x, y
    if task == "induction_lag":
        return _induction_lag(B, N, vocab, gen)
    if task == "induction":
        T = vocab - 1
        x = torch.randint(0, vocab - 1, (B, N), generator=gen)  # filler never equals T
        pos = torch.randint(0, N - 2, (B,), generator=gen)  # T at pos, b at pos + 1 ≤ N − 2
        rows = torch.arange(B)
        x[rows, pos] = T
        x[:, N - 1] = T
        y = torch.full((B, N), IGNORE, dtype=torch.int64)
        y[:, N - 1] = x[rows, pos + 1]
        return x, y
    return _mqar(B, N, vocab, gen)


def _induction_lag(B: int, N: int, vocab: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``induction_lag``: distinct tokens, the segment [s1, s1 + L) copied to [s2, s2 + L), s2 = s1 + lag."""
    L = N // 4
    x = torch.argsort(torch.rand(B, vocab, generator=gen), dim=1)[:, :N]  # (B, N) distinct tokens
    lag = L + (torch.rand(B, generator=gen) * (N - 2 * L + 1)).long()  # (B,) uniform in L … N − L
    s1 = (torch.rand(B, generator=gen) * (N - L - lag + 1)).long()  # (B,) uniform in 0 … N − L − lag
    s2 = s1 + lag
    j = torch.arange(L)
    rows = torch.arange(B)[:, None]
    x[rows, s2[:, None] + j] = x[rows, s1[:, None] + j]  # the repeat
    y = torch.full((B, N), IGNORE, dtype=torch.int64)
    jj = j[:-1]  # the repeat's tokens 0 … L − 2 predict their successors
    y[rows, s2[:, None] + jj] = x[rows, s2[:, None] + jj + 1]
    return x, y


def _mqar(B: int, N: int, vocab: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    D, half = MQAR_PAIRS, vocab // 2
    keys = torch.argsort(torch.rand(B, half - 1, generator=gen), dim=1)[:, :D] + 1  # (B, D) distinct in 1 … V/2 − 1
    vals = torch.argsort(torch.rand(B, vocab - half, generator=gen), dim=1)[:, :D] + half  # (B, D) distinct values
    space = (N - 2 * D) // 2
    g = torch.arange(1, space + 1, dtype=torch.float64)
    p = MQAR_POWER * g ** (MQAR_POWER - 1)  # (space,) ∝ a·g^(a−1)
    gaps = torch.multinomial(p.expand(B, space), D, replacement=False, generator=gen)  # (B, D) in 0 … space − 1
    x = torch.randint(0, vocab, (B, N), generator=gen)  # random non-query tokens
    x[:, 0:2 * D:2], x[:, 1:2 * D:2] = keys, vals
    qpos = 2 * D + 2 * gaps  # (B, D) query positions
    x.scatter_(1, qpos, keys)
    y = torch.full((B, N), IGNORE, dtype=torch.int64)
    y.scatter_(1, qpos, vals)
    return x, y
