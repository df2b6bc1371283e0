"""Bad input to chaos, goodput and logs: one line, a hint, exit 2, before anything is done.

Each case runs against an empty local state directory: a check made after the workload lookup
would say "not found" (exit 1) instead, so passing also proves the check comes first, before
any kill.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from elastix.main import main

HUGE = "9" * 400  # float() of it is inf
HANG_ON_GKE = "--fault hang cannot be delivered on the gke backend"


def _bytes(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda tmp: (tmp / name).write_bytes(data)


def _run_file(flag: str, name: str) -> Callable[..., tuple]:
    """A builder of ``CASES`` rows for ``chaos run w --FLAG {tmp}/NAME *EXTRA``, the file
    written with ``body`` first; the row's id is ``run-FLAG-END``, its workload ``w`` unless
    ``workload`` says."""

    def row(end: str, body: bytes, fragment: str, *extra: str, workload: str = "w") -> tuple:
        return (f"run-{flag}-{end}", ["chaos", "run", workload, f"--{flag}", f"{{tmp}}/{name}",
                                      *extra], _bytes(name, body), 2, fragment)

    return row


def _unreadable(flag: str) -> list[tuple]:
    """The ``CASES`` rows for ``chaos run w --FLAG`` given a missing file, then a device: a user
    file, read as every one is."""
    argv = ["chaos", "run", "w", f"--{flag}"]
    return [(f"run-{flag}-missing", [*argv, "{tmp}/none.yaml"], None, 2,
             f"cannot read {flag} '{{tmp}}/none.yaml'"),
            (f"run-{flag}-device", [*argv, "/dev/zero"], None, 2,
             f"{flag} '/dev/zero' is not a regular file")]


_schedule = _run_file("schedule", "s.yaml")
_plan = _run_file("plan", "p.yaml")


def _backwards(tmp: Path) -> None:
    """Steps 1-4 one second apart, then the clock steps back a minute for steps 5-6."""
    def step(n: int, t: str) -> str:
        return json.dumps({"ts": f"2026-11-29T09:{t}.000000Z", "event": "step", "pid": 1,
                           "step": n, "seconds": 0.5})
    times = ["50:01", "50:02", "50:03", "50:04", "49:05", "49:06"]
    (tmp / "back.jsonl").write_text("".join(step(i, t) + "\n" for i, t in enumerate(times, 1)))


# (id, argv ({tmp} is the test's directory), setup, expected exit code, message fragment)
CASES = [
    ("run-interval-inf", ["chaos", "run", "w", "--interval", HUGE], None, 2,
     "--interval '999"),
    ("run-interval-nan", ["chaos", "run", "w", "--interval", "nan"], None, 2,
     "--interval 'nan' is not a duration"),
    ("run-interval-negative", ["chaos", "run", "w", "--interval", "-5s"], None, 2,
     "is not a duration"),
    ("run-interval-too-long", ["chaos", "run", "w", "--interval", "1000000d"], None, 2,
     "--interval '1000000d' is out of range: 0 or more, at most 30d"),
    ("run-timeout-inf", ["chaos", "run", "w", "--timeout", HUGE], None, 2,
     "is out of range: more than 0, at most 30d"),
    ("run-timeout-zero", ["chaos", "run", "w", "--timeout", "0"], None, 2,
     "--timeout '0' is out of range: more than 0"),
    ("run-max-downtime-inf", ["chaos", "run", "w", "--max-downtime", "inf"], None, 2,
     "--max-downtime 'inf' is not a duration"),
    ("run-max-downtime-zero", ["chaos", "run", "w", "--max-downtime", "0s"], None, 2,
     "--max-downtime '0s' is out of range"),
    ("run-window-zero", ["chaos", "run", "w", "--window", "0"], None, 2,
     "--window '0' is below the minimum of 1 s"),
    ("run-window-negative", ["chaos", "run", "w", "--window", "-1"], None, 2,
     "--window '-1' is not a duration"),
    ("run-window-nan", ["chaos", "run", "w", "--window", "nan"], None, 2,
     "--window 'nan' is not a duration"),
    ("run-window-inf", ["chaos", "run", "w", "--window", "inf"], None, 2,
     "--window 'inf' is not a duration"),
    ("run-kills-zero", ["chaos", "run", "w", "--kills", "0"], None, 2,
     "--kills 0 is out of range: 1 or more"),
    ("run-max-steps-lost-negative", ["chaos", "run", "w", "--max-steps-lost", "-1"], None, 2,
     "--max-steps-lost -1 is out of range: 0 or more"),
    ("run-mode", ["chaos", "run", "w", "--mode", "all"], None, 2,
     "--mode 'all' is not random, slice, host"),
    ("run-output", ["chaos", "run", "w", "-o", "yaml"], None, 2, "--output 'yaml'"),
    ("run-plot-not-png", ["chaos", "run", "w", "--plot", "{tmp}/g.svg"], None, 2,
     "only PNG is written"),
    ("run-plot-no-dir", ["chaos", "run", "w", "--plot", "{tmp}/no/g.png"], None, 2,
     "cannot write {tmp}/no/g.png: no directory"),
    ("run-plot-is-dir", ["chaos", "run", "w", "--plot", "{tmp}/d.png"],
     lambda tmp: (tmp / "d.png").mkdir(), 2, "it is a directory"),
    ("run-timeline-not-png", ["chaos", "run", "w", "--timeline", "{tmp}/t.pdf"], None, 2,
     "--timeline {tmp}/t.pdf: only PNG is written"),
    ("run-timeline-no-dir", ["chaos", "run", "w", "--timeline", "{tmp}/no/t.png"], None, 2,
     "cannot write {tmp}/no/t.png: no directory"),
    ("run-loss-tolerance-negative", ["chaos", "run", "w", "--verify", "--loss-tolerance", "-1"],
     None, 2, "--loss-tolerance -1 is out of range: 0 or more, finite"),
    ("run-loss-tolerance-nan", ["chaos", "run", "w", "--verify", "--loss-tolerance", "nan"],
     None, 2, "--loss-tolerance nan is out of range"),
    ("run-loss-tolerance-alone", ["chaos", "run", "w", "--loss-tolerance", "1e-6"], None, 2,
     "--loss-tolerance is for --verify"),
    ("run-keep-reference-alone", ["chaos", "run", "w", "--keep-reference"], None, 2,
     "--keep-reference is for --verify"),
    ("run-keep-reference-given", ["chaos", "run", "w", "--reference", "r", "--keep-reference"],
     None, 2, "--keep-reference is for the reference --verify makes: --reference r is never "
              "deleted"),
    ("run-reference-itself", ["chaos", "run", "w", "--reference", "w"], None, 2,
     "--reference w is the workload under test"),
    ("run-reference-missing", ["chaos", "run", "w", "--verify", "--reference", "nope"], None, 2,
     "--reference nope: no such workload ({tmp}/state)"),
    ("kill-timeout-inf", ["chaos", "kill-worker", "w", "--measure", "--timeout", HUGE], None, 2,
     "is out of range: more than 0, at most 30d"),
    ("kill-timeout-nan", ["chaos", "kill-worker", "w", "--measure", "--timeout", "nan"], None,
     2, "--timeout 'nan' is not a duration"),
    ("kill-timeout-zero", ["chaos", "kill-worker", "w", "--measure", "--timeout", "0"], None,
     2, "--timeout '0' is out of range"),
    ("kill-plot-no-dir", ["chaos", "kill-worker", "w", "--plot", "{tmp}/no/r.png"], None, 2,
     "no directory"),
    ("run-junit-no-dir", ["chaos", "run", "w", "--junit", "{tmp}/no/c.xml"], None, 2,
     "--junit '{tmp}/no/c.xml': folder '{tmp}/no' does not exist"),
    ("run-junit-is-dir", ["chaos", "run", "w", "--junit", "{tmp}"], None, 2,
     "--junit '{tmp}' is a directory, not a file"),
    ("run-summary-no-dir", ["chaos", "run", "w", "--summary", "{tmp}/no/s.md"], None, 2,
     "--summary '{tmp}/no/s.md': folder '{tmp}/no' does not exist"),
    ("run-max-downtime-word", ["chaos", "run", "w", "--max-downtime", "soon"], None, 2,
     "--max-downtime 'soon' is not a duration"),
    ("kill-junit-no-dir", ["chaos", "kill-worker", "w", "--junit", "{tmp}/no/c.xml"], None, 2,
     "folder '{tmp}/no' does not exist"),
    ("kill-summary-is-dir", ["chaos", "kill-worker", "w", "--measure", "--summary", "{tmp}"],
     None, 2, "--summary '{tmp}' is a directory, not a file"),
    ("kill-max-downtime-word", ["chaos", "kill-worker", "w", "--max-downtime", "1x"], None, 2,
     "--max-downtime '1x' is not a duration"),
    ("kill-max-downtime-zero", ["chaos", "kill-worker", "w", "--max-downtime", "0ms"], None,
     2, "--max-downtime '0ms' is out of range"),
    ("kill-max-steps-lost-negative", ["chaos", "kill-worker", "w", "--max-steps-lost", "-2"],
     None, 2, "--max-steps-lost -2 is out of range: 0 or more"),
    ("kill-bound-dry-run", ["chaos", "kill-worker", "w", "--max-steps-lost", "1", "--dry-run"],
     None, 2, "--max-steps-lost cannot be combined with --dry-run"),
    # Issue 35: the fault, its aim and its schedule are checked before anything is killed.
    ("kill-fault-unknown", ["chaos", "kill-worker", "w", "--fault", "crash"], None, 2,
     "--fault 'crash' is not one of kill, term, hang, slice, head"),
    ("kill-grace-not-term", ["chaos", "kill-worker", "w", "--grace", "5s"], None, 2,
     "--grace is for --fault term, not kill"),
    ("kill-for-not-hang", ["chaos", "kill-worker", "w", "--fault", "term", "--for", "5s"],
     None, 2, "--for is for --fault hang, not term"),
    ("kill-grace-word", ["chaos", "kill-worker", "w", "--fault", "term", "--grace", "soon"],
     None, 2, "--grace 'soon' is not a duration"),
    ("kill-for-zero", ["chaos", "kill-worker", "w", "--fault", "hang", "--for", "0"], None, 2,
     "--for '0' is out of range: more than 0"),
    ("kill-during-unknown", ["chaos", "kill-worker", "w", "--during", "lunch"], None, 2,
     "--during 'lunch' is not a moment: save, snapshot, restore, recovery, startup, compile"),
    ("kill-at-step-zero", ["chaos", "kill-worker", "w", "--at-step", "0"], None, 2,
     "--at-step 0 is out of range: 1 or more"),
    ("kill-two-aims", ["chaos", "kill-worker", "w", "--at-step", "5", "--during", "save"],
     None, 2, "--at-step and --during cannot be combined"),
    ("kill-aim-dry-run", ["chaos", "kill-worker", "w", "--during", "save", "--dry-run"], None,
     2, "--during cannot be combined with --dry-run"),
    ("kill-head-pinned", ["chaos", "kill-worker", "w", "--fault", "head", "--slice", "0"],
     None, 2, "--fault head takes no --slice or --host"),
    ("kill-slice-host", ["chaos", "kill-worker", "w", "--fault", "slice", "--slice", "0",
                         "--host", "1"], None, 2, "--fault slice takes every host of a slice"),
    ("kill-hang-on-gke", ["chaos", "kill-worker", "x", "--fault", "hang", "--backend", "gke"],
     None, 2, HANG_ON_GKE),
    ("run-fault-unknown", ["chaos", "run", "w", "--fault", "segv"], None, 2,
     "--fault 'segv' is not one of"),
    ("run-count-zero", ["chaos", "run", "w", "--count", "0"], None, 2,
     "--count 0 is out of range: 1 or more"),
    ("run-spread-word", ["chaos", "run", "w", "--count", "2", "--spread", "later"], None, 2,
     "--spread 'later' is not a duration"),
    ("run-at-step-decreasing", ["chaos", "run", "w", "--at-step", "40,30"], None, 2,
     "--at-step '40,30': steps must be 1 or more and increasing"),
    ("run-at-step-word", ["chaos", "run", "w", "--at-step", "forty"], None, 2,
     "--at-step 'forty' is not a step or a list of steps"),
    ("run-at-step-kills", ["chaos", "run", "w", "--at-step", "40,80", "--kills", "3"], None, 2,
     "--kills 3 but --at-step names 2 steps"),
    ("run-two-timings", ["chaos", "run", "w", "--mtbf", "5m", "--during", "save"], None, 2,
     "--during and --mtbf cannot be combined"),
    ("run-mtbf-interval", ["chaos", "run", "w", "--mtbf", "5m", "--interval", "1m"], None, 2,
     "--interval and --mtbf cannot be combined"),
    ("run-mtbf-zero", ["chaos", "run", "w", "--mtbf", "0"], None, 2,
     "--mtbf '0' is out of range: more than 0"),
    ("run-startup-kills", ["chaos", "run", "w", "--during", "startup", "--kills", "2"], None,
     2, "--during startup aims at the run's start, which comes once"),
    *_unreadable("schedule"),
    _schedule("not-list", b"at: 30s\n", "schedule '{tmp}/s.yaml' is not a list of faults"),
    _schedule("not-yaml", b"- {at: [\n", "schedule '{tmp}/s.yaml' is not valid YAML at line 2"),
    _schedule("deep", b"[" * 5000 + b"]" * 5000, "schedule '{tmp}/s.yaml' is nested too deeply"),
    _schedule("fault", b"- {at: 30s}\n- {at: 1m, fault: meteor}\n",
              "schedule '{tmp}/s.yaml', fault 2: fault 'meteor' is not one of"),
    _schedule("no-at", b"- {fault: kill}\n", "fault 1 has no 'at'"),
    _schedule("bad-at", b"- {at: yesterday}\n", "fault 1: at 'yesterday' is not a duration"),
    _schedule("key", b"- {at: 1s, node: n1}\n", "fault 1: unknown key 'node'"),
    _schedule("host-alone", b"- {at: 1s, host: 1}\n", "fault 1: host needs slice"),
    _schedule("grace-kill", b"- {at: 1s, grace: 5s}\n", "grace is for fault term only"),
    _schedule("kills", b"- {at: 1s}\n", "--kills and --schedule cannot be combined", "--kills", "2"),
    _schedule("hang-gke", b"- {at: 1s}\n- {at: 2s, fault: hang}\n", HANG_ON_GKE,
              "--backend", "gke", workload="x"),
    # Issue 50: a plan file is read as every user file is, and says its rounds alone.
    *_unreadable("plan"),
    _plan("not-yaml", b"rounds: [\n", "plan '{tmp}/p.yaml' is not valid YAML at line 2"),
    _plan("deep", b"rounds: " + b"[" * 5000 + b"]" * 5000, "plan '{tmp}/p.yaml' is nested too deeply"),
    _plan("round-key", b"rounds:\n- {at: 1}\n- {at: 2, node: n1}\n",
          "plan '{tmp}/p.yaml', round 2: unknown key 'node'"),
    _plan("kills", b"rounds: [{at: 1}]\n", "--plan and --kills cannot be combined", "--kills", "2"),
    _plan("hang-gke", b"rounds: [{at: 1}, {fault: hang, at: 2}]\n", HANG_ON_GKE,
          "--backend", "gke", workload="x"),
    ("run-yaml-not-dry-run", ["chaos", "run", "w", "-o", "yaml"], None, 2,
     "--output 'yaml' is not table or json"),
    ("run-min-goodput-over", ["chaos", "run", "w", "--min-goodput", "120%"], None, 2,
     "--min-goodput '120%' is not a goodput: more than 0, at most 100%"),
    ("run-min-goodput-ambiguous", ["chaos", "run", "w", "--min-goodput", "95"], None, 2,
     "--min-goodput '95' is ambiguous: a fraction is at most 1"),
    ("run-min-goodput-word", ["chaos", "run", "w", "--min-goodput", "high"], None, 2,
     "--min-goodput 'high' is not a goodput"),
    ("run-min-goodput-zero", ["chaos", "run", "w", "--min-goodput", "0%"], None, 2,
     "--min-goodput '0%' is not a goodput"),
    ("wait-for-unknown", ["workload", "wait", "w", "--for", "ready"], None, 2,
     "--for 'ready' is not running, stepping, completed, deleted"),
    ("wait-for-missing", ["workload", "wait", "w"], None, 2, "missing --for"),
    ("wait-timeout-word", ["workload", "wait", "w", "--for", "running", "--timeout", "long"],
     None, 2, "--timeout 'long' is not a duration"),
    ("wait-timeout-nan", ["workload", "wait", "w", "--for", "running", "--timeout", "nan"],
     None, 2, "--timeout 'nan' is not a duration"),
    ("create-smoke-command", ["workload", "create", "w", "--tpu-type", "v5litepod-8",
                              "--smoke", "--command", "true"], None, 2,
     "--smoke sizes the default job: it cannot be combined with --command"),
    ("create-smoke-spec-command", ["workload", "create", "w", "--tpu-type", "v5litepod-8",
                                   "--smoke", "--spec", "{tmp}/s.yaml"],
     _bytes("s.yaml", b"command: echo hi\n"), 2,
     "--smoke sizes the default job, but the spec file {tmp}/s.yaml sets command"),
    ("create-smoke-on-gke", ["workload", "create", "x", "--tpu-type", "v5litepod-8", "--smoke",
                             "--backend", "gke"], None, 2,
     "--smoke sizes the local backend's default job; the gke backend has none"),
    ("goodput-window-zero", ["workload", "goodput", "w", "--window", "0"], None, 2,
     "--window '0' is below the minimum of 1 s"),
    ("goodput-window-nan", ["workload", "goodput", "w", "--window", "nan"], None, 2,
     "--window 'nan' is not a duration"),
    ("goodput-window-inf", ["workload", "goodput", "w", "--window", "inf"], None, 2,
     "--window 'inf' is not a duration"),
    ("goodput-plot-no-dir", ["workload", "goodput", "w", "--plot", "{tmp}/no/g.png"], None, 2,
     "no directory"),
    ("goodput-events-not-utf8", ["workload", "goodput", "--events", "{tmp}/bad.jsonl"],
     _bytes("bad.jsonl", b"\xff\xfe{\x00}\x00\n"), 2,
     "events file '{tmp}/bad.jsonl' is not UTF-8 text (byte 0)"),
    ("goodput-events-malformed", ["workload", "goodput", "--events", "{tmp}/m.jsonl"],
     _bytes("m.jsonl", b'{"ts": 1\n\n[1, 2]\nstep 3\n'), 2,
     "events file: 3 of 3 lines unreadable (first: line 1, not JSON)"),
    ("goodput-events-one-torn-line", ["workload", "goodput", "--events", "{tmp}/t.jsonl"],
     _bytes("t.jsonl", b'{"ts": "2026-11-29T09:'), 2, "1 of 1 lines unreadable"),
    ("goodput-log-not-utf8", ["workload", "goodput", "--log", "{tmp}/bad.log"],
     _bytes("bad.log", b"\xff\xfe\x00x\n"), 2, "no trainer events found (log {tmp}/bad.log)"),
    ("goodput-time-backwards", ["workload", "goodput", "--events", "{tmp}/back.jsonl"],
     _backwards, 2, "time goes backwards: event 5 (step at 2026-11-29T09:49:05.000Z) is 59.000 s "
                    "before event 4 (step)"),
    ("logs-since-inf", ["logs", "w", "--since", HUGE], None, 2,
     "is out of range: more than 0, at most 30d"),
    ("logs-since-zero", ["logs", "w", "--since", "0"], None, 2, "--since '0' is out of range"),
    ("logs-since-nan", ["logs", "w", "--since", "nan"], None, 2, "is not a duration"),
    ("logs-tail-negative", ["logs", "w", "--tail", "-2"], None, 2,
     "--tail -2 is out of range: 0 or more, or -1 for every line"),
    ("logs-previous-follow", ["logs", "w", "--previous", "-f"], None, 2,
     "--previous cannot be combined with --follow"),
]


@pytest.mark.parametrize(("argv", "setup", "code", "fragment"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, capsys, argv, setup, code, fragment):
    if setup:
        setup(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    local = ["--backend", "local", "--state-dir", str(tmp_path / "state")]
    own = "--backend" in args or (args[0] == "workload" and "w" not in args)
    assert main(args + ([] if own else local)) == code
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[-1].startswith("hint: "), cap.err
    assert len(lines) == 2, cap.err
    assert fragment.replace("{tmp}", str(tmp_path)) in lines[0], cap.err
    assert cap.out == ""
