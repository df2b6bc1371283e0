"""A chaos command's ways out (issue 48, items 5-7): real processes, real signals, the real CLI.

- Ctrl-C or SIGTERM during ``--fault hang --for D`` left the host SIGSTOPped (for ever with the
  hung-host probe off): every stop elastix makes is now undone on every way out, and the
  command names the host it resumed.
- ``workload delete`` while a fault's recovery is measured: exit 4 with the measurement so far,
  and JUnit says the made fault was made.
- ``workload create --replace`` under a running ``chaos run``: it notices the new run and stops
  with that reason (exit 4), instead of measuring the new run as if it were the old.

The controller is tests/measure/event_controller.py (JAX-free, docs/events.md events, a
checkpoint every 5 steps, an in-process recovery when a slice's heartbeats stop); the hung-host
probe is
off (``ELASTIX_LOCAL_HUNG_HOST_TIMEOUT=0``) so a stopped host stays stopped until someone
resumes it, and a measurement of a hang goes on until the test acts.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET

import psutil
import pytest
from local_helpers import HERE, wait_until

NO_PROBE = {"ELASTIX_LOCAL_HUNG_HOST_TIMEOUT": "0"}
CONTROLLER = HERE.parents[1] / "measure" / "event_controller.py"
COMMAND = f"{sys.executable} {CONTROLLER} --step-delay 0.05"


def _create(cli, name: str, *extra: str) -> None:
    cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "5", "--command", COMMAND, *extra,
        env=NO_PROBE)
    cli("workload", "wait", name, "--for", "stepping", "--timeout", "120s")


def _start(cli, tmp_path, *args: str) -> tuple[subprocess.Popen, object]:
    """The CLI as a user's foreground command: SIGINT at its default (a background job of a
    non-interactive shell has it ignored, and Python keeps it so)."""
    out = tmp_path / "out.txt"
    err = tmp_path / "err.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastix", *args], env={**cli.env, **NO_PROBE},
        stdout=open(out, "w"), stderr=open(err, "w"), text=True,  # noqa: SIM115
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    return proc, (out, err)


@contextlib.contextmanager
def _started(cli, tmp_path, name: str, *args: str):
    """:func:`_start`, for the block; then the command killed if it still runs, and workload
    ``name`` deleted."""
    proc, files = _start(cli, tmp_path, *args)
    try:
        yield proc, files
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cli("workload", "delete", name, "--wait", check=False)


def _stopped_pid(backend, name: str) -> int:
    (pid,) = [p.pid for s in backend.status(name).slices for p in s.pods
              if p.phase == "Stopped"]
    return pid


def _hung(backend, name: str) -> bool:
    """A host of ``name`` is stopped (the hang landed)."""
    return any(p.phase == "Stopped" for s in backend.status(name).slices for p in s.pods)


def _running(pid: int) -> bool:
    return psutil.Process(pid).status() != psutil.STATUS_STOPPED


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_cut_hang_resumes_its_host_and_says_which(how, cli, backend, tmp_path):
    """``kill-worker --fault hang --for 10m``, cut short: the host runs again at once (not 30 s
    later by the probe, a slice restart; nor never, with the probe off)."""
    name = "cut"
    _create(cli, name)
    with _started(cli, tmp_path, name, "chaos", "kill-worker", name, "--fault", "hang",
                  "--for", "10m", "--slice", "1", "--host", "0") as (proc, (out, err)):
        # a hang's line says what it did: "stopped (SIGSTOP) pod ..." (issue 49)
        wait_until(lambda: "stopped (SIGSTOP) pod" in out.read_text() or proc.poll() is not None,
                   60, "the hang")
        pid = _stopped_pid(backend, name)
        assert not _running(pid)
        proc.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGTERM)
        code = proc.wait(60)
        text = err.read_text()
        assert _running(pid), text  # resumed before the command exited
        pod = f"{name}-worker-1-0"
        assert any(ln.startswith(f"elastix: resumed pod {pod}") and "(slice 1, host 0)" in ln
                   for ln in text.splitlines()), text
        if how == "ctrl-c":
            assert code == 130 and "interrupted" in text, (code, text)
        else:  # ended as SIGTERM ends a process, once the host was resumed
            assert code == -signal.SIGTERM and "terminated (SIGTERM)" in text, (code, text)
        assert "Traceback" not in text, text
        # the run goes on with the host it had: no replacement, no recovery of that slice
        st = backend.status(name)
        assert [p.pid for p in st.slices[1].pods if p.host == 0] == [pid]


@pytest.mark.parametrize("command", [
    ["run", "--kills", "1", "--fault", "hang", "--for", "10m"],
    ["kill-worker", "--measure", "--fault", "hang", "--for", "10m", "--slice", "1", "--host", "0"],
], ids=["chaos-run", "kill-worker-measure"])
def test_a_measured_hang_cut_by_ctrl_c_resumes_its_host_and_reports(cli, backend, tmp_path,
                                                                    command):
    """The same in a measurement: the report is printed, exit 130, the host runs. The report
    keeps the fault Ctrl-C cut short, as made (issue 59, item 10: it said ``"ok": true``,
    ``"exit_code": 0``, no kills, and JUnit called the fault "not made")."""
    name = "cutrun"
    _create(cli, name)
    junit = tmp_path / "j.xml"
    with _started(cli, tmp_path, name, "chaos", command[0], name, *command[1:], "--timeout",
                  "15m", "-o", "json", "--junit", str(junit)) as (proc, (out, err)):
        pid = wait_until(lambda: next((p.pid for s in backend.status(name).slices
                                       for p in s.pods if p.phase == "Stopped"), None), 60,
                         "the hang")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
        text = err.read_text()
        assert code == 130 and _running(pid), text
        d = json.loads(out.read_text())
        assert d["interrupted"] and not d["ok"] and d["exit_code"] == 130, d
        assert d["stopped"].startswith("interrupted (Ctrl-C) during kill 1"), d["stopped"]
        (r,) = d["resumed_on_exit"]
        (pod,) = [p.name for s in backend.status(name).slices for p in s.pods if p.pid == pid]
        assert r["pod"] == pod and r["resumed"] is not None, r
        assert f"elastix: resumed pod {r['pod']}" in text and junit.exists(), text
        (k,) = d["kills"]  # the fault made, kept: its pod, interrupted, not ok
        assert [x["pod"] for x in k["kills"]] == [pod] and k["interrupted"], k
        assert not k["ok"] and k["exit_code"] == 130 and k["recovery"] is None, k
        (case,) = _junit_cases(junit)
        assert case[1:] == ("interrupted", "not measured to its end: interrupted (Ctrl-C)"), case


def _junit_cases(path) -> list[tuple[str, str | None, str | None]]:
    suite = ET.parse(path).getroot().find("testsuite")
    out = []
    for case in suite.iter("testcase"):
        e = case.find("error")
        out.append((case.get("name"), e.get("type") if e is not None else None,
                    e.get("message") if e is not None else None))
    return out


@pytest.mark.parametrize("which", [1, 2])
def test_a_workload_deleted_under_a_measured_fault_is_exit_4_with_what_was_measured(
        which, cli, backend, tmp_path):
    """Deleted while fault 1 (or fault 2, after a measured kill) waits on its recovery: a hang
    the probe never replaces keeps that recovery open until the delete."""
    name = f"gone{which}"
    _create(cli, name)
    sched = tmp_path / "faults.yaml"
    sched.write_text(("- {at: 0s, fault: kill, slice: 0, host: 0}\n" if which == 2 else "")
                     + "- {at: 0s, fault: hang, slice: 1, host: 0}\n")
    junit = tmp_path / "j.xml"
    with _started(cli, tmp_path, name, "chaos", "run", name, "--schedule", str(sched),
                  "--timeout", "15m", "-o", "json", "--junit", str(junit)) as (proc, (out, err)):
        wait_until(lambda: _hung(backend, name), 120, "the hang")
        cli("workload", "delete", name, "--wait")
        code = proc.wait(60)
    text = err.read_text()
    assert code == 4, text  # README: the workload failed or was deleted
    d = json.loads(out.read_text())
    assert d["stopped"] == f"the workload was deleted during kill {which}" and d["died"]
    assert len(d["kills"]) == which, d["kills"]
    hang = d["kills"][-1]
    assert hang["gone"] == "the workload was deleted" and hang["state_after"] == "Deleted"
    assert (hang["kills"][0]["slice"], hang["kills"][0]["host"]) == (1, 0)
    if which == 2:
        assert d["kills"][0]["recovery"]["complete"] and d["kills"][0]["ok"]
    cases = _junit_cases(junit)
    # one case a scheduled fault: the schedule's, not --kills' default of 3
    assert [" ".join(c[0].split()[:2]).rstrip(":") for c in cases] == [f"kill {i}"
                                                           for i in range(1, which + 1)]
    assert cases[-1][1:] == ("workload_gone", "not measured to its end: the workload was "
                                              "deleted"), cases
    assert "not_made" not in {c[1] for c in cases}, cases


def test_a_replaced_run_under_a_chaos_run_stops_it_with_that_reason(cli, backend, tmp_path):
    """``create --replace`` while a fault's recovery is measured: a new run (new plan, new
    seed) is not the run measured, and its different losses are nobody's recovery."""
    name = "swap"
    _create(cli, name)
    junit = tmp_path / "j.xml"
    with _started(cli, tmp_path, name, "chaos", "run", name, "--fault", "hang",
                  "--kills", "2", "--interval", "0", "--timeout", "15m",
                  "-o", "json", "--junit", str(junit)) as (proc, (out, err)):
        wait_until(lambda: _hung(backend, name), 120, "the hang")
        created = backend.status(name).created
        cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
            "--elastic-slices", "2", "--max-slice-restarts", "5", "--command", COMMAND,
            "--replace", env=NO_PROBE)
        code = proc.wait(120)
    text = err.read_text()
    assert code == 4, text
    d = json.loads(out.read_text())
    (k,) = d["kills"]
    assert k["gone"].startswith("the workload was replaced by a new run created "), k["gone"]
    assert k["state_after"] == "Replaced" and not k["ok"]
    assert d["stopped"] == f"{k['gone']} during kill 1", d["stopped"]
    assert d["verify"] is None and d["died"]
    assert created is not None
    cases = _junit_cases(junit)
    assert [c[1] for c in cases] == ["workload_gone", "not_made"], cases
