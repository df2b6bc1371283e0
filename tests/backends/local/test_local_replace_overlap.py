"""``workload create --replace`` starts the new run's imports while the old run stops (issue 39):
the new supervisor and its head (``elastix_trainer.warm``) start before the old run's final
save and touch nothing until the state directory is theirs. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import sys

import psutil
import pytest
from local_helpers import wait_until
from local_helpers import workload_events as _events
from process_tags import tagged_pids

from elastix.backends.local.state import read_procs
from elastix.backends.local.trainerhead import trainer_argv
from elastix.protocol.timefmt import parse

# Resumable across a replace: its checkpoints are in the kept data, not the run's directory.
# No periodic checkpoint (host snapshots make it stepping): the one checkpoint past step 0 is
# the final save its SIGTERM makes, so a new head that read the directory before that save
# would find nothing to restore.
COMMAND = ("elastix-train --preset tiny --steps 100000 --batch-per-device 2 --seq-len 32 "
           "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/ckpt\" --checkpoint-period 1000000 "
           "--snapshot-period 3 --step-delay 0.05 "
           "--compilation-cache-dir \"$ELASTIX_TEST_JAX_CACHE\"")
CREATE = ("workload", "create", "--tpu-type", "v5litepod-4", "--num-slices", "2",
          "--command", COMMAND)


def _create(cli, name: str, *extra: str, **kw):
    return cli(*CREATE[:2], name, *CREATE[2:], *extra, **kw)


def _early(tag: str) -> list[str]:
    """The command lines of this test's pre-started processes still alive."""
    out = []
    for pid in tagged_pids(tag):
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        if "--prestart" in cmd or "elastix_trainer.warm" in cmd:
            out.append(cmd)
    return out


def test_the_new_head_starts_while_the_old_run_stops_and_resumes_from_its_last_save(
        cli, backend, state_dir):
    name = "over"
    _create(cli, name)
    cli("workload", "wait", name, "--for", "stepping", "--timeout", "240s")
    try:
        last = max(e["step"] for e in _events(backend, name) if e["event"] == "step")
        _create(cli, name, "--replace")
        sup = (state_dir / name / "supervisor.log").read_text()
        assert "its imports began while the run it replaces stopped" in sup, sup
        # the head's process is older than the new run: its supervisor said "starting" only
        # once the old run had stopped and the directory was its own
        starting = next(line for line in sup.splitlines() if " starting " in line)
        (head,) = [r for r in read_procs(state_dir / name) if r["role"] == "head"]
        assert head["create_time"] < parse(starting.split(" ", 1)[0]).timestamp(), (head, sup)
        wait_until(lambda: any(e["event"] == "step" for e in _events(backend, name)), 240,
                   "the new run's first step")
        # it read the checkpoints only once the old run had made its final save, the only
        # one (at or after the step seen before the replace): read earlier, there was none
        (restore,) = [e for e in _events(backend, name) if e["event"] == "restore"]
        assert restore["source"] == "checkpoint" and restore["step"] >= last, (restore, last)
        log = (state_dir / name / "logs" / "head-0.log").read_text()
        assert "run start" in log and "Traceback" not in log, log
    finally:
        cli("workload", "delete", name, "--wait", check=False)


def test_ctrl_c_while_the_old_run_stops_leaves_no_new_process(cli, backend, state_dir, tmp_path,
                                                              tag):
    """README: a Ctrl-C while the previous run stops is not held; that run goes on stopping, no
    new run starts. The new run's pre-started processes end with the create."""
    name = "cut"
    _create(cli, name)
    cli("workload", "wait", name, "--for", "stepping", "--timeout", "240s")
    (old,) = [r for r in read_procs(state_dir / name) if r["role"] == "head"]
    marker = json.loads((state_dir / name / "plan.json").read_text())["marker"]
    os.kill(old["pid"], signal.SIGSTOP)  # its stop then waits on it: the window is the test's
    out = tmp_path / "replace.txt"
    proc = cli.popen(*CREATE[:2], name, *CREATE[2:], "--replace", out=out)
    try:
        wait_until(lambda: proc.poll() is not None or any(
            "elastix_trainer.warm" in c for c in _early(tag)), 120, "the new head pre-started")
        assert proc.poll() is None, out.read_text()
        wait_until(lambda: "stopping the previous run" in out.read_text(), 60, "the stop")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.kill(old["pid"], signal.SIGCONT)
    text = out.read_text()
    assert code == 130 and "interrupted" in text and "Traceback" not in text, text
    assert not _early(tag), text  # gone by the time the create exited
    assert not list(state_dir.glob(".creating-*")), text
    # the old run goes on stopping (its head, let go, makes its final save and exits) and is
    # still the workload's; the same create again finishes the job
    wait_until(lambda: not psutil.pid_exists(old["pid"]) or psutil.Process(old["pid"]).status()
               == psutil.STATUS_ZOMBIE, 120, "the old head's exit")
    assert json.loads((state_dir / name / "plan.json").read_text())["marker"] == marker
    _create(cli, name, "--replace")
    try:
        cli("workload", "wait", name, "--for", "stepping", "--timeout", "240s")
    finally:
        cli("workload", "delete", name, "--wait", check=False)


