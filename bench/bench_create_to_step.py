"""Start-up as a user meets it: ``elastix workload create`` -> first step, beside the trainer alone.

The README quickstart's workload on the local backend (``--tpu-type v5litepod-8 --num-slices 2
--elastic-slices 2``: the supervisor, one slice-host process per worker pod sending heartbeats,
the trainer as head), timed from just before the ``elastix workload create`` process starts to
the ``ts`` of the trainer's first ``step`` event. Beside it, in the same run and alternating, the
head's command alone (``elastix-train`` with the quickstart's flags and layout, no supervisor, no
slice hosts, every slice taken as live):

- cold: a fresh state directory (so an empty JAX compilation cache in ``.cache/jax``, the one
  the state directory's workloads share); the trainer alone gets an empty
  ``--compilation-cache-dir``;
- warm: ``workload create --replace`` while the cold run still steps, in the same state
  directory: the time counts stopping the old run (its trainer's last save on SIGTERM, its
  exit, its hosts'), then the new trainer reads the shared compilation cache in
  ``<state-dir>/.cache/jax`` and resumes from that last checkpoint, as a re-created workload
  does (its imports began during the stop: ``supervisor --prestart``). Its like without
  elastix: the lone trainer still stepping is sent SIGTERM, and once it
  has exited a new one starts on its checkpoints and cache, timed from the SIGTERM. A fresh
  start of the lone trainer with the warm cache (nothing to stop, nothing to resume) is
  reported too, for the ratio against it;
- new (issue 49, item 6): once the warm run is deleted, ``workload create`` of a workload of
  another name in the same state directory: the same model, compiled before by the runs of
  the other name, nothing to stop and nothing to resume. Its like without elastix is that
  fresh start of the lone trainer with the warm cache.

Every process runs with bytecode written (``PYTHONDONTWRITEBYTECODE`` is dropped), as on a
user's machine.

Where the seconds go, from the files the run leaves (all wall-clock, one clock): the CLI until
``create`` returns, the supervisor's first log line, the head's start, the trainer's
``run_start`` event (imports, JAX, the resume check done), the first step.

    .venv/bin/python bench/bench_create_to_step.py [--runs 5] [--timeout 300]

Prints Markdown for docs/benchmarks.md, with the load average before and after. Nothing
asserts a timing. A run that fails says why at once (the workload failed, the trainer exited);
``--timeout`` bounds the wait for a first step in seconds of a quiet machine, stretched by the
load (``benchwait``), so a busy machine does not abort a healthy run. ``--smoke`` runs the
smallest case (one run of each): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, so this folder is on the path.
from bench_startup import cold_warm_table
from benchcli import smoke_args
from benchwait import exited, stretch, wait_for, workload_ended

NAME = "demo"
NEW = "demo-new"  # the new workload of the compiled model
SHAPE = ["--tpu-type", "v5litepod-8", "--num-slices", "2", "--elastic-slices", "2",
         "--backend", "local"]
BIN = Path(sys.executable).parent
LAYOUT: dict[str, str] = {}  # the head's device layout, from the first plan.json
TIMEOUT = [300.0]  # seconds of a quiet machine to wait for a first step (--timeout)


def _ts(s: str) -> float:
    from elastix.protocol.timefmt import parse

    return parse(s).timestamp()


def env(state: Path | None = None) -> dict[str, str]:
    # A user's machine writes bytecode: without it every process of ours compiles its modules
    # at each start (0.1 s for the CLI), which no user pays after the first run.
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ELASTIX_", "JAX_", "XLA_"))
         and k != "PYTHONDONTWRITEBYTECODE"}
    e.update(PYTHONUNBUFFERED="1", COLUMNS="100")
    if state is not None:
        e["ELASTIX_STATE_DIR"] = str(state)
    return e


def _wait_step(events: Path, gone, log: Path) -> list[dict]:
    """The events file's records once it holds a ``step`` event; ``gone`` says when it never
    will, ``log`` is shown when the wait fails."""
    def stepped() -> list[dict] | None:
        if not events.exists():
            return None
        recs = [json.loads(line) for line in events.read_text().splitlines()
                if line.endswith("}")]
        return recs if any(r["event"] == "step" for r in recs) else None

    def tail() -> str:
        lines = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
        return f"the last lines of {log}:\n" + "\n".join(lines) if lines else f"{log}: empty"

    return wait_for(stepped, TIMEOUT[0], f"a first step in {events}", gone=gone, note=tail,
                    poll=0.01)


def _supervisor_marks(wdir: Path) -> dict[str, float]:
    """Wall-clock times of the supervisor's first line and of its head start."""
    marks = {}
    for line in (wdir / "supervisor.log").read_text().splitlines():
        ts, _, msg = line.partition(" ")
        if msg.startswith("supervisor ") and "supervisor" not in marks:
            marks["supervisor"] = _ts(ts)
        elif msg.startswith("started head") and "head" not in marks:
            marks["head"] = _ts(ts)
    return marks


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used so far (Linux ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_by_role(wdir: Path) -> dict[str, float]:
    """CPU seconds so far of the supervisor, all slice hosts together, and the head."""
    out = {"cpu: supervisor": 0.0, "cpu: slice hosts (all)": 0.0, "cpu: trainer": 0.0}
    role = {"supervisor": "cpu: supervisor", "worker": "cpu: slice hosts (all)",
            "head": "cpu: trainer"}
    for line in (wdir / "procs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["role"] in role:
            out[role[rec["role"]]] += cpu_seconds(rec["pid"])
    return out


def quickstart(state: Path, replace: bool = False, keep: bool = False,
               name: str = NAME) -> dict[str, float]:
    """One ``workload create`` of ``name`` (``--replace``: of the run still going in
    ``state``); seconds from its start to each mark, the first step last, then the CPU seconds
    each part used until then. ``keep``: leave the workload running (for the next
    ``--replace``)."""
    from elastix.backends.local.backend import LocalBackend

    wdir = state / name
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    subprocess.run([str(BIN / "elastix"), "workload", "create", name, *SHAPE,
                    *(["--replace"] if replace else [])],
                   env=env(state), check=True, capture_output=True)
    returned = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        recs = _wait_step(wdir / "events.jsonl", workload_ended(LocalBackend(state), name),
                          wdir / "supervisor.log")
    except BaseException:
        delete(state, name=name)  # never leave a workload's processes behind
        raise
    cpu = {"cpu: `workload create` (CLI)": after.ru_utime + after.ru_stime
           - before.ru_utime - before.ru_stime, **_cpu_by_role(wdir)}
    marks = _supervisor_marks(wdir)
    _check_resumed(recs, replace, wdir / "logs" / "head-0.log")
    start = next(r for r in recs if r["event"] == "run_start")
    first = next(r for r in recs if r["event"] == "step")
    plan = json.loads((wdir / "plan.json").read_text())
    LAYOUT.update(ELASTIX_NUM_SLICES=str(plan["num_slices"]),
                  ELASTIX_DEVICES_PER_SLICE=str(plan["devices_per_slice"]), JAX_PLATFORMS="cpu")
    out = {"create returned": returned - t0, "supervisor up": marks["supervisor"] - t0,
           "head started": marks["head"] - t0, "run_start": _ts(start["ts"]) - t0,
           "first step": _ts(first["ts"]) - t0, **cpu}
    if not keep:
        delete(state, check=True, name=name)
    return out


def delete(state: Path, check: bool = False, name: str = NAME) -> None:
    """``workload delete --wait`` of the bench's workload ``name`` in ``state``."""
    subprocess.run([str(BIN / "elastix"), "workload", "delete", name, "--wait",
                    "--ignore-not-found", "--backend", "local"], env=env(state), check=check,
                   capture_output=True)


def head_command() -> list[str]:
    """The quickstart head's trainer flags (the local backend's default job), minus its dirs."""
    from elastix.backends.local.backend import LocalBackend

    cmd = LocalBackend.defaults()["command"].split()
    i = cmd.index("--checkpoint-dir")
    return cmd[1:i] + cmd[i + 2:]


def trainer_alone(run: Path, cache: Path, layout: dict[str, str],
                  previous: subprocess.Popen | None = None
                  ) -> tuple[dict[str, float], subprocess.Popen]:
    """The head's command as a lone process in ``run`` (its checkpoints, one events file per
    start): seconds from the start to run_start and the first step; the process, still
    stepping. ``previous``: the lone trainer still stepping in ``run``, stopped first as a user
    without elastix would (SIGTERM, whose final save the new one resumes from, then its exit),
    and the time counts from that SIGTERM: what ``workload create --replace`` does."""
    events = run / f"events-{time.time_ns()}.jsonl"
    e = env()
    e.update(layout)
    run.mkdir(parents=True, exist_ok=True)
    log = run / "trainer.log"
    t0 = time.time()
    if previous is not None:
        previous.terminate()
        try:
            previous.wait(stretch(60))  # its final save, then its exit
        except subprocess.TimeoutExpired:
            previous.kill()
            previous.wait()
            raise SystemExit("the lone trainer did not exit within 60 s of its SIGTERM") from None
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(BIN / "elastix-train"), *head_command(),
                                 "--checkpoint-dir", str(run / "ckpt"),
                                 "--compilation-cache-dir", str(cache),
                                 "--events-file", str(events)],
                                env=e, stdout=out, stderr=subprocess.STDOUT)
    try:
        recs = _wait_step(events, exited(proc), log)
        cpu = cpu_seconds(proc.pid)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    _check_resumed(recs, previous is not None, log)
    start = next(r for r in recs if r["event"] == "run_start")
    first = next(r for r in recs if r["event"] == "step")
    return {"run_start": _ts(start["ts"]) - t0, "first step": _ts(first["ts"]) - t0,
            "cpu: trainer": cpu}, proc


