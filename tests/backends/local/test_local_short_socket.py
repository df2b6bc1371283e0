"""A long state directory's heartbeat socket goes to ``/tmp/elastix-<uid>/``: when that is
another user's (or not a directory), ``workload create`` says so in one line, exit 2, before it
makes anything. (The supervisor used to fail at start and ``status`` showed a traceback line
as its hint.)"""

from __future__ import annotations

import os

import pytest

from elastix.backends.local import channel
from elastix.main import main


@pytest.fixture
def short_root(tmp_path, monkeypatch):
    root = tmp_path / "short-root"
    monkeypatch.setattr(channel, "_short_root", lambda: str(root))
    return root


def _create(tmp_path, monkeypatch, capsys) -> tuple[int, str, os.PathLike]:
    state = tmp_path / ("s" * 90) / ("t" * 30)  # too long for a socket path inside it
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("ELASTIX_STATE_DIR", str(state))
    monkeypatch.setenv("COLUMNS", "200")
    rc = main(["workload", "create", "long", "--tpu-type", "v5litepod-4", "--num-slices", "1",
               "--command", "true", "--backend", "local"])
    return rc, capsys.readouterr().err, state


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's directory needs root")
def test_another_users_short_root_is_one_line_and_nothing_made(short_root, tmp_path,
                                                                monkeypatch, capsys):
    short_root.mkdir(mode=0o700)
    os.chown(short_root, 12345, 12345)
    rc, err, state = _create(tmp_path, monkeypatch, capsys)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: remove it"), err
    assert lines[0] == (f"error: {short_root}, where a long state directory's heartbeat socket "
                        "goes, belongs to another user (uid 12345): the socket cannot be kept "
                        "private there")
    assert not (state / "long").exists()


def test_a_file_in_its_place_is_refused_the_same_way(short_root, tmp_path, monkeypatch, capsys):
    short_root.write_text("")
    rc, err, state = _create(tmp_path, monkeypatch, capsys)
    assert rc == 2 and "is not a directory: the socket cannot be kept private" in err, err
    assert "Traceback" not in err and not (state / "long").exists()


def test_a_short_state_dir_keeps_its_socket_inside_and_is_not_asked(short_root, tmp_path):
    short_root.write_text("")  # not used: the socket fits in the workload directory
    assert channel.problem(channel.address(tmp_path / "w")) is None
