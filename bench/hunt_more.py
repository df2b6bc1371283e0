"""Rows 9-13 of the fault hunt (bench/hunt_faults.py): faults aimed with ``elastix chaos`` as
a user would (two slices lost close together, a kill at start-up or the first compile), a kill
at the final save, ``create --replace`` racing a kill, and ``logs -f`` / ``status --watch``
across a delete and a re-create. Run by hand, never in the suite."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from hunt_lib import Hunt, Tail, check_storage, judge_recovery, kill_at, newest_good, record, stepping, wait

from elastix.backends.local.state import proc_matches, read_procs
from elastix.protocol.timefmt import parse


def _popen(h: Hunt, *args: str, out=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "elastix", *args], env=h.env, cwd=h.root,
                            stdout=out, stderr=subprocess.PIPE, text=True)


def _on_disk(h: Hunt, name: str) -> list[int]:
    ck = h.ckpt(name)
    return sorted(int(p.name) for p in ck.iterdir() if p.name.isdigit()) if ck.exists() else []


def _kill_times(report: dict) -> list[float]:
    """Kill times of a ``chaos`` JSON report (a measured report, or kill-worker's plain record)."""
    if "kills" not in report:
        return [parse(report["time"]).timestamp()] if "time" in report else []
    return sorted(parse(k["time"]).timestamp() for m in report["kills"] for k in m["kills"])


@contextlib.contextmanager
def _verdict(row: int, label: str) -> Iterator[None]:
    """The block is one case of ``row``: what it raises is that case's verdict, recorded, and
    the hunt goes on to the next case."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - the run's verdict
        record(row, label, [f"{type(e).__name__}: {e}"[:300]])


def _gone(h: Hunt, name: str) -> None:
    h.cli("workload", "delete", name, "--delete-data", check=False)
    h.cli("workload", "delete", name, "--delete-data", check=False)  # its data, if kept


# -- row 9: two slices lost close together ---------------------------------------------------------
def row9(h: Hunt, cmd: str) -> None:
    name = "hunt-two"
    h.create(name, cmd)
    tail = Tail(h.state / name / "events.jsonl")
    try:
        for spread in ("0s", "0.1s", "0.3s"):
            with _verdict(9, f"--spread {spread}"):
                two_losses(h, name, tail, spread)
    finally:
        _gone(h, name)


def two_losses(h: Hunt, name: str, tail: Tail, spread: str) -> None:
    wait(lambda: stepping(tail), 300, "stepping")
    n = len(tail.poll())
    p = h.cli("chaos", "run", name, "--count", "2", "--spread", spread, "--kills", "1",
              "--timeout", "3m", "-o", "json", check=False)
    report = json.loads(p.stdout)
    times = _kill_times(report)
    problems = [] if p.returncode == 0 else [f"chaos run exit {p.returncode}: "
                                             f"{p.stderr.strip()[-150:]}"]
    if len(times) != 2:
        return record(9, f"--spread {spread}", problems + [f"{len(times)} kill times reported"])
    wait(lambda: tail.since(n, "elastic_first_step"), 300, "the recovery")
    wait(lambda: stepping(tail), 300, "stepping again")
    evs = tail.poll()
    t1 = times[0]
    want = newest_good(evs, n, t1)
    rec = [e for e in evs[n:] if e["event"] == "elastic_restored"]
    problems += check_storage(evs, h.ckpt(name))
    first, note = judge_recovery(evs, n, t1 - 0.002, t1 + 0.002, h.ckpt(name))
    problems += [x for x in first if x not in problems]
    if rec and rec[-1]["step"] != want:
        problems.append(f"the last recovery restored {rec[-1]['step']}, want {want}")
    m = report["kills"][0]
    also = (m.get("recovery") or {}).get("also_killed") or []
    named = len(m["kills"]) + len(also)
    if len(m["kills"]) < 2 and not also:
        problems.append(f"the measurement names {named} kill(s): {m['kills']}")
    record(9, f"--spread {spread}", problems,
           f"kills {times[1] - t1:.3f} s apart, in kills {len(m['kills'])}, also_killed "
           f"{[a['phase'] for a in also]}; recoveries restored "
           f"{[(e['step'], e['source']) for e in rec]} (good {want}); {note}")


# -- row 10: a kill at start-up or during the first compile ----------------------------------------
def row10(h: Hunt, cmd: str) -> None:
    for during in ("compile", "startup"):
        name = f"hunt-early-{during}"
        try:
            with _verdict(10, f"--during {during}"):
                early_kill(h, name, cmd, during)
        finally:
            _gone(h, name)


def early_kill(h: Hunt, name: str, cmd: str, during: str) -> None:
    h.create(name, cmd)
    k = _popen(h, "chaos", "kill-worker", name, "--during", during, "--timeout", "3m",
               "-o", "json")
    out, err = k.communicate(timeout=300)
    report = json.loads(out) if out.strip().startswith("{") else {}
    times = _kill_times(report)
    problems = [] if k.returncode == 0 else [f"kill-worker exit {k.returncode}: "
                                             f"{err.strip()[-200:]}"]
    if not times:
        return record(10, f"--during {during}", problems + ["no kill time reported"])
    t = times[0]
    tail = Tail(h.state / name / "events.jsonl")
    # recovered: a commit after the kill (so every state up to it is judged)
    wait(lambda: [e for e in tail.poll() if e["event"] == "checkpoint_committed"
                  and e["t"] > t], 300, "a commit after the kill")
    evs = tail.poll()
    i = sum(1 for e in evs if e["t"] < t)
    want = newest_good(evs, i, t)
    restores = [e for e in evs[i:] if e["event"] in ("restore", "elastic_restored")]
    problems += check_storage(evs, h.ckpt(name))
    bad = [e["step"] for e in restores if e["step"] != want]
    if bad:
        problems.append(f"restored {bad}, want {want} (the newest saved before the kill)")
    first = next((e for e in evs[i:] if e["event"] == "step"), None)
    if first and first["step"] != (restores[0]["step"] if restores else want) + 1:
        problems.append(f"first step after the kill is {first['step']}")
    aim = (report.get("kills") or [{}])[0].get("aim") or {}
    before = [e["event"] for e in evs[:i]][-3:]
    record(10, f"--during {during}", problems,
           f"landed {aim.get('offset_seconds')} s into {aim.get('window')} "
           f"(inside {aim.get('inside')}), after {before}; restores "
           f"{[(e['event'], e['step'], e.get('source')) for e in restores]}; first step "
           f"{first and first['step']}")


# -- row 11: a kill during the final save ---------------------------------------------------------
def row11(h: Hunt, train: str) -> None:
    steps = 60
    cmd = train.format(steps=steps, ckpt='"$ELASTIX_LOCAL_DATA_DIR/checkpoints"', losses=100,
                       extra="")
    for anchor, off in (("checkpoint_save_started", 0.0), ("checkpoint_save_started", 0.003),
                        ("checkpoint_committed", 0.0)):
        label = f"{off * 1e3:.0f} ms after the final {anchor}"
        name = "hunt-final"
        try:
            with _verdict(11, label):
                h.create(name, cmd)
                final_save(h, name, steps, anchor, off, label)
        finally:
            _gone(h, name)


def final_save(h: Hunt, name: str, steps: int, anchor: str, off: float, label: str) -> None:
    tail = Tail(h.state / name / "events.jsonl")
    i, t, m = kill_at(h, name, tail, anchor, off, lambda e: e["step"] == steps, start=0)
    wait(lambda: tail.since(i, "run_end"), 300, "run_end")
    time.sleep(1)  # a restarted head's events, if any
    evs = tail.poll()
    ends = [e for e in evs if e["event"] == "run_end"]
    on_disk = _on_disk(h, name)
    problems = check_storage(evs, h.ckpt(name))
    for e in ends:
        if e["status"] == "completed" and (e["step"] != steps or steps not in on_disk):
            problems.append(f"run_end completed at {e['step']}, on storage {on_disk[-3:]}")
    note = ""
    if any(e["event"] == "elastic_detected" for e in evs[i:]):
        p2, note = judge_recovery(evs, i, t, t, h.ckpt(name))
        problems += p2
    record(11, label, problems, f"kill {m * 1e3:.1f} ms after {anchor} {steps}; run_end "
           f"{[(e['status'], e['step']) for e in ends]}; on storage {on_disk[-3:]}; {note}")


# -- row 12: create --replace racing a kill --------------------------------------------------------
def row12(h: Hunt, cmd: str) -> None:
    name = "hunt-race"
    h.create(name, cmd)
    try:
        for first in ("kill", "replace"):
            with _verdict(12, f"{first} started first"):
                race(h, name, cmd, first)
    finally:
        _gone(h, name)


def race(h: Hunt, name: str, cmd: str, first: str) -> None:
    d = h.state / name
    tail = Tail(d / "events.jsonl")
    wait(lambda: stepping(tail), 300, "stepping")
    old = read_procs(d)
    n = len(tail.poll())
    kill = ["chaos", "kill-worker", name, "-o", "json"]
    # As Hunt.create: 50 restarts x 2 slices, the trainer's 100 losses (the elastic lint).
    rep = ["workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
           "--elastic-slices", "2", "--max-slice-restarts", "50", "--max-restarts", "10",
           "--command", cmd, "--replace"]
    a, b = (kill, rep) if first == "kill" else (rep, kill)
    pa = _popen(h, *a)
    pb = _popen(h, *b)
    (oa, ea), (ob, eb) = pa.communicate(timeout=300), pb.communicate(timeout=300)
    (pk, ok, ek), (pr, orr, er) = ((pa, oa, ea), (pb, ob, eb)) if first == "kill" else \
        ((pb, ob, eb), (pa, oa, ea))
    problems = [] if pr.returncode == 0 else [f"create --replace exit {pr.returncode}: "
                                              f"{er.strip()[-200:]}"]
    if "Traceback" in ek + er:
        problems.append("a traceback: " + (ek + er).strip()[-200:])
    wait(lambda: tail.since(n, "run_end"), 60, "the old head's run_end")
    evs = tail.poll()
    end = tail.since(n, "run_end")[-1]
    run = evs[max(j for j, e in enumerate(evs) if e["event"] == "run_start"):]
    # its newest commit, or the step it restored from storage (a step of the run before it)
    newest = max((e["step"] for e in run if e["event"] == "checkpoint_committed"
                  or (e["event"] == "restore" and e.get("source") == "checkpoint")),
                 default=None)
    problems += check_storage(evs, h.ckpt(name))
    new = Tail(d / "events.jsonl")
    res = wait(lambda: [e for e in new.poll() if e["event"] == "restore"], 300,
               "the new run's restore")[0]
    if res["step"] != newest:
        problems.append(f"the new run restored {res['step']} ({res['source']}), the old run's "
                        f"newest commit is {newest}")
    stray = [f"{r.get('role')} {r['pid']}" for r in old
             if proc_matches(r["pid"], r.get("create_time"))]
    if stray:
        problems.append(f"the old run's processes live on: {stray}")
    listed = json.loads(h.cli("workload", "list", "-o", "json").stdout)
    rows = listed if isinstance(listed, list) else listed.get("items", listed.get("workloads", []))
    if len([w for w in rows if w.get("name") == name]) != 1:
        problems.append(f"workload list: {[w.get('name') for w in rows]}")
    if pk.returncode == 0:
        kr = json.loads(ok)
        hit_old = any(r["pid"] == kr.get("pid") for r in old)
        said = f"killed {kr.get('pod')} pid {kr.get('pid')} of the {'old' if hit_old else 'new'} run"
        t = parse(kr["time"]).timestamp()
        # a kill of the old run: its stop must commit the newest state saved before the kill
        good = newest_good(evs, n, t) if hit_old and t < end["t"] else end["step"]
        if newest != good:
            problems.append(f"the old run's newest commit {newest}, the newest state saved "
                            f"before the kill (or its final step) {good}")
    else:
        said = f"kill-worker exit {pk.returncode}: {ek.strip()[-140:]}"
        if len(ek.strip().splitlines()) > 3:
            problems.append("kill-worker's refusal is not one clear line")
    detected = [e["recovery"] for e in evs[n:] if e["event"] == "elastic_detected"]
    record(12, f"{first} started first", problems,
           f"{said}; old run: {len(detected)} recoveries, run_end {end['status']} step "
           f"{end['step']} ({end['reason'][-60:]}), newest commit {newest}; new run restored {res['step']} "
           f"({res['source']})")


# -- row 13: logs -f and status --watch across delete and re-create --------------------------------
def row13(h: Hunt, cmd: str) -> None:
    name = "hunt-follow"
    try:
        with _verdict(13, "logs -f / status --watch"):
            follow(h, name, cmd)
    finally:
        _gone(h, name)


def follow(h: Hunt, name: str, cmd: str) -> None:
    h.create(name, cmd)
    tail = Tail(h.state / name / "events.jsonl")
    wait(lambda: stepping(tail), 300, "stepping")
    lf, wf = h.root / "logs-f.out", h.root / "watch.out"
    with open(lf, "w") as f1, open(wf, "w") as f2:
        logs = _popen(h, "logs", name, "-f", out=f1)
        watch = _popen(h, "workload", "status", name, "--watch", "--interval", "0.5s", out=f2)
    time.sleep(3)
    h.cli("workload", "delete", name)
    at_delete = lf.stat().st_size
    time.sleep(3)
    logs_after_delete = logs.poll()
    h.create(name, cmd)
    new = Tail(h.state / name / "events.jsonl")
    wait(lambda: stepping(new), 300, "the new run stepping")
    new_head = sorted((h.state / name / "logs").glob("head-*.log"))
    new_lines = {ln for p in new_head for ln in p.read_text(errors="replace").splitlines()
                 if ln.strip()}
    t0 = time.monotonic()

    def settled():
        got = lf.read_text(errors="replace")[at_delete:].splitlines()
        return logs.poll() is not None or any(ln in new_lines for ln in got)

    try:
        wait(settled, 60, "logs -f to end or follow the new run")
    except TimeoutError:
        pass
    waited = time.monotonic() - t0
    logs_rc = logs.poll()  # before any Ctrl-C
    got = lf.read_text(errors="replace")[at_delete:].splitlines()
    follows = any(ln in new_lines for ln in got)
    problems = []
    verdicts = []
    for label, p, out in (("logs -f", logs, lf), ("status --watch", watch, wf)):
        rc = p.poll()
        if rc is None:
            p.send_signal(signal.SIGINT)  # Ctrl-C, as a user would
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                problems.append(f"{label} ignored Ctrl-C")
        err = p.stderr.read()
        if "Traceback" in err:
            problems.append(f"{label}: a traceback: {err.strip()[-200:]}")
        text = out.read_text(errors="replace")
        how = f"ended {rc}" if rc is not None else f"running, Ctrl-C: exit {p.returncode}"
        verdicts.append(f"{label}: {how}, stderr {err.strip()[:90]!r}, "
                        f"{len(text.splitlines())} lines")
    if logs_rc is None and not follows:
        problems.append(f"logs -f neither ended nor followed the new run in {waited:.0f} s")
    watch_text = wf.read_text(errors="replace")
    after = "running" if logs_after_delete is None else f"exited {logs_after_delete}"
    record(13, "logs -f / status --watch across delete and re-create", problems,
           f"logs -f 3 s after delete: {after}, follows the new run: {follows} "
           f"({waited:.0f} s); " + "; ".join(verdicts)
           + f"; watch's last line {watch_text.strip().splitlines()[-1:]}")
