"""Numbers for arXiv 2410.18613: exact per-sample norm kernels, samplers, Monte Carlo, fits.

``empirics`` may call ``theory`` for predictions, never the reverse.
"""

from empirics.numerics import pin_kernel_dispatch as _pin

_pin()  # before any torch import: the same seed gives the same numbers on AVX2 and AVX-512 machines
