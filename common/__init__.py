"""Plumbing shared by every layer: validation, atomic writes, checksums, output folders, worker processes.

Nothing here knows the paper. ``validate`` and ``atomic`` check inputs and write files atomically;
``integrity`` seals stored results with a sha256; ``figdata`` stores a figure's data as plain JSON;
``outdir`` checks and locks the folder a command writes to; ``numerics`` pins the CPU kernel dispatch
(so a seed gives the same numbers everywhere), ``pool`` runs deterministic single-threaded worker
processes, ``interrupt`` turns SIGTERM into Ctrl-C, and ``progress`` reports long work. ``common`` sits
below ``theory`` in the layer contract and imports nothing from the project.
"""
