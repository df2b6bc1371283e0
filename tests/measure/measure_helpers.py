"""Test helpers: a recorded-style event stream and its log lines, written per docs/events.md,
and the check of a command's bad input (``bad_input``).

``log_line`` is an independent reading of the documented line formats: if the parser and this
disagree, one of them departs from the doc.
"""

from __future__ import annotations

import datetime as dt
import json

T0 = dt.datetime(2026, 11, 29, 9, 49, 30, tzinfo=dt.timezone.utc)


def ts(seconds: float, extra_us: int = 0) -> str:
    """T0 + seconds as an event ``ts`` with microseconds (extra_us tests the truncation)."""
    t = T0 + dt.timedelta(seconds=seconds, microseconds=extra_us)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log_line(rec: dict) -> str | None:
    """The documented log line for one event record."""
    t = rec["ts"][:23] + "Z"
    e, f = rec["event"], lambda k: f"{rec[k]:.3f}"
    body = {
        "run_start": lambda: f"elastix: run start: pid {rec['pid']}, slices {rec['num_slices']}, "
                             f"devices {rec['devices']}",
        "step": lambda: f"completed step: {rec['step']}, seconds: {f('seconds')}, live slice "
                        f"count: {rec['live_slices']}, TFLOP/s/device: 0.010, "
                        f"loss: {rec['loss']:.4f}",
        "checkpoint_save_started": lambda: f"elastix: checkpoint save started: step {rec['step']}",
        "checkpoint_committed": lambda: f"elastix: checkpoint committed: step {rec['step']} "
            f"({rec['bytes']} bytes in {f('seconds')} s, blocking {f('blocking_seconds')} s)",
        "snapshot_taken": lambda: f"elastix: snapshot taken: step {rec['step']} ({rec['bytes']} "
                                  f"bytes in {f('seconds')} s)",
        "restore": lambda: f"elastix: restored step {rec['step']} from {rec['source']} "
                           f"({rec['bytes']} bytes in {f('seconds')} s)",
        "elastic_restored": lambda: f"elastix: restored step {rec['step']} from {rec['source']} "
                                    f"({rec['bytes']} bytes in {f('seconds')} s)",
        "elastic_detected": lambda: f"elastix: slice down, retrying (recovery {rec['recovery']}, "
            f"slices lost {json.dumps(rec['lost_slices'])}, last step {rec['last_step']}): "
            f"{rec['error']}",
        "elastic_cleanup_done": lambda: f"elastix: cleanup done in {f('seconds')} s",
        "elastic_slices_ready": lambda: f"elastix: sufficient slices active: {rec['live_slices']} "
            f">= {rec['required_slices']} (waited {f('seconds')} s)",
        "elastic_first_step": lambda: f"elastix: first step after recovery {rec['recovery']}: "
                                      f"step {rec['step']} in {f('seconds')} s",
        "elastic_resize": lambda: f"elastix: resized mesh (recovery {rec['recovery']}): "
                                  f"{rec['from_slices']} -> {rec['to_slices']} slices",
        "run_end": lambda: f"elastix: run end: {rec['status']} at step {rec['step']} "
                           f"({rec['reason']})",
    }[e]()
    return f"{t} {body}"


def _step(t: float, step: int, seconds: float) -> dict:
    # odd microseconds and extra digits: normalisation must truncate/round them away
    return {"ts": ts(t, 417), "event": "step", "pid": 4242, "step": step,
            "seconds": seconds + 0.00049, "loss": 5.0 - step / 100, "live_slices": 4,
            "tflops_per_device": 0.01, "global_batch": 8}


def recorded_run() -> tuple[list[dict], float]:
    """One run with one in-process recovery, and the kill time (seconds after T0).

    Step 1 (compile) ends at 2.0 s; steps 2..14 every 0.5 s (0.4 s each); checkpoint of step 10
    (blocking 0.010 s); kill at 8.7 s; detected 10.0; cleanup 10.049; slices 12.3; restored step 10
    at 12.5; first step (11) at 14.1 taking 1.6 s; steps 12..20 every 0.5 s; run end at 18.7 s.
    """
    recs = [{"ts": ts(0), "event": "run_start", "pid": 4242, "num_slices": 4, "devices": 8,
             "config": {"d": 64}}]
    recs.append(_step(2.0, 1, 1.5))
    for k in range(2, 15):
        t = 2.0 + (k - 1) * 0.5
        recs.append(_step(t, k, 0.4))
        if k == 10:
            recs.append({"ts": ts(t + 0.001), "event": "checkpoint_save_started", "pid": 4242,
                         "step": 10})
        if k == 12:  # commit lands later, in the background
            recs.append({"ts": ts(7.3), "event": "checkpoint_committed", "pid": 4242, "step": 10,
                         "seconds": 0.799, "bytes": 1234567, "blocking_seconds": 0.0101})
    ev = lambda s, name, **kw: {"ts": ts(s, 999), "event": name, "pid": 4242, **kw}  # noqa: E731
    recs += [
        ev(10.0, "elastic_detected", recovery=1, kind="slice_lost",
           error="DATA_LOSS: worker 2 gone", last_step=14, live_slices=3, lost_slices=[2]),
        ev(10.049, "elastic_cleanup_done", recovery=1, seconds=0.0490004),
        ev(12.3, "elastic_slices_ready", recovery=1, live_slices=4, required_slices=4,
           seconds=2.2512),
        ev(12.5, "elastic_restored", recovery=1, source="checkpoint", step=10, bytes=1234567,
           seconds=0.19996),
    ]
    recs.append(_step(14.1, 11, 1.6))
    recs.append(ev(14.1, "elastic_first_step", recovery=1, step=11, seconds=1.6004))
    for k in range(12, 21):
        recs.append(_step(14.1 + (k - 11) * 0.5, k, 0.4))
    recs.append({"ts": ts(18.7), "event": "run_end", "pid": 4242, "status": "completed",
                 "reason": "reached steps", "step": 20})
    return recs, 8.7


def to_jsonl(recs: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in recs)


def to_log(recs: list[dict]) -> list[str]:
    lines = ["I1129 09:49:29 unrelated absl line", "Traceback (most recent call last):"]
    return lines + [log_line(r) for r in recs]


def bad_input(capsys, argv: list[str], fragment: str, *, hint: bool = True) -> None:
    """``elastix ARGV`` exits 2 with one error line holding ``fragment``, then a hint line (with
    ``hint=False`` the hint may be left out)."""
    from elastix.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert fragment in err[0], err
    if hint:
        assert len(err) == 2 and err[1].startswith("hint: "), err
    else:
        assert len(err) <= 2 and (len(err) == 1 or err[1].startswith("hint: ")), err
