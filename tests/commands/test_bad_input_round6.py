"""Inputs that ended in ``unexpected X ... report it`` (exit 1), found by fuzzing every
command's flags and files (issue 59, item 15): each is now one line naming the input, with a
hint, and the exit code of bad input (2), or a normal answer where the input is a fine one.

One row per input: the argv, the files it needs, the exit code and a fragment of the line it
must print. Rows run the real entry point in process (``elastix.main.main``); the rows that
hung or ran out of memory before their fix (a FIFO or ``/dev/zero`` named as a kubeconfig,
``--kills 10**23``) run the CLI as a subprocess under a timeout and a memory limit, so a
regression fails instead of taking the suite down.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import _local_workloads

from elastix.main import main

EVENTS = Path(__file__).resolve().parents[1] / "measure" / "fixtures" / "real_run.events.jsonl"
LONG = "a" * 300  # longer than a directory entry holds (255)
CLUSTER = ["cluster", "create", "c", "--project", "pppppp", "--zone", "us-central1-a",
           "--tpu-type", "v5litepod-16", "--dry-run"]


def _events(change):
    """``e.jsonl``: the recorded run's events, each record passed through ``change``."""
    def setup(tmp: Path) -> None:
        out = []
        for line in EVENTS.read_text().splitlines():
            rec = json.loads(line)
            change(rec)
            out.append(json.dumps(rec))
        (tmp / "e.jsonl").write_text("\n".join(out) + "\n")
    return setup


def _set(event: str, key: str, value):
    def change(rec: dict) -> None:
        if rec["event"] == event:
            rec[key] = value
    return change


def _config(rec: dict) -> None:
    if rec["event"] == "run_start":
        rec["config"].update(checkpoint_period="ten", snapshot_period=[1])


def _report(change):
    """``r.json``: a chaos report of the recorded run, its ``forecast_inputs`` changed."""
    def setup(tmp: Path) -> None:
        from elastix.measure.events import events_from_jsonl
        from elastix.measure.goodput import goodput
        from elastix.measure.report import ChaosReport

        events = list(events_from_jsonl(EVENTS.read_text()))
        d = ChaosReport([], goodput(events), [], False, events=events, workload="w").to_json()
        text = change(d)
        (tmp / "r.json").write_text(text if isinstance(text, str) else json.dumps(d))
    return setup


def _damaged(file: str, change):
    """The local workloads of test_bad_input, ``good``'s ``file`` changed."""
    def setup(tmp: Path) -> None:
        _local_workloads(tmp)
        path = tmp / "state" / "good" / file
        d = json.loads(path.read_text()) if path.exists() else {"state": "Running"}
        change(d)
        path.write_text(json.dumps(d))
    return setup


def _files(**files):
    def setup(tmp: Path) -> None:
        for name, body in files.items():
            (tmp / name.replace("_", ".")).write_text(body)
    return setup


