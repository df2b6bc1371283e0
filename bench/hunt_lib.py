"""The fault hunt's machinery (bench/hunt_faults.py): following a trainer's events file,
killing at an offset after an event, and judging a recovery against the events and the
checkpoint directory. Run by hand, never in the suite."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from elastix.backends.local.backend import LocalBackend
from elastix.protocol.timefmt import parse

KEEP = 3  # the trainer's --max-to-keep default
VERDICTS: dict[int, list[tuple[str, list[str]]]] = collections.defaultdict(list)


class Tail:
    """The events of one trainer file, read through one open descriptor (outlives an unlink)."""

    def __init__(self, path: Path, timeout: float = 300) -> None:
        wait(path.exists, timeout, f"{path}")
        self.f = open(path, "rb")  # noqa: SIM115 - held for the run
        self.buf, self.events = b"", []

    def poll(self) -> list[dict]:
        self.buf += self.f.read()
        *lines, self.buf = self.buf.split(b"\n")
        for ln in lines:
            if ln.strip():
                e = json.loads(ln)
                e["t"] = parse(e["ts"]).timestamp()
                self.events.append(e)
        return self.events

    def since(self, i: int, name: str | None = None) -> list[dict]:
        return [e for e in self.poll()[i:] if name is None or e["event"] == name]


def wait(cond, timeout: float, what: str, poll: float = 0.05):
    deadline = time.monotonic() + timeout
    while not (v := cond()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
    return v


class Hunt:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.env = {**os.environ, "ELASTIX_STATE_DIR": str(self.state),
                    "ELASTIX_BACKEND": "local", "KUBECONFIG": str(root / "none")}
        self.backend = LocalBackend(self.state)
        self.garbled: dict[int, int] = {}  # step this hunt damaged -> events seen by then

    def cli(self, *args: str, check: bool = True, env: dict | None = None
            ) -> subprocess.CompletedProcess:
        p = subprocess.run([sys.executable, "-m", "elastix", *args], env={**self.env, **(env or {})},
                           cwd=self.root,
                           capture_output=True, text=True, timeout=600)
        if check and p.returncode != 0:
            raise RuntimeError(f"elastix {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    def create(self, name: str, command: str, *extra: str, replace: bool = False,
               env: dict | None = None):
        # 50 restarts x 2 slices: the trainer's 100 slice losses (the elastic lint checks them).
        args = ["workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
                "--elastic-slices", "2", "--max-slice-restarts", "50", "--max-restarts", "10",
                "--command", command, *extra] + (["--replace"] if replace else [])
        return self.cli(*args, env=env)

    def ckpt(self, name: str) -> Path:
        return self.state / ".data" / name / "checkpoints"


# -- judging ---------------------------------------------------------------------------------------
def session_of(evs: list[dict], i: int) -> list[dict]:
    """Events of the session in force at index ``i``: since the last restore or run start."""
    start = max((j for j, e in enumerate(evs[:i]) if e["event"] in
                 ("run_start", "restore", "elastic_restored")), default=0)
    return evs[start:]


def newest_good(evs: list[dict], i: int, t_kill: float) -> int:
    """The newest saved step completed before ``t_kill`` in the session at index ``i``."""
    sess = session_of(evs, i)
    first = sess[0]
    good = first["step"] if first["event"] in ("restore", "elastic_restored") else 0
    done = {e["step"]: e["t"] for e in sess if e["event"] == "step"}
    saved = {e["step"] for e in sess if e["event"] in ("snapshot_taken", "checkpoint_committed")}
    ok = [s for s in saved if s in done and done[s] < t_kill]
    return max([good, *ok])


def check_storage(evs: list[dict], ckpt: Path, garbled: dict[int, int] | None = None
                  ) -> list[str]:
    """Every reported-committed step is on storage (or retired behind KEEP newer ones), and no
    restore read a step garbled (``garbled``: step -> index of the events by then) and not
    saved again since."""
    garbled = garbled or {}
    present = {int(p.name) for p in ckpt.iterdir() if p.name.isdigit()} if ckpt.exists() else set()
    problems = []
    for s in sorted({e["step"] for e in evs if e["event"] == "checkpoint_committed"}):
        if s not in present and len([p for p in present if p > s]) < KEEP:
            problems.append(f"committed step {s} is gone (on storage: {sorted(present)})")
    for j, e in enumerate(evs):
        if e["event"] in ("restore", "elastic_restored") and e.get("source") == "checkpoint":
            g = garbled.get(e["step"])
            if g is not None and g <= j and not any(
                    x["event"] == "checkpoint_committed" and x["step"] == e["step"]
                    for x in evs[g:j]):
                problems.append(f"damaged step {e['step']} restored")
            if e.get("verified") is False:
                problems.append(f"step {e['step']} restored unverified")
    return problems


def judge_recovery(evs: list[dict], i_kill: int, t_lo: float, t_hi: float, ckpt: Path,
                   garbled=None) -> tuple[list[str], str]:
    """Problems of the recovery after the kill at index ``i_kill`` (kill time in [lo, hi])."""
    det = next(e for e in evs[i_kill:] if e["event"] == "elastic_detected")
    r = det["recovery"]
    res = next(e for e in evs[i_kill:] if e["event"] == "elastic_restored" and e["recovery"] == r)
    lo, hi = newest_good(evs, i_kill, t_lo), newest_good(evs, i_kill, t_hi)
    problems = check_storage(evs, ckpt, garbled)
    if res["step"] < lo:
        problems.append(f"restored {res['step']} < {lo}, the newest save before the kill")
    if res["step"] > hi:
        problems.append(f"restored {res['step']}, completed after the kill (newest good {hi})")
    if det["last_step"] < res["step"]:
        problems.append(f"last_step {det['last_step']} < restored {res['step']}")
    return problems, (f"restored {res['step']} from {res['source']} (good {lo}"
                      + (f"-{hi}" if hi != lo else "") + f"), last step {det['last_step']}")


def record(row: int, label: str, problems: list[str], note: str = "") -> None:
    VERDICTS[row].append((label, problems))
    mark = "ok  " if not problems else "FAIL"
    print(f"[row {row}] {mark} {label}: {note}" + (f" -- {'; '.join(problems)}" if problems
                                                  else ""), flush=True)


def attempt(row: int, label: str, fn, *args) -> None:
    """Run one scenario; a timeout or a crash of it is that run's verdict, not the hunt's end."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - recorded as a failed run
        record(row, label, [f"{type(e).__name__}: {e}"[:300]])


