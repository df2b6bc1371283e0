"""A hostile hunt for the data-loss and wrong-result faults of the local backend and the trainer.

Run by hand (not in the suite), one workload at a time, as a user would: ``elastix workload
create --backend local``, ``elastix chaos kill-worker``, ``workload delete``, ``create
--replace``, ``chaos run``, a script flipping bytes in the newest checkpoint. Every
kill-then-recover run is judged from the trainer's events file (held open, so a deleted
workload's file is still read to its end) and the checkpoint directory:

- no step reported ``checkpoint_committed`` is ever missing from storage (unless the
  trainer's ``--max-to-keep`` retired it behind newer intact committed steps),
- no damaged step is restored (a restore from checkpoint names an intact step, ``verified``),
- a recovery restores exactly the newest saved state completed before the kill: nothing
  older (data loss), nothing completed after it (a wrong result),
- a stopping head commits its final step, and that step is the ``run_end`` step,
- replica-resize scales back up once the killed slice is replaced,
- ``chaos run`` names the step of the trainer's own ``run_end``.

Rows 9-13 (``hunt_more.py``): two slices lost 0-0.3 s apart, a kill at start-up or the first
compile, a kill at the final save, ``create --replace`` racing a kill, ``logs -f`` and
``status --watch`` across a delete and a re-create.

    .venv/bin/python bench/hunt_faults.py            # every row: 10-13 min at load 15-18
    .venv/bin/python bench/hunt_faults.py --rows 5,6 # some rows

Row 5's kills are made in process (``LocalBackend.kill_worker``, the code behind ``chaos
kill-worker``): the CLI's start-up would swamp a millisecond offset. Prints one line per run
and a table of verdicts per row (docs/fault-hunt.md). The machinery is in ``hunt_lib.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hunt_more
from hunt_lib import (
    VERDICTS,
    Hunt,
    Tail,
    at_event,
    attempt,
    check_storage,
    files_of,
    flip,
    judge_recovery,
    kill_at,
    newest_good,
    record,
    session_of,
    stepping,
    train_alone,
    wait,
)

from elastix.protocol.timefmt import parse, utc_now

ROWS = {1: "garbled committed checkpoint restored as good",
        2: "relative --checkpoint-dir",
        3: "delete / create --replace loses steps since the last checkpoint",
        4: "--replace silently deleting data",
        5: "kill just after a step/save deletes a committed step or drops a snapshot",
        6: "replica-resize never scales back up",
        7: "chaos run names the wrong step",
        8: "a frozen host rolls back too far or keeps work done after it",
        9: "two slices lost 0-0.3 s apart restore past the first kill",
        10: "a kill at start-up or the first compile loses or invents a step",
        11: "a kill at the final save claims a completion not on storage",
        12: "create --replace racing a kill loses steps or leaves processes",
        13: "logs -f / status --watch across delete and re-create hang or crash"}
TRAIN = ("elastix-train --preset tiny --steps {steps} --step-delay 0.1 "
         "--checkpoint-dir {ckpt} --checkpoint-period 20 --snapshot-period 5 "
         "--max-slice-losses {losses} --slice-wait-timeout 120 {extra}")


# -- the rows --------------------------------------------------------------------------------------
def row5(h: Hunt, name: str, tail: Tail) -> None:
    """Kills at offsets after step, save and snapshot events; one just after a session's first
    step; the workload's first kill right after its very first snapshot."""
    plans = [("snapshot_taken", 0.0, lambda e: e["step"] == 5, "first snapshot of the run"),
             ("checkpoint_save_started", 0.0, None, "at a checkpoint's copy"),
             ("checkpoint_save_started", 0.003, None, "3 ms after a save started"),
             ("step", 0.003, lambda e: e["step"] % 20 == 0, "3 ms after a checkpoint step"),
             ("checkpoint_committed", 0.0, None, "at a commit"),
             ("snapshot_taken", 0.003, lambda e: e["step"] % 20 != 0, "3 ms after a snapshot"),
             ("step", 0.02, lambda e: e["step"] % 5 == 1, "20 ms after the step after a save"),
             ("elastic_first_step", 0.0, None, "after a recovery's first step"),
             ("checkpoint_save_started", 0.05, None, "50 ms after a save started")]
    for k, (anchor, off, when, label) in enumerate(plans):
        if anchor == "elastic_first_step":
            attempt(5, label, kill_after_first_step, h, name, tail, label)
            continue
        start = 0 if k == 0 else None  # the first: watched from the run's start
        attempt(5, label, judged_kill, h, name, tail, anchor, off, when, k, label, start)


