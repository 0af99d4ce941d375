"""Tests for `common/privatedir.py`: matplotlib's cache folder at a predictable name never follows a planted link."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from sapa.common.privatedir import private_dir


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_a_missing_folder_is_made_for_this_user_alone(tmp_path):
    d = private_dir(tmp_path / "sapa-matplotlib-1000")
    assert d == tmp_path / "sapa-matplotlib-1000" and _mode(d) == 0o700 and os.lstat(d).st_uid == os.getuid()
    assert private_dir(d) == d  # and taken again on the next run (the font list is cached)


def test_a_planted_link_is_never_used(tmp_path):
    """Issue 52, case 6: a link at the predictable name had matplotlib write its font list into the victim folder."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(victim)
    d = private_dir(tmp_path / "cache")
    assert d != tmp_path / "cache" and not d.is_symlink() and _mode(d) == 0o700
    assert os.path.realpath(d) != str(victim) and (tmp_path / "cache").is_symlink()


def test_a_folder_of_ours_only_others_could_read_is_taken_and_closed(tmp_path):
    """matplotlib makes a missing MPLCONFIGDIR with the umask's 0755; refused, every later process made a fresh folder,
    built the font list again and left the folder behind (921 of them in one day's /tmp)."""
    p = tmp_path / "cache"
    p.mkdir()
    os.chmod(p, 0o755)
    assert private_dir(p) == p and _mode(p) == 0o700


@pytest.mark.parametrize("make", ["file", "open folder", "group-writable folder"])
def test_a_file_or_a_folder_others_can_write_is_not_used(tmp_path, make):
    p = tmp_path / "cache"
    if make == "file":
        p.write_text("x")
    else:
        p.mkdir()
        os.chmod(p, 0o777 if make == "open folder" else 0o775)
    d = private_dir(p)
    assert d != p and _mode(d) == 0o700


def test_sapa_main_takes_its_matplotlib_folder_from_private_dir(tmp_path, monkeypatch, capsys):
    """With TMPDIR holding a link at sapa-matplotlib-UID, the command sets MPLCONFIGDIR to a private folder."""
    import tempfile

    from sapa.cli import main

    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / f"sapa-matplotlib-{os.getuid()}").symlink_to(victim)
    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    main(["audit", "x", "--json"])
    capsys.readouterr()
    got = os.environ["MPLCONFIGDIR"]
    assert os.path.realpath(got) != str(victim) and _mode(got) == 0o700 and list(victim.iterdir()) == []


@pytest.mark.slow  # a fresh interpreter draws with matplotlib (~3 s)
def test_a_planted_link_receives_no_font_list_and_the_fresh_folder_goes_at_exit(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / f"sapa-matplotlib-{os.getuid()}").symlink_to(victim)
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    env.update(TMPDIR=str(tmp_path), PYTHONPATH=os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")]))
    script = ("from sapa.cli import main\nmain(['audit', 'x', '--json'])\nimport matplotlib.font_manager, os\n"
              "print(os.environ['MPLCONFIGDIR'], len(os.listdir(os.environ['MPLCONFIGDIR'])))")
    done = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True)
    used, files = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert list(victim.iterdir()) == [] and int(files) > 0  # the font list went to the private folder
    assert not os.path.exists(used)  # which the process removed as it ended (it made 921 in a day's /tmp before)
