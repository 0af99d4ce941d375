"""Numbers for arXiv 2410.18613, in subpackages by idea, each layer importing only the ones below it.

``kernels`` computes exact per-sample attention norms, Jacobians, linearised attention and the scale
rules; ``montecarlo`` draws seeded random inputs and weights and runs sweeps with their statistics;
``experiments`` answers one claim or question each (scale direction, causal rows, worst case, softmax
bounds, the audit of any activation); ``training`` is the tiny-transformer training study; ``realmodel``
reads a real trained model (all-MiniLM-L6-v2) offline; ``timing`` measures speed and memory.
``empirics`` may call ``theory`` for predictions, never the reverse.
"""

from sapa.common.numerics import pin_kernel_dispatch as _pin

_pin()  # before any torch import: the same seed gives the same numbers on AVX2 and AVX-512 machines