def judged_kill(h: Hunt, name: str, tail: Tail, anchor, off, when, k, label, start=None):
    i, t, measured = kill_at(h, name, tail, anchor, off, when, slice_=k % 2, start=start)
    judge_kill(h, name, tail, i, t, f"kill {measured * 1e3:.1f} ms after {anchor} "
               f"{tail.events[i].get('step')}", label)


def judge_kill(h: Hunt, name: str, tail: Tail, i: int, t: float, what: str, label: str):
    wait(lambda: any(e["event"] == "elastic_first_step" for e in tail.poll()[i + 1:]), 300,
         "the recovery")
    problems, note = judge_recovery(tail.events, i, t, t, h.ckpt(name))
    record(5, label, problems, f"{what}; {note}")


def kill_after_first_step(h: Hunt, name: str, tail: Tail, label: str) -> None:
    """Kill at a snapshot, then again the moment the recovery's first step completes."""
    i1, t1, m1 = kill_at(h, name, tail, "snapshot_taken", 0.0, slice_=0)
    i2, t2, m2 = kill_at(h, name, tail, "elastic_first_step", 0.0, slice_=1, start=i1)
    judge_kill(h, name, tail, i1, t1, f"kill {m1 * 1e3:.1f} ms after snapshot_taken "
               f"{tail.events[i1]['step']}", "at a snapshot (before the next)")
    judge_kill(h, name, tail, i2, t2, f"kill {m2 * 1e3:.1f} ms after elastic_first_step "
               f"{tail.events[i2]['step']}", label)


def double_kills(h: Hunt, name: str, tail: Tail) -> None:
    """Both slices killed at once; a second kill while the first recovery waits or restores:
    each recovery must return to the newest state saved before the *first* kill."""
    wait(lambda: stepping(tail), 300, "stepping")
    i, t, m = kill_at(h, name, tail, "snapshot_taken", 0.0, slice_=0)
    h.backend.kill_worker(name, slice=1)
    judge_kill(h, name, tail, i, t, f"kill {m * 1e3:.1f} ms after snapshot_taken "
               f"{tail.events[i]['step']}, then the other slice", "both slices at once")
    for anchor in ("elastic_cleanup_done", "elastic_slices_ready"):
        wait(lambda: stepping(tail), 300, "stepping")
        i1, t1, _ = kill_at(h, name, tail, "snapshot_taken", 0.0, slice_=0)
        i2, t2, m2 = kill_at(h, name, tail, anchor, 0.0, slice_=1, start=i1)
        wait(lambda i2=i2: tail.since(i2 + 1, "elastic_first_step"), 300, "the recoveries")
        evs = tail.poll()
        want = newest_good(evs, i1, t1)
        rec = [e for e in evs[i1:] if e["event"] == "elastic_restored"]
        problems = check_storage(evs, h.ckpt(name))
        if rec[-1]["step"] != want:
            problems.append(f"restored {[e['step'] for e in rec]}, want {want}")
        record(5, f"a second kill at {anchor}", problems, f"second kill {m2 * 1e3:.1f} ms after "
               f"{anchor}; recoveries restored {[(e['step'], e['source']) for e in rec]} (good "
               f"{want})")


def row8(h: Hunt, name: str, tail: Tail) -> None:
    """A slice host frozen (SIGSTOP: alive, silent, as a hung TPU VM) at a save or a step,
    thawed once the loss is seen. Its loss dates from its last heartbeat: the recovery must
    restore exactly the newest state saved of a step completed before that date, though the
    stand-in devices went on for a detection timeout, saving more snapshots than are kept."""
    plans = [("snapshot_taken", 0.0, "at a snapshot"),
             ("checkpoint_committed", 0.0, "at a commit"),
             ("step", 0.05, "50 ms after a step"),
             ("snapshot_taken", 0.15, "150 ms after a snapshot")]
    for k, (anchor, off, label) in enumerate(plans):
        attempt(8, label, freeze_once, h, name, tail, anchor, off, k % 2, label)


