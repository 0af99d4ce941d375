"""Tests for `sapa/cli.py`'s import structure: help, version and an argument error answer at once.

The parser must not import a claim (torch, pandas, ...) to list the ``--only`` ids, and every command handler
imports its modules inside: a fresh interpreter that only parses is checked through ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "sympy", "scipy", "pandas", "matplotlib")

_PROBE = """
import json, sys
from sapa.cli import main
try:
    code = main({argv!r})
except SystemExit as exc:  # --help and --version exit through argparse
    code = exc.code
print(json.dumps({{"code": code, "loaded": sorted({{m.split('.')[0] for m in sys.modules}})}}))
"""


@pytest.mark.parametrize("argv", [
    ["--help"], ["--version"], ["verify", "--help"], ["train", "--help"], ["audit", "--help"],
    ["verify", "--bogus"], ["verify", "--only"], ["exact", "--p", "0", "--model", "iid", "--N", "4"], ["nonsense"],
    ["norms", "--x", "/nonexistent/x.npy", "--w", "/nonexistent/w.npy", "--activation", "x"],
    ["norms", "--x", "/", "--activation", "softmax"],
    ["audit", "x", "--model", "shared", "--w", "/nonexistent/w.npy"],
    ["exact", "--p", "1", "--model", "shared", "--N", "4", "--sigma-x", "/nonexistent/s.npy"],
])
def test_parsing_imports_no_heavy_library(argv):
    """Parsing (help, version, an argument error) leaves torch, sympy, scipy, pandas and matplotlib unloaded."""
    r = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], capture_output=True, text=True, check=True)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["code"] in (0, 2)
    assert not set(HEAVY) & set(got["loaded"]), f"sapa {' '.join(argv)} imported {set(HEAVY) & set(got['loaded'])}"
    if got["code"] == 2:
        assert r.stderr.startswith("sapa: error: ") and len(r.stderr.strip().splitlines()) == 1


def test_the_probe_sees_a_heavy_import():
    """Negative control: a command that does its work (here the exact moments, via sympy/theory) is seen loading."""
    r = subprocess.run([sys.executable, "-c", _PROBE.format(argv=["exact", "--p", "1", "--model", "paper", "--N", "4",
                                                                  "--d", "2", "--json"])],
                       capture_output=True, text=True, check=True)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["code"] == 0 and set(HEAVY) & set(got["loaded"])


@pytest.mark.parametrize("argv, line", [
    (["norms", "--x", "/nonexistent/x.npy", "--activation", "x"], "sapa: error: --x: file not found: /nonexistent/x.npy"),
    (["norms", "--x", "/", "--activation", "x"], "sapa: error: --x: / is not a regular file (a directory); sapa reads "
                                                 "only regular files"),
    (["exact", "--p", "1", "--model", "shared", "--N", "4", "--sigma-x", "/nonexistent/s.npy"],
     "sapa: error: --sigma-x: file not found: /nonexistent/s.npy"),
])
def test_a_missing_input_file_is_named_with_its_option(argv, line):
    r = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], capture_output=True, text=True, check=True)
    assert r.stderr.strip() == line
