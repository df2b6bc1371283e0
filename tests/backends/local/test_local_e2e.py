"""End to end on the local backend with the real trainer, every user step through the CLI.

One workload (2 slices of 2 CPU devices, tiny model) lives through: a committed checkpoint, a
killed worker (recovery in the same PID, JobSet restarts 0), a kill during a checkpoint write, every
slice killed at once, the slice-restart budget exceeded (a clear failure, nothing left running),
and delete. Waits are on trainer events and log lines, with timeouts.
"""

from __future__ import annotations

import json

from local_helpers import tiny_trainer, wait_until
from local_helpers import workload_events as _events
from local_helpers import workload_status as _status
from process_tags import tagged_pids

from elastix.measure.events import events_from_records, recoveries

TRAIN = tiny_trainer("--elastic-mode pause-resume --max-slice-losses 50 --slice-wait-timeout 120")


def _recs(backend, name: str):
    return recoveries(events_from_records(_events(backend, name)))


def _completed(backend, name: str, n: int):
    """The first ``n`` recoveries, once the ``n``-th has stepped again."""
    recs = _recs(backend, name)
    return recs[:n] if len(recs) >= n and recs[n - 1].complete else None


def _kill(cli, name: str, slice_id: int) -> dict:
    return json.loads(cli("chaos", "kill-worker", name, "--slice", str(slice_id),
                          "-o", "json").stdout)


def test_elastic_journey_with_the_real_trainer(cli, backend, tag, tmp_path):
    name = "e2e"
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "2", "--max-restarts", "0",
        "--command", TRAIN)
    follow_out = tmp_path / "follow.txt"
    follower = cli.popen("logs", name, "-f", out=follow_out)
    try:
        # 1. A committed checkpoint, then a killed worker: in-process recovery, same PID.
        wait_until(lambda: any(e["event"] == "checkpoint_committed"
                               for e in _events(backend, name)), 240, "a committed checkpoint")
        pid = next(e["pid"] for e in _events(backend, name) if e["event"] == "run_start")
        head_pid = _status(cli, name)["head"]["pid"]
        _kill(cli, name, 0)
        (r1,) = wait_until(lambda: _completed(backend, name, 1), 120, "recovery 1")
        assert r1.kind == "in-process" and r1.pid_before == r1.pid_after == pid
        assert r1.lost_slices == [0]
        st = _status(cli, name)
        assert st["jobset_restarts"] == 0 and st["head"]["pid"] == head_pid
        # list and status show training, and count the kill as status does: one slice restart.
        steps = [e["step"] for e in _events(backend, name) if e["event"] == "step"]
        (row,) = json.loads(cli("workload", "list", "-o", "json").stdout)  # read after: later
        assert row["training"]["last_step"] >= steps[-1] and row["training"]["recoveries"] >= 1
        assert isinstance(row["training"]["loss"], float)
        table = cli("workload", "list").stdout
        header, line = table.splitlines()[:2]
        assert "SLICE RESTARTS" in header and "LAST STEP" in header and "ago" in line
        # The last two columns: SLICE RESTARTS, AGE.
        assert sum(s["job_failures"] // s["hosts"] for s in st["slices"]) == 1 == int(
            line.split()[-2]), table
        assert "training: step " in cli("workload", "status", name).stdout
        text = follow_out.read_text()
        down = text.index("elastix: slice down, retrying")
        assert text.index("elastix: sufficient slices active", down) > down
        assert "completed step: " in text[text.index("elastix: sufficient slices", down):]

        # 2. A kill while a checkpoint is being written: restore only a committed step.
        seen = len(_events(backend, name))
        wait_until(lambda: any(e["event"] == "checkpoint_save_started"
                               for e in _events(backend, name)[seen:]), 120, "a save starting")
        backend.kill_worker(name, slice=1)  # in-process: no CLI start-up between save and kill
        r2 = wait_until(lambda: _completed(backend, name, 2), 120, "recovery 2")[1]
        committed = {e["step"] for e in _events(backend, name) if e["event"] ==
                     "checkpoint_committed"}
        assert r2.restored_step in committed and r2.pid_after == pid

        # 3. Every slice at once: the controller waits for all of them and goes on.
        n = len(_recs(backend, name))
        for s in (0, 1):
            backend.kill_worker(name, slice=s)
        wait_until(lambda: (rs := _recs(backend, name)) and len(rs) > n and rs[-1].complete
                   and all(sl["pods"][0]["phase"] == "Running"
                           for sl in _status(cli, name)["slices"]), 180, "recovery from all")
        assert all(r.pid_after == pid for r in _recs(backend, name))
        st = _status(cli, name)
        assert st["jobset_restarts"] == 0 and st["head"]["pid"] == head_pid
        assert [s["job_failures"] for s in st["slices"]] == [2, 2]

        # 4. One failure more than backoffLimit (2) on slice 0, and no JobSet restarts left.
        _kill(cli, name, 0)
        st = wait_until(lambda: (s := _status(cli, name))["state"] == "Failed" and s, 60,
                        "the workload to fail")
        assert "slice 0 failed 3 times, more than --max-slice-restarts 2 allows" in st["message"]
        assert "no workload restart left (--max-restarts 0, 0 used)" in st["message"]
        assert follower.wait(timeout=30) == 0  # logs -f ends with the workload
        wait_until(lambda: not tagged_pids(tag), 30, "every process of the workload to exit")

        # 5. Delete.
        cli("workload", "delete", name)
        assert json.loads(cli("workload", "list", "-o", "json").stdout) == []
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
