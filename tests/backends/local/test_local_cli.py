"""The user's journey on the local backend, every step through the CLI as a subprocess.

Uses the stand-in controller (no JAX) so it runs in seconds; ``test_local_e2e.py`` runs the same
journey with the real trainer.
"""

from __future__ import annotations

import json
import sys

from local_helpers import STANDIN, wait_until
from local_helpers import workload_status as _status


def test_create_status_logs_kill_delete_through_the_cli(cli, tmp_path):
    cli("workload", "create", "walk", "--tpu-type", "v5litepod-16", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "2", "--command",
        f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05")
    follow_out = tmp_path / "follow.txt"
    follower = cli.popen("logs", "walk", "-f", out=follow_out)
    try:
        wait_until(lambda: "completed step: 2," in follow_out.read_text(), 60, "steps in logs -f")
        before = _status(cli, "walk")
        assert before["state"] == "Running" and before["backend"] == "local"
        assert [len(s["pods"]) for s in before["slices"]] == [4, 4]
        listed = json.loads(cli("workload", "list", "-o", "json").stdout)
        assert [w["name"] for w in listed] == ["walk"]

        kill = json.loads(cli("chaos", "kill-worker", "walk", "--slice", "1", "--seed", "7",
                              "-o", "json").stdout)
        assert kill["slice"] == 1 and kill["dry_run"] is False
        text = wait_until(lambda: (t := follow_out.read_text()).count("sufficient slices") == 2
                          and t, 30, "slice down then slices ready")
        down = text.index("elastix: slice down, retrying")
        assert "slices lost [1]" in text[down:] and text.index("sufficient", down) > down
        n = int(text[:down].rsplit("completed step: ", 1)[1].split(",")[0])
        wait_until(lambda: f"completed step: {n + 1}," in follow_out.read_text(), 30,
                   "a step after the recovery")
        after = _status(cli, "walk")
        assert after["head"]["pid"] == before["head"]["pid"]  # same controller process
        assert after["jobset_restarts"] == 0
        assert [s["job_failures"] for s in after["slices"]] == [0, 4]  # the slice's 4 pods
        assert [s["slice_restarts"] for s in after["slices"]] == [0, 1]
        assert [s["max_slice_restarts"] for s in after["slices"]] == [2, 2]
        pods = [p["pid"] for p in after["slices"][1]["pods"]]
        assert kill["pid"] not in pods and len(pods) == 4

        dry = json.loads(cli("chaos", "kill-worker", "walk", "--dry-run", "-o", "json").stdout)
        assert dry["dry_run"] is True
        worker_log = cli("logs", "walk", "--slice", "1", "--host", str(kill["host"])).stdout
        assert f"(pid {kill['pid']}) heartbeating" in worker_log

        bad = cli("logs", "walk", "-c", "pathways-rm", check=False)
        assert bad.returncode == 1 and "does not run on the local backend" in bad.stderr
        missing = cli("workload", "status", "nope", check=False)
        assert missing.returncode == 1 and "not found" in missing.stderr
        assert "Traceback" not in missing.stderr + bad.stderr

        cli("workload", "delete", "walk")
        assert follower.wait(timeout=30) == 0  # the stream ends when the workload is gone
        assert json.loads(cli("workload", "list", "-o", "json").stdout) == []
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_a_relative_state_dir_is_made_absolute_at_once(cli, tmp_path):
    """A relative ELASTIX_STATE_DIR used to say "created", then fail every run at start on its
    heartbeat socket path. It is taken from the working directory once, at the command."""
    import subprocess

    env = {**cli.env, "ELASTIX_STATE_DIR": "rel-state"}

    def run(*args: str, cwd=tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "elastix", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)

    made = run("workload", "create", "rel", "--tpu-type", "v5litepod-4", "--num-slices", "1",
               "--command", f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05")
    assert made.returncode == 0, made.stderr
    try:
        assert (tmp_path / "rel-state" / "rel" / "plan.json").is_file()

        def stepping() -> bool:
            logs = run("logs", "rel")
            return "completed step: 3," in logs.stdout

        wait_until(stepping, 60, "the run on a relative state dir to step")
        st = json.loads(run("workload", "status", "rel", "-o", "json").stdout)
        assert st["state"] == "Running", st
    finally:
        run("workload", "delete", "rel", "--wait")