def freeze_once(h: Hunt, name: str, tail: Tail, anchor: str, off: float, slice_: int,
                label: str) -> None:
    wait(lambda: stepping(tail), 300, "stepping")
    st = json.loads(h.cli("workload", "status", name, "-o", "json").stdout)
    pid = st["slices"][slice_]["pods"][0]["pid"]
    j = at_event(tail, anchor, off, start=len(tail.poll()))
    os.kill(pid, signal.SIGSTOP)
    t_stop = time.time()
    try:
        wait(lambda: tail.since(j, "elastic_detected"), 120, "the loss")
    finally:
        os.kill(pid, signal.SIGCONT)
    wait(lambda: tail.since(j, "elastic_first_step"), 300, "the recovery")
    det = tail.since(j, "elastic_detected")[0]
    t_loss = det["t"] - det["since_loss"]
    # the trainer's own date of the loss decides what is good (0.05 s: a step's event may be
    # written just after its completion); the date must be the last heartbeat before the stop
    problems, note = judge_recovery(tail.events, j, t_loss - 0.05, t_loss + 0.05, h.ckpt(name))
    if not t_stop - 1.0 < t_loss <= t_stop + 0.05:
        problems.append(f"loss dated {t_stop - t_loss:+.2f} s before the stop")
    record(8, label, problems, f"froze {(t_stop - tail.events[j]['t']) * 1e3:.0f} ms after "
           f"{anchor} {tail.events[j].get('step')}, loss dated {t_stop - t_loss:.2f} s before "
           f"the stop, found {det['t'] - t_stop:.1f} s after; {note}")


def row1(h: Hunt, name: str, tail: Tail) -> None:
    """Garble the newest committed step(s) right after a commit, then SIGKILL the trainer: the
    restarted head restores from storage (no snapshot survives a new process)."""
    cases = [("4 KiB flipped mid largest file", 1, lambda fs: (fs[-1], 4096)),
             ("1 byte flipped in the smallest file", 1, lambda fs: (fs[0], 1)),
             ("two newest steps garbled", 2, lambda fs: (fs[-1], 4096))]
    for label, depth, pick in cases:
        attempt(1, label, garble_once, h, name, tail, label, depth, pick)


def garble_once(h: Hunt, name: str, tail: Tail, label: str, depth: int, pick) -> None:
    wait(lambda: stepping(tail), 300, "stepping")
    n = len(tail.poll())
    wait(lambda n=n, d=depth: len(tail.since(n, "checkpoint_committed")) >= d + 1, 300,
         "fresh commits")
    ev = tail.since(n, "checkpoint_committed")[-1]
    on_disk = sorted(int(p.name) for p in h.ckpt(name).iterdir() if p.name.isdigit())
    targets = [s for s in on_disk if s <= ev["step"]][-depth:]
    h.garbled.update({s: len(tail.poll()) for s in targets})
    for s in targets:
        flip(*pick(files_of(h.ckpt(name) / str(s))))
    pid = [e["pid"] for e in tail.poll() if e["event"] == "run_start"][-1]
    os.kill(pid, signal.SIGKILL)
    i = len(tail.poll())
    wait(lambda i=i: tail.since(i, "restore"), 300, "the restarted head's restore")
    evs = tail.poll()
    res = tail.since(i, "restore")[0]
    damaged = {e["step"] for e in tail.since(i, "checkpoint_damaged")}
    problems = check_storage(evs, h.ckpt(name), h.garbled)
    # what the restarted head may restore: the newest step reported committed before
    # the kill that is on storage and not garbled (a commit after the garble is newer)
    on_disk = {int(p.name) for p in h.ckpt(name).iterdir() if p.name.isdigit()}
    reported = {e["step"] for e in evs[:i] if e["event"] == "checkpoint_committed"}
    want = max(s for s in reported & on_disk if s not in targets)
    if want < max(targets) and not set(targets) <= damaged:
        problems.append(f"damage of {sorted(set(targets) - damaged)} not reported")
    if res["step"] != want:
        problems.append(f"restored {res['step']}, want {want}")
    record(1, label, problems, f"garbled {targets}; damaged {sorted(damaged)}; restored "
           f"{res['step']} verified {res.get('verified')}")
    wait(lambda: stepping(tail), 300, "stepping again")


