#!/usr/bin/env bash
# Regenerate requirements.lock, the constraints every install in the README and .ci/run uses (docs/install.md).
# Needs pip-tools (python3 -m pip install pip-tools==7.7.0) and the CPU build of torch where pip can see it (PyTorch's
# CPU wheel index or a --find-links folder). Existing pins are kept; `tools/lock.sh --upgrade` moves every one to the
# newest release pyproject.toml's ranges admit.
#   pip-compile: every extra (dev, notebooks) and the base; no index or find-links lines (the lock is machine-free);
#     `sapa` itself is left out (the dev extra names sapa[test,dist,real], which pip-compile would pin as a file URL).
#   sed: torch==X+cpu -> torch==X, so the one lock installs the CPU build where a CPU index offers it and the default
#     build elsewhere (pyproject.toml's torch comment).
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--all-extras --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host
      --annotation-style=line --unsafe-package sapa --output-file=requirements.lock)
export CUSTOM_COMPILE_COMMAND="tools/lock.sh: pip-compile ${args[*]} pyproject.toml && sed -i -E 's/^torch==([0-9.]+)[+]cpu/torch==\1/' requirements.lock   (pip-tools 7.7.0, Python 3.11, Linux x86-64; docs/install.md)"
pip-compile "${args[@]}" "$@" pyproject.toml
sed -i -E 's/^torch==([0-9.]+)[+]cpu/torch==\1/' requirements.lock
