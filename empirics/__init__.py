"""Numbers for arXiv 2410.18613: exact per-sample norm kernels, samplers, Monte Carlo, fits.

``empirics`` may call ``theory`` for predictions, never the reverse.
"""