def stop_run(h: Hunt, name: str, tail: Tail, how: str, phase, command: str) -> Tail | None:
    """``workload delete`` or ``create --replace`` at a chosen phase between checkpoints."""
    wait(lambda: stepping(tail), 300, "stepping")
    n = len(tail.poll())
    wait(lambda: any(phase(e) for e in tail.poll()[n:]), 120, "the phase")
    out = (h.cli("workload", "delete", name) if how == "delete"
           else h.create(name, command, replace=True))
    wait(lambda: tail.since(n, "run_end"), 60, "the old head's run_end")
    evs = tail.poll()
    end = tail.since(n, "run_end")[-1]
    steps = [e["step"] for e in session_of(evs, len(evs)) if e["event"] == "step"]
    committed = sorted(int(p.name) for p in h.ckpt(name).iterdir() if p.name.isdigit())
    problems = check_storage(evs, h.ckpt(name))
    words = f"checkpoint of step {end['step']} committed"
    if words not in end["reason"]:
        problems.append(f"run_end does not say {words!r}: {end['reason'][:120]}")
    if steps and steps[-1] != end["step"]:
        problems.append(f"last step {steps[-1]} != run_end step {end['step']}")
    # the old run's own newest commit (a replacement may already have saved newer ones)
    run = evs[max(j for j, e in enumerate(evs) if e["event"] == "run_start"):]
    newest = max((e["step"] for e in run if e["event"] == "checkpoint_committed"), default=None)
    if newest != end["step"] or end["step"] not in committed:
        problems.append(f"newest committed {newest} (on storage {committed[-3:]}) != final "
                        f"step {end['step']}")
    text = out.stdout + out.stderr
    if "kept its data" not in text:
        problems.append(f"no 'kept its data' line: {text.strip()[-160:]}")
    record(3, f"{how} {phase.__doc__}", problems, f"run_end step {end['step']}, newest "
           f"committed {committed[-1:]}, {end['reason'][:70]}")
    if how != "replace":
        return None
    new = Tail(h.state / name / "events.jsonl")
    wait(lambda: [e for e in new.poll() if e["event"] == "restore"], 300, "the new run's restore")
    res = next(e for e in new.events if e["event"] == "restore")
    p4 = [] if res["step"] == end["step"] and res.get("verified") else [
        f"the new run restored {res['step']} ({res['source']}), not {end['step']}"]
    if "replaced" not in text:
        p4.append("no 'replaced' notice")
    record(4, "create --replace keeps and resumes the data", p4,
           f"new run restored {res['step']} from {res['source']}; said: "
           + " | ".join(ln for ln in text.splitlines() if "replaced" in ln or "kept" in ln)[:160])
    return new


def rows34(h: Hunt, name: str, tail: Tail, command: str) -> None:
    def mid(e):
        """mid-interval (step 20k+7)"""
        return e["event"] == "step" and e["step"] % 20 == 7

    def saving(e):
        """a save in flight"""
        return e["event"] == "checkpoint_save_started"

    def late(e):
        """just before a checkpoint (step 20k+19)"""
        return e["event"] == "step" and e["step"] % 20 == 19

    for how, phase in (("replace", mid), ("replace", saving), ("delete", late)):
        try:
            tail = stop_run(h, name, tail, how, phase, command)
        except Exception as e:  # noqa: BLE001 - the run's verdict
            record(3, f"{how} {phase.__doc__}", [f"{type(e).__name__}: {e}"[:300]])
            return
    out = h.cli("workload", "delete", name, "--delete-data", check=False)  # its data only
    print(f"  delete --delete-data: {out.stdout.strip()}{out.stderr.strip()}")
    for how in ("delete", "replace"):
        attempt(3, f"{how} while it waits for a killed slice", stop_in_recovery, h, how)