def _check_resumed(recs: list[dict], resume: bool, log: Path) -> None:
    """A warm start must have resumed from the previous run's final save (and a cold or fresh
    one must not have): else the rows compare unlike things."""
    restored = [r for r in recs if r["event"] == "restore" and r.get("source") == "checkpoint"]
    if bool(restored) != resume:
        raise SystemExit(f"the trainer {'did not resume' if resume else 'resumed'}: see {log}")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def _compile_bytecode() -> None:
    """Write the bytecode of our packages before any run is timed, as a user's first run
    leaves it: else the first run of the bench alone pays for compiling them."""
    import compileall
    import importlib.util

    for pkg in ("elastix", "elastix_trainer"):
        spec = importlib.util.find_spec(pkg)
        for where in spec.submodule_search_locations or []:
            compileall.compile_dir(where, quiet=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=TIMEOUT[0],
                    help="seconds of a quiet machine to wait for a first step (see benchwait)")
    a = smoke_args(ap, "one run of each: checks it runs", runs=1)
    TIMEOUT[0] = a.timeout
    tmp = Path(tempfile.mkdtemp(prefix="bench-c2s-"))
    _compile_bytecode()
    load0 = os.getloadavg()
    rows: dict[str, list[dict]] = {k: [] for k in ("create cold", "create warm", "create new",
                                                   "alone cold", "alone fresh", "alone warm")}
    try:
        for i in range(a.runs):
            state = tmp / f"state-{i}"
            try:
                for kind in ("cold", "warm"):
                    rows[f"create {kind}"].append(quickstart(state, replace=kind == "warm",
                                                             keep=kind == "cold"))
                    print(f"create {kind}", i + 1, rows[f"create {kind}"][-1],
                          file=sys.stderr, flush=True)
                # a new workload of the model the runs above compiled: the shared cache
                rows["create new"].append(quickstart(state, name=NEW))
                print("create new", i + 1, rows["create new"][-1], file=sys.stderr, flush=True)
            finally:
                delete(state)  # the kept cold run, if the warm one never replaced it
                delete(state, name=NEW)
            cache = tmp / f"alone-cache-{i}"
            proc = None
            try:
                # cold, then warm: SIGTERM to the cold one still stepping, and a new one in
                # its directory resumes from its final save, as create --replace does; then
                # fresh: a new directory, the cache warm, nothing to stop or resume
                for kind in ("cold", "warm", "fresh"):
                    previous = proc if kind == "warm" else None
                    if kind == "fresh":
                        stop(proc)
                    run = tmp / f"alone-{i}" / ("fresh" if kind == "fresh" else "run")
                    r, proc = trainer_alone(run, cache, LAYOUT, previous)
                    rows[f"alone {kind}"].append(r)
                    print(f"alone {kind}", i + 1, r, file=sys.stderr, flush=True)
            finally:
                stop(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(rows, a.runs, load0, os.getloadavg())


def report(rows: dict[str, list[dict]], runs: int, load0, load1) -> None:
    def med(xs):
        return statistics.median(xs)

    def cell(rs, key):
        xs = [r[key] for r in rs]
        return f"{med(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"

    print(f"{runs} runs of each; load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.1f}' for x in load0)}, after {', '.join(f'{x:.1f}' for x in load1)}\n")
    print("| path | cache | start → first step, median (min–max) s |")
    print("|---|---|---|")
    labels = {"create cold": ("`workload create` → first step", "cold"),
              "create warm": ("`workload create --replace` → first step", "warm"),
              "create new": ("`workload create` of a new workload, its model compiled before, "
                             "→ first step", "warm"),
              "alone cold": ("trainer alone", "cold"),
              "alone fresh": ("trainer alone, a fresh start", "warm"),
              "alone warm": ("trainer alone, stopping the last one and resuming", "warm")}
    for key, rs in rows.items():
        label, kind = labels[key]
        print(f"| {label} | {kind} | {cell(rs, 'first step')} |")
    print()
    first = {k: med([r["first step"] for r in rs]) for k, rs in rows.items()}
    for kind, alone, what in (("cold", "alone cold", "the trainer alone"),
                              ("warm", "alone warm", "the trainer alone stopping the last "
                               "one and resuming"),
                              ("warm", "alone fresh", "a fresh start of the trainer alone"),
                              ("new", "alone fresh", "a fresh start of the trainer alone "
                               "(warm)")):
        c, t = first[f"create {kind}"], first[alone]
        print(f"- {kind}: create → first step is {c / t:.2f}× {what} ({c - t:+.2f} s)")
    print("\n| `workload create`: seconds from its start to (median); CPU seconds used by then "
          "| cold | warm (`--replace`) | new workload, model compiled before |")
    print("|---|---|---|---|")
    for key in rows["create cold"][0]:
        print(f"| {key} | " + " | ".join(f"{med([r[key] for r in rows[k]]):.2f}" for k in
                                         ("create cold", "create warm", "create new")) + " |")
    cold_warm_table("trainer alone: seconds from its start (warm: the SIGTERM to the one "
                    "before) to (median); CPU seconds of the new one by then",
                    rows["alone cold"], rows["alone warm"], digits=2)


if __name__ == "__main__":
    main()
