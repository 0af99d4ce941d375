"""Tests for `common/readfile.py`: regular files only (FIFOs and devices refused without blocking), bounded reads."""

from __future__ import annotations

import os

import pytest

from common.readfile import read_regular, read_regular_text, require_regular
from common.validate import InputError


def test_regular_files_are_read_and_bounded(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("héllo")
    assert read_regular_text(f) == "héllo" and require_regular(f) == f
    with pytest.raises(InputError, match="more than the limit of 3"):
        read_regular(f, "x", limit=3)
    f.write_bytes(b"\xff")
    with pytest.raises(InputError, match="not UTF-8"):
        read_regular_text(f)


def test_fifos_devices_and_missing_files_are_one_line(tmp_path):
    os.mkfifo(tmp_path / "p")
    for path, needle in ((tmp_path / "p", "a named pipe"), ("/dev/zero", "a character device"),
                         (tmp_path, "a directory"), (tmp_path / "none", "file not found")):
        for f in (read_regular, require_regular):
            with pytest.raises(InputError, match=needle):
                f(path, "what")