def stop_in_recovery(h: Hunt, how: str) -> None:
    """A slow scheduler (30 s, as GKE takes minutes to replace a TPU VM): a worker is killed, the
    head waits for its slice, and the workload is deleted (or replaced) meanwhile. The head
    holds the host snapshot of the newest step before the kill: it must commit it before its
    hosts are stopped, not be SIGKILLed at the end of its grace with it."""
    name = f"hunt-slow-{how}"
    cmd = TRAIN.format(steps=100000, ckpt='"$ELASTIX_LOCAL_DATA_DIR/checkpoints"', losses=100,
                       extra="")
    slow = {"ELASTIX_LOCAL_SCHEDULING_DELAY": "30"}
    h.create(name, cmd, env=slow)
    tail = Tail(h.state / name / "events.jsonl")
    label = f"{how} while it waits for a killed slice"
    try:
        # a kill between two checkpoints, after a snapshot: that snapshot is newer than them
        i, t, _ = kill_at(h, name, tail, "snapshot_taken", 0.0, lambda e: e["step"] % 20 == 10)
        wait(lambda: tail.since(i, "elastic_cleanup_done"), 120, "the detection")
        good = newest_good(tail.events, i, t)
        out = (h.cli("workload", "delete", name) if how == "delete"
               else h.create(name, cmd, replace=True, env=slow))
        wait(lambda: tail.since(i, "run_end"), 10, "run_end (the head was SIGKILLed?)")
        evs = tail.poll()
        end = tail.since(i, "run_end")[-1]
        on_disk = sorted(int(p.name) for p in h.ckpt(name).iterdir() if p.name.isdigit())
        problems = check_storage(evs, h.ckpt(name))
        newest = max(e["step"] for e in evs if e["event"] == "checkpoint_committed")
        if newest != good or good not in on_disk:
            problems.append(f"newest committed {newest} (on storage {on_disk[-3:]}): the "
                            f"snapshot of {good} is lost")
        if "kept its data" not in out.stdout + out.stderr:
            problems.append("no 'kept its data' line")
        note = f"newest good {good}; on storage {on_disk[-3:]}; {end['reason'][-70:]}"
        if how == "replace":
            new = Tail(h.state / name / "events.jsonl")
            res = wait(lambda: [e for e in new.poll() if e["event"] == "restore"], 300,
                       "the new run's restore")[0]
            p4 = [] if res["step"] == good else [f"the new run restored {res['step']}, not {good}"]
            record(4, "create --replace of a head waiting for a slice keeps its data", p4,
                   f"the new run restored {res['step']} ({res['source']})")
        record(3, label, problems, note)
    finally:
        h.cli("workload", "delete", name, "--delete-data", check=False)
        h.cli("workload", "delete", name, "--delete-data", check=False)  # its data, if kept


def row6(h: Hunt, runs: int) -> None:
    name = "hunt-resize"
    cmd = TRAIN.format(steps=100000, ckpt="$ELASTIX_LOCAL_DATA_DIR/checkpoints", losses=100,
                       extra="--elastic-mode replica-resize --min-slices 1")
    h.create(name, cmd)
    tail = Tail(h.state / name / "events.jsonl")
    try:
        for k in range(runs):
            attempt(6, f"kill {k + 1}", resize_once, h, name, tail, k)
    finally:
        h.cli("workload", "delete", name, "--delete-data", check=False)


def resize_once(h: Hunt, name: str, tail: Tail, k: int) -> None:
    wait(lambda: stepping(tail) and [e for e in tail.poll() if e["event"] == "step"][-1]
         ["live_slices"] == 2, 300, "stepping on 2 slices")
    n = len(tail.poll())
    t0 = utc_now().timestamp()
    out = json.loads(h.cli("chaos", "kill-worker", name, "--slice", str([1, 1, 0][k % 3]),
                           "-o", "json").stdout)
    t_kill = parse(out["time"]).timestamp()
    problems = []
    try:
        wait(lambda n=n: [e for e in tail.since(n, "elastic_resize")
                          if e["to_slices"] == 2], 180, "the scale-up back to 2")
        up = len(tail.poll())
        wait(lambda up=up: [e for e in tail.since(up, "step") if e["live_slices"] == 2],
             120, "a step on 2 slices")
    except TimeoutError as e:
        problems.append(str(e))
    rs = [(e["from_slices"], e["to_slices"]) for e in tail.since(n, "elastic_resize")]
    p2, note = judge_recovery(tail.events, n, max(t0, t_kill - 0.002), t_kill + 0.002,
                              h.ckpt(name))
    record(6, f"kill slice {out['slice']} ({'again, the replaced one' if k == 1 else 'cli'})",
           problems + p2, f"resizes {rs}; {note}")