def stepping(tail: Tail) -> bool:
    """Stepping after a save in the newest run, and no recovery under way."""
    evs = tail.poll()
    i = max((j for j, e in enumerate(evs) if e["event"] == "run_start"), default=None)
    if i is None:
        return False
    run = evs[i:]
    # the newest recovery has had its first step (one cut short by a second loss never does)
    det = max((j for j, e in enumerate(run) if e["event"] == "elastic_detected"), default=None)
    if det is not None and not any(e["event"] == "elastic_first_step" for e in run[det:]):
        return False
    saved = [j for j, e in enumerate(run) if e["event"] in ("snapshot_taken",
                                                             "checkpoint_committed", "restore")]
    return bool(saved) and any(e["event"] == "step" for e in run[saved[0]:])


def at_event(tail: Tail, anchor: str, offset: float, when=None, start: int | None = None
             ) -> int:
    """Wait for a new ``anchor`` event (``when(e)`` true; after index ``start``, else after
    the run is stepping), then spin ``offset`` seconds. Returns the anchor's index."""
    if start is None:
        wait(lambda: stepping(tail), 300, "stepping")
        start = len(tail.poll())

    def hit():
        for j, e in enumerate(tail.poll()[start:], start):
            if e["event"] == anchor and (when is None or when(e)):
                return j + 1
        return None

    j = wait(hit, 120, f"a {anchor}", poll=0.0005) - 1
    end = time.perf_counter() + offset
    while time.perf_counter() < end:
        pass
    return j


def kill_at(h: Hunt, name: str, tail: Tail, anchor: str, offset: float, when=None,
            slice_: int | None = None, start: int | None = None) -> tuple[int, float, float]:
    """``at_event``, then SIGKILL a slice host (in process: the CLI's start-up would swamp a
    millisecond offset). Returns (index of the anchor, kill time, measured offset from the
    anchor's time)."""
    j = at_event(tail, anchor, offset, when, start)
    rec = h.backend.kill_worker(name, slice=slice_)
    t = rec.time.timestamp()
    return j, t, t - tail.events[j]["t"]


def flip(path: Path, nbytes: int) -> None:
    size = path.stat().st_size
    at = max(0, size // 2 - nbytes // 2)
    with open(path, "r+b") as f:
        f.seek(at)
        chunk = f.read(min(nbytes, size))
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in chunk))


def files_of(step_dir: Path) -> list[Path]:
    return sorted((p for p in step_dir.rglob("*") if p.is_file() and p.stat().st_size > 0
                   and not p.name.startswith("elastix-manifest")), key=lambda p: p.stat().st_size)


def train_alone(cwd: Path, env: dict, steps: int) -> tuple[subprocess.CompletedProcess, list]:
    p = subprocess.run([sys.executable, "-m", "elastix_trainer", "--preset", "tiny", "--steps",
                        str(steps), "--checkpoint-dir", "ck", "--checkpoint-period", "10",
                        "--events-file", "ev.jsonl"], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=900)
    evs = [json.loads(x) for x in (cwd / "ev.jsonl").read_text().splitlines() if x.strip()]
    return p, evs