@pytest.mark.parametrize("victim", ["head", "supervisor"])
def test_a_pre_started_process_that_dies_before_its_run_is_started_afresh(
        victim, cli, state_dir, tmp_path, tag):
    """A pre-started head or supervisor killed while the old run stops: the new run starts as
    it did before there was any, after the stop, and nothing of the dead one is left."""
    name = "afresh"
    _create(cli, name)
    cli("workload", "wait", name, "--for", "stepping", "--timeout", "240s")
    (old,) = [r for r in read_procs(state_dir / name) if r["role"] == "head"]
    os.kill(old["pid"], signal.SIGSTOP)  # the stop waits on it while the victim is killed
    proc = cli.popen(*CREATE[:2], name, *CREATE[2:], "--replace", out=tmp_path / "out.txt")
    try:
        key = "elastix_trainer.warm" if victim == "head" else "--prestart"
        pid = wait_until(lambda: next((p for p in tagged_pids(tag) if key in " ".join(
            _cmdline(p))), None), 120, f"the pre-started {victim}")
        os.kill(pid, signal.SIGKILL)
        # the head alone, or the supervisor and the head with it (its parent-death signal)
        wait_until(lambda: not any(key in c or "elastix_trainer.warm" in c
                                   for c in _early(tag)), 30, f"the {victim} gone")
    finally:
        os.kill(old["pid"], signal.SIGCONT)  # well inside its 30 s grace: it is still there
    try:
        assert proc.wait(120) == 0, (tmp_path / "out.txt").read_text()
        sup = (state_dir / name / "supervisor.log").read_text()
        assert "started head" in sup and "its imports began" not in sup, sup
        cli("workload", "wait", name, "--for", "stepping", "--timeout", "240s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cli("workload", "delete", name, "--wait", check=False)


def _cmdline(pid: int) -> list[str]:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def test_only_elastix_train_itself_is_pre_started():
    """What is pre-started must run exactly as its command would: ``elastix-train`` beside this
    interpreter, directly or as the one command of a ``bash -c`` script whose words are known
    without a shell."""
    bindir = os.path.dirname(sys.executable)
    me = os.path.join(bindir, "elastix-train")
    env = {"PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "D": "/data/w",
           "SPACED": "/a b", "GLOB": "/x*", "EMPTY": ""}
    bash = ["bash", "-c"]
    assert trainer_argv(["elastix-train", "--steps", "3"], env) == [me, "--steps", "3"]
    assert trainer_argv([*bash, 'elastix-train --c "$D/ckpt" --e ${D}'], env) == [
        me, "--c", "/data/w/ckpt", "--e", "/data/w"]
    for script in ("elastix-train a; rm -rf b", "elastix-train $(date)", "elastix-train `x`",
                   "elastix-train a && b", "elastix-train > log", "elastix-train a\\ b",
                   "elastix-train $UNSET", "elastix-train $SPACED", "elastix-train $GLOB",
                   "elastix-train 'single quoted'", "elastix-train *.txt", "X=1 elastix-train",
                   "elastix-train \"unclosed", "python -m elastix_trainer", "exec elastix-train",
                   "elastix-train $", "elastix-train --steps 5 $EMPTY", "elastix-train a\r",
                   "elastix-train $\u00e9t\u00e9"):
        assert trainer_argv([*bash, script], env) is None, script
    # bash would run other code first, or sh is another shell
    assert trainer_argv([*bash, "elastix-train"], {**env, "BASH_ENV": "/etc/x"}) is None
    assert trainer_argv([*bash, "elastix-train"], {**env, "BASH_FUNC_f%%": "() { :; }"}) is None
    assert trainer_argv(["sh", "-c", "elastix-train"], env) is None
    assert trainer_argv([*bash, "elastix-train"], env) == [me]
    assert trainer_argv(["/usr/bin/elastix-train"], env) is None  # not this environment's
    assert trainer_argv(["python", "train.py"], env) is None
    assert trainer_argv([], env) is None