def row7_and_2(h: Hunt) -> None:
    """chaos run on a workload whose second loss exhausts its budget, and on one that completes;
    both with a relative --checkpoint-dir (the head runs where create ran)."""
    for label, steps, losses, kills in (("budget exhausted", 100000, 1, 3),
                                        ("completes first", 120, 100, 4)):
        name = "hunt-chaos"
        rel = f"rel-{steps}"
        cmd = TRAIN.format(steps=steps, ckpt=rel, losses=losses, extra="")
        # The trainer's budget below the JobSet's on purpose: the elastic lint refuses that.
        h.create(name, cmd, "--max-restarts", "0", *(["--skip-lint"] if losses == 1 else []))
        tail = Tail(h.state / name / "events.jsonl")
        try:
            p = h.cli("chaos", "run", name, "--kills", str(kills), "--interval", "8s",
                      "-o", "json", check=False)
            report = json.loads(p.stdout)
            wait(lambda t=tail: t.since(0, "run_end"), 300, "run_end")
            end = tail.since(0, "run_end")[-1]
            stopped = report.get("stopped", "")
            problems = [] if f"at step {end['step']} " in stopped + " " else [
                f"chaos says {stopped!r}, run_end step {end['step']}"]
            record(7, label, problems, f"exit {p.returncode}; {stopped[:90]}; run_end "
                   f"{end['status']} step {end['step']}")
            ck = h.root / rel
            on_disk = sorted(int(x.name) for x in ck.iterdir() if x.name.isdigit()) \
                if ck.exists() else []
            p2 = check_storage(tail.poll(), ck)
            fails = tail.since(0, "checkpoint_save_failed")
            if fails:
                p2.append(f"{len(fails)} saves failed: {fails[0]['error'][:80]}")
            if not on_disk:
                p2.append(f"nothing committed under {rel}")
            if any(".orbax-checkpoint-tmp" in x.name for x in ck.iterdir()) and \
                    end["status"] == "completed":
                p2.append("a tmp dir is left")
            if end["status"] == "completed" and on_disk[-1:] != [end["step"]]:
                p2.append(f"final step {end['step']} not the newest on disk {on_disk[-1:]}")
            record(2, f"workload, --checkpoint-dir {rel} ({label})", p2,
                   f"committed {on_disk[-3:]} under the create's directory")
        finally:
            h.cli("workload", "delete", name, check=False)


