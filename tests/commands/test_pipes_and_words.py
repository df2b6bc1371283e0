"""A command's output read by another program (issue 60): ``| head`` closing the pipe early is a
quiet success, and the chaos run's first line says no interval for a single round."""

from __future__ import annotations

import io

from elastix.commands.chaos import _origin
from elastix.main import main
from elastix.measure.plan import Flags


class _ClosedPipe(io.StringIO):
    """stdout whose reader has gone (``| head`` after its lines): every write fails."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_dry_run_into_a_closed_pipe_is_a_quiet_success(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    capsys.readouterr()
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    rc = main(["workload", "create", "demo", "--tpu-type", "v5litepod-8", "--num-slices", "2",
               "--dry-run"])
    assert rc == 0
    assert capsys.readouterr().err == ""


def test_a_failure_with_a_working_stdout_keeps_its_code(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["workload", "create", "demo", "--tpu-type", "v9-1", "--dry-run"]) == 2
    assert "unknown TPU type" in capsys.readouterr().err


def test_one_round_has_no_interval_in_the_first_line():
    assert _origin(Flags(kills=1, interval="60s"), None, 1) == ""
    assert _origin(Flags(kills=3, interval="60s"), None, 3) == "60s apart"
