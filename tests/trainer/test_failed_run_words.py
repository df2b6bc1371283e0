"""A failed run ends on its own error line: bad output directories are one line and exit 2, and
a step failed inside XLA does not come back as JAX atexit tracebacks after the error.

Real trainer subprocesses; the slice loss is a real SIGKILL of a real slice-host process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from polling import wait_until
from trainer_helpers import REPO, cli_env, run_cli

from elastix.protocol.heartbeat import new_key


def test_a_checkpoint_dir_that_cannot_exist_is_one_line():
    proc = run_cli(["--preset", "tiny", "--steps", "1", "--checkpoint-dir", "/proc/x"],
                   timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-2:] == [
        "error: --checkpoint-dir /proc/x: cannot create it (No such file or directory)",
        "hint: give a writable local directory (created if missing) or a gs:// URL"]
    assert "Traceback" not in proc.stderr and "FileNotFoundError" not in proc.stderr


KEY = new_key()


def _host(addr: str, s: int) -> subprocess.Popen:
    env = dict(os.environ, ELASTIX_LOCAL_HEALTH=addr, ELASTIX_SLICE=str(s), ELASTIX_HOST="0",
               ELASTIX_HEARTBEAT_INTERVAL="0.05", ELASTIX_HEARTBEAT_KEY=KEY)
    return subprocess.Popen([sys.executable, "-m", "elastix.backends.local.host"], env=env,
                            stdout=subprocess.DEVNULL)


def test_a_run_failed_by_a_slice_loss_ends_on_its_error_line(tmp_path):
    addr = f"unix:{tmp_path}/h.sock"
    log = tmp_path / "head.log"
    hosts = [_host(addr, s) for s in range(2)]
    env = cli_env(ELASTIX_LOCAL_HEALTH=addr, ELASTIX_HEARTBEAT_KEY=KEY, ELASTIX_NUM_SLICES="2",
                  XLA_FLAGS="--xla_force_host_platform_device_count=4")
    try:
        with open(log, "w") as out:
            head = subprocess.Popen(
                [sys.executable, "-m", "elastix_trainer", "--preset", "tiny", "--steps",
                 "100000", "--batch-per-device", "1", "--seq-len", "16", "--num-slices", "2",
                 "--max-slice-losses", "0", "--step-delay", "0.05"],
                stdout=out, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        try:
            wait_until(lambda: "completed step: 20," in log.read_text(), 240, "20 steps")
            hosts[1].send_signal(signal.SIGKILL)
            assert head.wait(timeout=120) == 1
        finally:
            if head.poll() is None:
                head.kill()
                head.wait()
    finally:
        for h in hosts:
            h.kill()
            h.wait()
    text = log.read_text()
    # The loss failed the step being completed (the stand-in's gate: the host never answered)
    # while the next one, dispatched onto a mesh with a slice down, failed inside XLA (the
    # fault seam): the case whose error JAX's atexit handlers used to raise again.
    assert "DATA_LOSS" in text and "elastix local stand-in" in text, text[-2000:]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[-2].startswith("error: slice-loss budget exhausted"), lines[-6:]
    assert lines[-1].startswith("hint: "), lines[-6:]
    assert "Exception ignored" not in text