def row2_trainer(h: Hunt) -> None:
    """The trainer alone with a relative --checkpoint-dir, run twice (the second resumes)."""
    cwd = h.root / "alone"
    cwd.mkdir()
    env = {k: v for k, v in h.env.items() if not k.startswith("ELASTIX_")}
    for steps in (30, 45):
        p = subprocess.run([sys.executable, "-m", "elastix_trainer", "--preset", "tiny",
                            "--steps", str(steps), "--checkpoint-dir", "ck",
                            "--checkpoint-period", "10", "--events-file", "ev.jsonl"],
                           cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        evs = [json.loads(x) for x in (cwd / "ev.jsonl").read_text().splitlines() if x.strip()]
        end = [e for e in evs if e["event"] == "run_end"][-1]
        dirs = sorted(x.name for x in (cwd / "ck").iterdir())
        problems = [] if p.returncode == 0 and end["status"] == "completed" and str(steps) in \
            dirs and not any("tmp" in d for d in dirs) else [
            f"exit {p.returncode}, {end['status']}, dirs {dirs}: {p.stderr.strip()[-150:]}"]
        restores = [e["step"] for e in evs if e["event"] == "restore"]
        if steps == 45 and restores[-1:] != [30]:
            problems.append(f"the re-run restored {restores[-1:]}, not 30")
        record(2, f"trainer alone --checkpoint-dir ck --steps {steps}", problems,
               f"exit {p.returncode}, dirs {dirs}, restores {restores}")


def row1_trainer(h: Hunt) -> None:
    """The trainer alone, re-run on a garbled newest step (a user restarting a job), then on
    every step garbled: it must fall back, keep the damaged files, and never start over."""
    cwd = h.root / "alone-garble"
    cwd.mkdir()
    env = {k: v for k, v in h.env.items() if not k.startswith("ELASTIX_")}
    ck = cwd / "ck"
    train_alone(cwd, env, 30)
    flip(*(lambda fs: (fs[-1], 4096))(files_of(ck / "30")))
    p, evs = train_alone(cwd, env, 40)
    res = [e for e in evs if e["event"] == "restore"][-1:]
    dirs = sorted(x.name for x in ck.iterdir())
    problems = [] if p.returncode == 0 and res and res[0]["step"] == 20 and res[0]["verified"] \
        else [f"exit {p.returncode}, restores {res}: {p.stderr.strip()[-150:]}"]
    if not any(d.startswith("30.damaged-") for d in dirs):
        problems.append(f"the damaged step 30 is not kept aside: {dirs}")
    record(1, "trainer alone re-run on a garbled newest step", problems,
           f"restored {[r['step'] for r in res]}, dirs {dirs}")
    steps = sorted(int(d) for d in dirs if d.isdigit())
    for s in steps:
        flip(*(lambda fs: (fs[0], 1))(files_of(ck / str(s))))
    before, seen = sorted(x.name for x in ck.iterdir()), len(evs)
    p, evs = train_alone(cwd, env, 50)
    after = sorted(x.name for x in ck.iterdir())
    err = p.stderr.strip().splitlines()
    stepped = [e for e in evs[seen:] if e["event"] == "step"]
    problems = [] if p.returncode == 1 and before == after and not stepped and err and \
        "can be read" in err[0] else [f"exit {p.returncode}, {len(stepped)} steps, dirs "
                                      f"{before} -> {after}: {err[:2]}"]
    record(1, "trainer alone, every committed step garbled", problems,
           f"exit {p.returncode}: {err[0][:110] if err else ''}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1,2,3,4,5,6,7,8,9,10,11,12,13")
    ap.add_argument("--resize-runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    random.seed(a.seed)
    rows = {int(x) for x in a.rows.split(",")}
    root = Path(tempfile.mkdtemp(prefix="elastix-hunt-"))
    h = Hunt(root)
    t0 = time.monotonic()
    print(f"load before: {os.getloadavg()}", flush=True)
    try:
        if rows & {1, 3, 4, 5, 8}:
            name = "hunt-main"
            cmd = TRAIN.format(steps=100000, ckpt='"$ELASTIX_LOCAL_DATA_DIR/checkpoints"',
                               losses=100, extra="")
            h.create(name, cmd)
            tail = Tail(h.state / name / "events.jsonl")
            try:
                if 5 in rows:
                    row5(h, name, tail)
                    attempt(5, "double kills", double_kills, h, name, tail)
                if 8 in rows:
                    row8(h, name, tail)
                if 1 in rows:
                    row1(h, name, tail)
                if rows & {3, 4}:
                    rows34(h, name, tail, cmd)
            finally:
                h.cli("workload", "delete", name, "--delete-data", check=False)
        if 6 in rows:
            attempt(6, "the resize workload", row6, h, a.resize_runs)
        if rows & {2, 7}:
            attempt(7, "the chaos workloads", row7_and_2, h)
        if 2 in rows:
            attempt(2, "the trainer alone", row2_trainer, h)
        if 1 in rows:
            attempt(1, "the trainer alone", row1_trainer, h)
        cmd = TRAIN.format(steps=100000, ckpt='"$ELASTIX_LOCAL_DATA_DIR/checkpoints"',
                           losses=100, extra="")
        for r, fn, arg in ((9, hunt_more.row9, cmd), (10, hunt_more.row10, cmd),
                           (11, hunt_more.row11, TRAIN), (12, hunt_more.row12, cmd),
                           (13, hunt_more.row13, cmd)):
            if r in rows:
                attempt(r, "the row's workload", fn, h, arg)
    finally:
        print(f"load after: {os.getloadavg()}, {time.monotonic() - t0:.0f} s", flush=True)
        shutil.rmtree(root, ignore_errors=True)
    print("\n| row | fault | runs | findings |\n|---|---|---|---|")
    for r in sorted(VERDICTS):
        bad = [f"{label}: {'; '.join(p)}" for label, p in VERDICTS[r] if p]
        print(f"| {r} | {ROWS[r]} | {len(VERDICTS[r])} | {'; '.join(bad) or 'none'} |")
    return 1 if any(p for v in VERDICTS.values() for _, p in v) else 0


if __name__ == "__main__":
    sys.exit(main())
