"""Two creates of one name: exactly one wins, and the loser never touches the winner's workload
(issue 34: the loser's failed ``mkdir`` used to ``rmtree`` the winner's state directory while
its supervisor ran). Real CLI processes, a real supervisor; the interleaving is held, not hoped
for."""

from __future__ import annotations

import pathlib
import threading
from pathlib import Path

from local_helpers import STANDIN, wait_until
from process_tags import local_env

from elastix.main import main

COMMAND = f"python {STANDIN} --step-delay 0.05"


def _create_args(name: str) -> list[str]:
    return ["workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "1",
            "--command", COMMAND]


def test_the_loser_of_a_create_race_leaves_the_winner_alone(cli, backend, state_dir, tag,
                                                             tmp_path, monkeypatch, capsys):
    for k, v in local_env(tag, state_dir, tmp_path).items():
        monkeypatch.setenv(k, v)
    target = state_dir / "twin"
    at_check, go = threading.Event(), threading.Event()
    real_exists = pathlib.Path.exists

    def exists(self, *a, **k):
        # The in-process create (the loser) has just found no "twin": hold it there until
        # the other create has made "twin" and started it.
        found = real_exists(self, *a, **k)
        if Path(self) == target and not found and threading.current_thread() is not main_th:
            at_check.set()
            assert go.wait(120)
        return found

    main_th = threading.main_thread()
    monkeypatch.setattr(pathlib.Path, "exists", exists)
    codes: list[int] = []
    loser = threading.Thread(target=lambda: codes.append(main(_create_args("twin"))))
    loser.start()
    try:
        assert at_check.wait(120)
        cli(*_create_args("twin"))  # the winner: a real CLI process, told "created"
        supervisor = backend.status("twin")
        assert supervisor.state in ("Pending", "Running")
    finally:
        go.set()
        loser.join(120)
    out, err = capsys.readouterr()
    assert codes and codes[0] != 0
    assert "another create of that name won" in err and "Traceback" not in err
    # The winner's workload is whole: its plan, its supervisor, and it runs on.
    assert (target / "plan.json").is_file()
    wait_until(lambda: backend.status("twin").state == "Running", 60, "the winner runs")
    assert not list(state_dir.glob(".creating-*")), "the loser left its aside directory"
    cli("workload", "delete", "twin", "--wait")


def test_concurrent_creates_of_one_name_make_one_workload(cli, backend, state_dir, tmp_path):
    outs = [tmp_path / f"create-{i}.txt" for i in range(4)]
    procs = [cli.popen(*_create_args("many"), out=o) for o in outs]
    codes = [p.wait(120) for p in procs]
    texts = [o.read_text() for o in outs]
    assert codes.count(0) == 1, texts
    for code, text in zip(codes, texts, strict=True):
        if code:
            assert "already exists" in text and "Traceback" not in text, text
    wait_until(lambda: backend.status("many").state == "Running", 60, "the winner runs")
    assert not list(state_dir.glob(".creating-*"))
    cli("workload", "delete", "many", "--wait")


def test_a_name_with_a_trailing_newline_is_refused_at_once(cli):
    p = cli("workload", "create", "bad\n", "--tpu-type", "v5litepod-8", "--command", "true",
            check=False)
    assert p.returncode == 2 and "'bad\\n' is not a DNS label" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
