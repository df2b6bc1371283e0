"""`chaos kill-worker --measure` on the real trainer (local backend, tiny model, CPU devices)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from elastix.backends.local.backend import LocalBackend
from elastix.measure.events import events_of

TRAIN = ("elastix-train --preset tiny --steps 100000 --batch-per-device 2 --seq-len 32 "
         "--checkpoint-dir $ELASTIX_WORKLOAD_DIR/ckpt --checkpoint-period 4 "
         "--max-slice-losses 10 --slice-wait-timeout 120 --step-delay 0.05")


def _cli(env, *args, check=True):
    p = subprocess.run([sys.executable, "-m", "elastix", *args], env=env, capture_output=True,
                       text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"elastix {args} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def test_measure_a_real_recovery(live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    _cli(live_env, "workload", "create", "real", "--tpu-type", "v5litepod-8", "--num-slices", "2",
         "--elastic-slices", "2", "--max-slice-restarts", "3", "--command", TRAIN)
    try:
        deadline = time.monotonic() + 240
        while not any(e.name == "checkpoint_committed" for e in events_of(backend.trainer_events("real"))[0]):
            assert time.monotonic() < deadline, "no committed checkpoint after 240 s"
            time.sleep(0.5)
        png = tmp_path / "recovery.png"
        p = _cli(live_env, "chaos", "kill-worker", "real", "--slice", "0", "--measure",
                 "--timeout", "3m", "-o", "json", "--plot", str(png))
        (d,) = json.loads(p.stdout)["kills"]
        r = d["recovery"]
        assert d["source"] == "events" and r["complete"] and r["kind"] == "in-process"
        ph = r["phases"]
        assert list(ph) == ["detection", "cleanup", "waiting_for_slices", "restore", "first_step"]
        assert all(v is not None and v >= 0 for v in ph.values())
        assert r["kill"] < r["start"] < r["first_step_at"]  # ordered in time (ISO strings)
        assert r["steps_lost"] == r["last_step"] - r["restored_step"] >= 0
        assert r["first_step"] == r["restored_step"] + 1 and r["restored_step"] % 4 == 0
        assert round(sum(ph.values()), 3) == r["downtime_seconds"]
        assert d["jobset_restarts"] == 0 and d["head_restarts"] == 0
        assert d["pid_same"] is True and d["in_process"] is True
        assert png.read_bytes()[:4] == b"\x89PNG"
    finally:
        _cli(live_env, "workload", "delete", "real", "--wait", check=False)