ROWS = [
    # --- the trainer's events, given with --events (or a workload's own)
    pytest.param(["workload", "goodput", "--events", "e.jsonl"],
                 _events(_set("step", "seconds", float("nan"))), 2,
                 "event 2 (step): seconds nan is not a duration", id="event-seconds-nan"),
    pytest.param(["workload", "advise", "--events", "e.jsonl", "--mtbf", "1h"],
                 _events(_set("checkpoint_committed", "blocking_seconds", "abc")), 2,
                 "(checkpoint_committed): blocking_seconds 'abc' is not a duration",
                 id="event-seconds-text"),
    pytest.param(["workload", "forecast", "--events", "e.jsonl"],
                 _events(_set("checkpoint_committed", "seconds", 10**30)), 2,
                 "(checkpoint_committed): seconds 1000000000000000000000000000000 is not a "
                 "duration", id="event-seconds-huge"),
    pytest.param(["workload", "goodput", "--events", "e.jsonl"],
                 _events(_set("step", "step", [])), 2,
                 "event 2 (step): step [] is not a whole number", id="event-step-a-list"),
    pytest.param(["workload", "goodput", "--events", "e.jsonl"],
                 _events(_set("elastic_detected", "last_step", "abc")), 2,
                 "(elastic_detected): last_step 'abc' is not a whole number",
                 id="event-last-step-text"),
    pytest.param(["workload", "goodput", "--events", "e.jsonl"],
                 _events(_set("step", "ts", 5)), 2, "event 2 (step) has no valid 'ts'",
                 id="event-ts-a-number"),
    pytest.param(["workload", "advise", "--events", "e.jsonl", "--mtbf", "1h"],
                 _events(_set("step", "seconds", 0)), 2,
                 "the run's step time is 0 s (under the events' millisecond)",
                 id="event-step-times-zero"),
    pytest.param(["workload", "advise", "--events", "e.jsonl", "--mtbf", "1h"],
                 _events(_config), 0, "checkpoint", id="event-config-periods-not-numbers"),
    # --- user YAML: values the YAML constructor cannot build
    pytest.param(["workload", "create", "w", "--dry-run", "--spec", "s.yaml"],
                 _files(s_yaml="tpu_type: v5litepod-8\nnum_slices: " + "9" * 5000 + "\n"), 2,
                 "spec file 's.yaml' has a number of over 4,300 digits", id="spec-huge-integer"),
    pytest.param(["chaos", "run", "w", "--dry-run", "--plan", "p.yaml"],
                 _files(p_yaml="rounds:\n- {fault: kill, at: 2026-13-45}\n"), 2,
                 "plan 'p.yaml' has a value that cannot be read (month must be in 1..12)",
                 id="plan-impossible-date"),
    pytest.param(["workload", "create", "w", "--dry-run", "--backend", "gke", "--tpu-type",
                  "v5litepod-8", "--docker-image", "i:1", "--command", "true", "--template",
                  "t.j2"], _files(t_j2="? [1]\n: x\n"), 2,
                 "rendered manifest has a key that is a list at line 1",
                 id="template-renders-a-list-key"),
    pytest.param(["workload", "lint", "l.yaml"], _files(l_yaml="kind: " + "9" * 5000 + "\n"), 2,
                 "'l.yaml' has a number of over 4,300 digits", id="lint-huge-integer"),
    # --- a saved chaos report
    pytest.param(["workload", "forecast", "--report", "r.json"],
                 _report(lambda d: json.dumps(d).replace('"wall": ', '"wall": ' + "9" * 5000
                                                         + ", \"x\": ", 1)), 2,
                 "report 'r.json' has a number of over 4,300 digits", id="report-huge-integer"),
    pytest.param(["workload", "forecast", "--report", "r.json"],
                 _report(lambda d: d["forecast_inputs"]["measured"].update(extra=1)), 2,
                 "forecast_inputs.measured has an unknown key 'extra'", id="report-unknown-key"),
    # --- names and paths longer than a directory entry holds
    pytest.param(["workload", "status", LONG], None, 2,
                 "aaaa' is not a valid workload name", id="name-too-long"),
    pytest.param(["chaos", "run", "w", "--junit", LONG], None, 2,
                 "File name too long", id="junit-path-too-long"),
    pytest.param(["chaos", "run", "w", "--timeline", LONG + ".png"], None, 2,
                 "File name too long", id="timeline-path-too-long"),
    pytest.param(["image", "build", "-t", "a:b", "--dry-run", "--context-dir", LONG], None, 2,
                 "File name too long", id="context-dir-too-long"),
    # --- manifests
    pytest.param([*CLUSTER, "--jobset-manifest", "m.yaml"], _files(m_yaml="a: 1\n"), 2,
                 "m.yaml: a document without apiVersion and kind (no Kubernetes object) is "
                 "not part of a JobSet release manifest", id="jobset-manifest-no-kind"),
    # --- a local workload's own files, damaged
    pytest.param(["workload", "status", "good"], _damaged("plan.json", lambda d: d.update(
        created=5)), 2, "local workload 'good' is damaged", id="plan-created-a-number"),
    pytest.param(["workload", "list"], _damaged("plan.json", lambda d: d.update(labels=None)),
                 0, "good  Broken", id="plan-labels-null"),
    pytest.param(["chaos", "run", "good", "--dry-run"], _damaged("plan.json", lambda d: d.update(
        events_file=10**30)), 2, "local workload 'good' is damaged", id="plan-events-file-a-number"),
    pytest.param(["workload", "status", "good"], _damaged("state.json", lambda d: d.update(
        supervisor={"pid": "x"})), 2, "local workload 'good' is damaged",
        id="state-supervisor-pid-text"),
]

# Rows that hung, or read until the memory ran out, before their fix.
HUNG = [
    pytest.param(["workload", "list", "--backend", "gke", "--kubeconfig", "/dev/zero"], None, 2,
                 "kubeconfig '/dev/zero' is not a regular file", id="kubeconfig-dev-zero"),
    pytest.param(["workload", "list", "--backend", "gke", "--kubeconfig", "p"],
                 lambda tmp: os.mkfifo(tmp / "p"), 2, "kubeconfig 'p' is not a regular file",
                 id="kubeconfig-fifo"),
    pytest.param(["chaos", "run", "w", "--dry-run", "--kills", str(10**23)], None, 2,
                 "--kills 100000000000000000000000 is out of range: at most 10,000",
                 id="kills-huge"),
]


def _check(rc: int, out: str, err: str, code: int, message: str) -> None:
    text = out + err
    assert "unexpected" not in text and "Traceback" not in text, text[-600:]
    assert rc == code, text[-600:]
    assert message in text, text[-600:]
    if code != 0:
        lines = [ln for ln in err.splitlines() if ln.startswith(("error:", "hint:"))]
        assert [ln.split(":")[0] for ln in lines] == ["error", "hint"], err
        assert message in lines[0]


@pytest.mark.parametrize(("argv", "setup", "code", "message"), ROWS)
def test_an_input_that_was_unexpected_is_one_line(tmp_path, home, capsys, monkeypatch, argv,
                                                  setup, code, message):
    if setup is not None:
        setup(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc = main(argv)
    out, err = capsys.readouterr()
    _check(rc, out, err, code, message)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize(("argv", "setup", "code", "message"), HUNG)
def test_an_input_that_hung_is_one_line_at_once(tmp_path, home, argv, setup, code, message):
    if setup is not None:
        setup(tmp_path)
    env = {**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, **home}
    p = subprocess.run([sys.executable, "-m", "elastix", *argv], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=30,
                       preexec_fn=_limited)  # noqa: PLW1509 - no threads in the child yet
    _check(p.returncode, p.stdout, p.stderr, code, message)
