"""MaxText on the local backend, one slice-host kill: in-process elastic recovery vs a restart.

Three workloads, one after the other in the same run on the same machine, each on one local
slice (a ``v5litepod-8``: 2 hosts, 2 CPU devices), each killed once the same way (SIGKILL of
slice host 0, ``LocalBackend.kill_worker``) half-way between two checkpoints:

- **MaxText, elastic** (``elastic_enabled=true enable_single_controller=true``, on the local
  Pathways stand-in): pathwaysutils' ``elastic_retry`` recovers in the same process;
- **MaxText, full restart** (elastic off): the stand-in's ``DATA_LOSS`` ends MaxText, the
  workload restarts the head (``--max-restarts 1``), which starts again and restores;
- **elastix's own trainer** (``elastix-train --preset tiny``, checkpoints only, pause-resume).

MaxText's phases are read from its own log (each line stamped by the supervisor as it read it,
as the kubelet does) by the line patterns below, the same for both MaxText runs; the
elastix trainer's come from its events through ``elastix.measure.chaos.measure_kill`` (what
``chaos kill-worker --measure`` prints). For the elastic MaxText run ``measure_kill``'s view
of the log is printed too.

    ELASTIX_MAXTEXT_PYTHON=.venv-maxtext/bin/python .venv/bin/python bench/bench_maxtext.py

Prints a Markdown table for docs/benchmarks.md and the load average. Nothing asserts a time.
Its waits end at once when a workload fails, and are bounded in seconds of a quiet machine
(``benchwait``). ``--smoke`` runs the smallest case: the elastic MaxText run and the elastix
trainer's (the full restart is one more MaxText start, a minute, and reads its log with the
same patterns); it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Run as a script, so this folder is on the path: the same CLI runner as the elastix trainer's
# recovery bench, and the benches' wait.
from bench_local_recovery import elastix as cli
from benchcli import smoke_args
from benchwait import stretch, wait_for, workload_ended

from elastix.backends.local.backend import LocalBackend
from elastix.measure.chaos import measure_kill
from elastix.protocol import timefmt

MAXTEXT = (
    "python -u -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r1 "
    "base_output_directory=\"$ELASTIX_LOCAL_DATA_DIR/out\" hardware=cpu dataset_type=synthetic "
    "steps=1000000 per_device_batch_size=1 enable_checkpointing=true async_checkpointing=false "
    "checkpoint_period={period} base_emb_dim=64 base_num_query_heads=2 base_num_kv_heads=2 "
    "base_mlp_dim=128 base_num_decoder_layers=2 head_dim=32 vocab_size=256 "
    "max_target_length=64 skip_jax_distributed_system=true "
    # MaxText's compilation cache defaults to ~/jax_cache: one shared by every run, kept between
    # them, and outside the bench's own directories. Kept with the workload's data instead, as
    # elastix's trainer keeps its own (a restarted head reads it, a new workload starts cold).
    "jax_cache_dir=\"$ELASTIX_LOCAL_DATA_DIR/jax_cache\"")
ELASTIC = " elastic_enabled=true enable_single_controller=true elastic_timeout_seconds=300"
ELASTIX = ("elastix-train --preset tiny --steps 1000000 --checkpoint-dir "
           "\"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" --checkpoint-period {period} "
           "--elastic-mode pause-resume --slice-wait-timeout 300")

# MaxText 0.2.5, pathwaysutils 0.1.13 and Orbax 0.12.8 lines (quoted in docs/maxtext.md).
STEP = re.compile(r"completed step: (\d+),")
# A step being saved has been computed: MaxText prints its ``completed step`` line only after
# the save of that step (Orbax's line comes first), so a kill during a save is after that step.
REACHED = re.compile(r"completed step: (\d+),|\] Saving checkpoint at step (\d+)")
SAVED = re.compile(r"Saved a checkpoint at step (\d+)")
MARKS = {
    "detected": re.compile(r"Elastic event detected"),
    "cleaned": re.compile(r"Elastic attempt ([2-9]|\d\d+)\b"),
    "ready": re.compile(r"Sufficient slices active"),
    "restoring": re.compile(r"restoring from this run's directory step (\d+)"),
    "restored": re.compile(r"\[sync\] Finished load in ([\d.]+) seconds"),
}


def stamped(path: Path) -> list[tuple[dt.datetime, str]]:
    """A stamped head log: (the supervisor's time, the line)."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        ts, _, body = line.partition(" ")
        try:
            out.append((timefmt.parse(ts), body))
        except ValueError:
            continue
    return out


def attempts(backend: LocalBackend, name: str) -> list[list[tuple[dt.datetime, str]]]:
    logs = sorted((backend.root / name / "logs").glob("head-*.log"),
                  key=lambda p: int(p.stem.split("-")[1]))
    return [stamped(p) for p in logs]


def supervisor_saw(backend: LocalBackend, name: str, start: str) -> dt.datetime:
    """When the supervisor last logged a line starting with ``start`` (its own log's time)."""
    lines = stamped(backend.root / name / "supervisor.log")
    return [t for t, b in lines if b.startswith(start)][-1]


def last_step(lines) -> int | None:
    steps = [int(m.group(1) or m.group(2)) for _, b in lines if (m := REACHED.search(b))]
    return max(steps) if steps else None


def wait_between_checkpoints(backend: LocalBackend, name: str, period: int) -> None:
    """Wait until MaxText is half a checkpoint period past its newest save (not the first)."""
    def half_way():
        logs = attempts(backend, name)
        if not logs:  # the head has not started yet
            return False
        lines = logs[-1]
        saves = [int(m.group(1)) for _, b in lines if (m := SAVED.search(b))]
        step = last_step(lines)
        return saves and saves[-1] >= period and step is not None \
            and period // 2 <= step - saves[-1] < period - period // 4

    wait_for(half_way, 1800, "MaxText half-way between two checkpoints",
             gone=workload_ended(backend, name))


def maxtext_timeline(backend, name, kill, restart: bool, timeout: float = 1800):
    """Phases of one MaxText recovery, from its stamped log lines after the kill."""
    def first_step_after():
        logs = attempts(backend, name)
        if restart and len(logs) < 2:
            return None
        lines = logs[-1] if restart else [(t, b) for t, b in logs[-1] if t >= kill.time]
        seen = {}
        for t, b in lines:
            for key, pat in MARKS.items():
                if key not in seen and pat.search(b):
                    seen[key] = (t, pat.search(b))
            if "restored" in seen and (m := STEP.search(b)):
                return logs, seen, t, int(m.group(1))
        return None

    logs, seen, t_first, first = wait_for(first_step_after, timeout, "MaxText's first step",
                                          gone=workload_ended(backend, name))
    killed_in = logs[-2] if restart else logs[-1]
    before = last_step([(t, b) for t, b in killed_in if t < kill.time])  # the log's own view
    marks: list[tuple[str, dt.datetime]] = [("kill", kill.time)]
    if restart:
        old = logs[-2]
        marks += [("DATA_LOSS in the step (the head's last line)", old[-1][0]),
                  ("head process exit (seen by the supervisor)",
                   supervisor_saw(backend, name, "head (pid")),
                  ("workload restart (new head started)",
                   supervisor_saw(backend, name, "started head ")),
                  ("Python and JAX start-up (to the first line)", logs[-1][0][0])]
    else:
        marks += [("detection", seen["detected"][0]), ("cleanup", seen["cleaned"][0]),
                  ("waiting for slices", seen["ready"][0])]
    marks += [("re-initialise (to the restore)", seen["restoring"][0]),
              ("restore (Orbax load)", seen["restored"][0]), ("first step", t_first)]
    phases = [(label, (t - marks[i][1]).total_seconds())
              for i, (label, t) in enumerate(marks[1:])]
    restored = int(seen["restoring"][1].group(1))
    return {"phases": phases, "downtime": (t_first - kill.time).total_seconds(),
            "restored_step": restored, "last_step_before_kill": before,
            "steps_lost": None if before is None else before - restored, "first_step": first,
            "restart": restart}


def run_maxtext(env, backend, name, period, elastic: bool):
    cmd = MAXTEXT.format(period=period) + (ELASTIC if elastic else "")
    extra = ["--elastic-slices", "1", "--max-slice-restarts", "3"] if elastic else [
        "--max-restarts", "1"]
    cli(env, "workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "1",
        *extra, "--command", cmd)
    pid_before = backend.status(name).head.pid
    wait_between_checkpoints(backend, name, period)
    measured = None
    if elastic:  # the CLI's own measurement (chaos kill-worker --measure) of the same kill
        m = measure_kill(backend, name, lambda: [backend.kill_worker(name, slice=0, host=0)],
                         timeout=stretch(900), poll=0.2)
        kill, measured = m.kills[0], m.recovery.to_json() if m.recovery else None
    else:
        kill = backend.kill_worker(name, slice=0, host=0)
    out = maxtext_timeline(backend, name, kill, restart=not elastic)
    st = backend.status(name)
    out.update(pid_same=st.head.pid == pid_before, jobset_restarts=st.jobset_restarts,
               measure_kill=measured)
    return out


def run_elastix(env, backend, name, period):
    cli(env, "workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "1",
        "--elastic-slices", "1", "--max-slice-restarts", "3", "--command",
        ELASTIX.format(period=period))
    ended = workload_ended(backend, name)
    wait_for(lambda: any(e["event"] == "checkpoint_committed"
                         for e in backend.read_events(name) or []), 900, "a checkpoint",
             gone=ended)

    def half_period():
        steps = [e["step"] for e in backend.read_events(name) or [] if e["event"] == "step"]
        return steps and steps[-1] >= period and \
            period // 2 <= steps[-1] % period < period - period // 4

    wait_for(half_period, 300, "half a checkpoint period", gone=ended)
    m = measure_kill(backend, name, lambda: [backend.kill_worker(name, slice=0, host=0)],
                     timeout=stretch(600), poll=0.2)
    r = m.recovery
    if r is None or not r.complete:
        raise SystemExit(f"elastix trainer: no recovery ({m.state_after})")
    return {"phases": list(r.phase_seconds().items()), "downtime": r.downtime,
            "restored_step": r.restored_step, "steps_lost": r.steps_lost,
            "pid_same": m.pid_same, "jobset_restarts": m.jobset_restarts, "restart": False}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--period", type=int, default=100, help="checkpoint period, steps (all three)")
    ap.add_argument("--only", choices=("elastic", "restart", "elastix"), action="append")
    a = smoke_args(ap, "--only elastic --only elastix: checks it runs",
                   only=["elastic", "elastix"])
    root = tempfile.mkdtemp(prefix="elastix-bench-maxtext-")
    env = {**os.environ, "ELASTIX_STATE_DIR": os.path.join(root, "state"),
           "ELASTIX_BACKEND": "local", "KUBECONFIG": os.path.join(root, "none")}
    backend = LocalBackend(env["ELASTIX_STATE_DIR"])
    load_before = os.getloadavg()
    results = {}
    runs = [("elastic", "MaxText, elastic (in-process)"),
            ("restart", "MaxText, full restart (elastic off)"),
            ("elastix", "elastix trainer, elastic (in-process)")]
    try:
        for key, _ in runs:
            if a.only and key not in a.only:
                continue
            name = f"bench-{key}"
            try:
                if key == "elastix":
                    results[key] = run_elastix(env, backend, name, a.period)
                else:
                    results[key] = run_maxtext(env, backend, name, a.period, key == "elastic")
            finally:
                subprocess.run([sys.executable, "-m", "elastix", "workload", "delete", name,
                                "--delete-data"], env=env, capture_output=True)
            print(f"{key}: {json.dumps(results[key], default=str)}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(results, runs, load_before, os.getloadavg(), a.period)
    return 0


def report(results, runs, load_before, load_after, period) -> None:
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} "
          f"({os.cpu_count()} CPUs); checkpoint every {period} steps\n")
    print("| run | kill → next step (s) | phases (s) | restored step | steps lost | same PID | "
          "JobSet restarts |")
    print("|---|---|---|---|---|---|---|")
    for key, label in runs:
        r = results.get(key)
        if r is None:
            continue
        phases = ", ".join(f"{k} {fmt(v)}" for k, v in r["phases"])
        print(f"| {label} | {fmt(r['downtime'])} | {phases} | {r['restored_step']} | "
              f"{r['steps_lost']} | {'yes' if r['pid_same'] else 'no'} | "
              f"{r['jobset_restarts']} |")


if __name__ == "__main__":
    sys.exit(main())
