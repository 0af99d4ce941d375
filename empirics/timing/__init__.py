"""Timing: measured speed and memory of the exact norm kernels (``bench``) and the wall time of polynomial
attention against softmax's fused kernel (``overhead``). Readings depend on the machine; they are reported
with the machine state and never asserted as constants.
"""
