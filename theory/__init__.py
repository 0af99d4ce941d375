"""Exact mathematics for arXiv 2410.18613 (sympy first, no sampling).

``theory`` imports nothing from ``empirics``: every result here is a derivation or an
exact closed form, so it can serve as the independent reference the numerics are judged by.
"""
