"""Exact kernels: ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F for one input without building the Jacobian, worst-case
Lipschitz probes, the exact linearisation c·(QKᵀ)^{∘p}V = c·φ_p(Q)(φ_p(K)ᵀV), and the scale rules c(N).

Pure functions of explicit tensors, in float64 where they verify: the lowest floor of ``empirics``,
used by every experiment, the Monte Carlo sweeps, the training study's norm probes and the real model.
"""
