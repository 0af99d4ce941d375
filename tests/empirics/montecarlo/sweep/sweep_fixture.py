"""A tiny sweep config shared by the tests of `empirics/montecarlo/sweep/`."""

from __future__ import annotations

import pandas as pd

from sapa.empirics.montecarlo.sweep import SweepConfig, config_from_dict

TINY = {  # 18 cells: (paper, corr) × (softmax, x/√N, x³/√N) × N
    "seed": 3,
    "trials": 4,
    "N": [4, 8, 16],
    "D": [4],
    "d": ["D"],
    "weight_model": ["paper", "corr"],
    "rho": [0.5],
    "activation": [
        {"kind": "softmax"},
        {"kind": "poly", "p": [1, 3], "scale": "inv_sqrt_n"},
    ],
}


def tiny(**over) -> SweepConfig:
    return config_from_dict({**TINY, **over})


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in df.columns if c != "value"]
    return df.sort_values(cols, kind="stable").reset_index(drop=True)
