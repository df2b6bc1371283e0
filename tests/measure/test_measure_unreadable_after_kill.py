"""Once a fault is made, its report and files are written (issue 48, item 2).

A torn line in the middle of a live events file (half a record, a run of NUL bytes) made
``chaos kill-worker --measure`` and ``chaos run`` kill, then fail their first read after the
kill: exit 2 ("nothing was created or killed") with no measurement and no ``--junit`` file.
Now a torn line is skipped and said in the report; a line no torn write explains (JSON, but no
event) still stops the measurement, and the report and its files say what could not be read
(exit 1, a runtime error). Once the events are known to be unreadable, before any fault, a
measured fault is refused and nothing is killed (issue 59, item 14: it killed, then said it
could not measure).

The real local backend and CLI; the controller is tests/measure/event_controller.py.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from polling import wait_until
from test_measure_live_driver import _cli, _create, _wait_steps

from elastix.backends.local.backend import LocalBackend


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:  # O_APPEND: between two of the controller's whole lines
        f.write(data)


def _pids(backend: LocalBackend, name: str) -> dict[tuple[int, int], int | None]:
    return {(s.index, p.host): p.pid for s in backend.status(name).slices for p in s.pods}


def _junit(path: Path) -> ET.Element:
    return ET.parse(path).getroot().find("testsuite")


def test_a_measured_kill_reports_past_a_torn_line_and_says_what_it_could_not_read(
        live_env, tmp_path):
    backend = LocalBackend(live_env["ELASTIX_STATE_DIR"])
    _create(live_env, "torn", f"--garble-when {tmp_path / 'garble'}")
    try:
        _wait_steps(backend, "torn", 8)
        events = Path(backend.events_path("torn"))
        _append(events, b'{"ts": "2026-11-29T10:4\n' + b"\x00" * 40 + b"\n")
        torn_at = events.read_bytes().count(b"\n")
        # the torn lines are mid-file once the controller wrote after them (read raw: the
        # reader under test is not the judge of when)
        wait_until(lambda: events.read_bytes().count(b"\n") > torn_at + 1, 60, "a line after")
        for cmd in (["kill-worker", "torn", "--slice", "1", "--measure"],
                    ["run", "torn", "--kills", "1"]):
            junit = tmp_path / f"{cmd[0]}.xml"
            p = _cli(live_env, "chaos", *cmd, "--timeout", "60s", "-o", "json", "--junit",
                     str(junit), check=False)
            assert p.returncode == 0, p.stderr
            (k,) = json.loads(p.stdout)["kills"]
            assert k["ok"] and k["recovery"]["downtime_seconds"] is not None
            assert k["source"].startswith("events; skipped 2 lines elastix could not read "
                                          "(first: line "), k["source"]
            suite = _junit(junit)
            assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == \
                ("1", "0", "0")

        (tmp_path / "garble").touch()  # from now on a detection is followed by a non-event
        for cmd in (["kill-worker", "torn", "--slice", "0", "--measure"],):
            junit = tmp_path / f"{cmd[0]}-unread.xml"
            p = _cli(live_env, "chaos", *cmd, "--timeout", "60s", "-o", "json", "--junit",
                     str(junit), check=False)
            assert p.returncode == 1, p.stderr  # the kill was made: not "nothing was killed"
            d = json.loads(p.stdout)
            (k,) = d["kills"]
            assert k["kills"][0]["pod"].startswith("torn-") and k["recovery"] is None
            why = (f"the trainer's events could not be read after the fault: events file "
                   f"{events}: 1 of ")
            assert k["unreadable"].startswith(why), k["unreadable"]
            assert "(first: line " in k["unreadable"] and "not an object with an 'event'" in \
                k["unreadable"]
            assert d["error"] == f"kill 1: {k['unreadable']}" and d["violations"] == []
            what = "chaos run" if cmd[0] == "run" else "kill-worker --measure"
            err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
            assert err == [f"error: {what} stopped: kill 1: {k['unreadable']}"], p.stderr
            suite = _junit(junit)
            assert (suite.get("tests"), suite.get("errors")) == ("1", "1")
            (e,) = suite.iter("error")
            assert e.get("type") == "events_unreadable" and e.get("message") == k["unreadable"]

        # Issue 59, item 14: the events are now known to be unreadable before any fault: a
        # measured fault kills nothing (its recovery could not be measured), exit 2.
        wait_until(lambda: all(p.phase == "Running" for s in backend.status("torn").slices
                               for p in s.pods), 60, "the killed host replaced")
        pids = _pids(backend, "torn")
        for cmd in (["kill-worker", "torn", "--slice", "1", "--measure"],
                    ["run", "torn", "--kills", "1"]):
            junit = tmp_path / f"{cmd[0]}-refused.xml"
            p = _cli(live_env, "chaos", *cmd, "--timeout", "60s", "-o", "json", "--junit",
                     str(junit), check=False)
            err = [ln for ln in p.stderr.splitlines() if ln.startswith(("error:", "hint:"))]
            assert p.returncode == 2 and len(err) == 2, p.stderr
            assert err[0].startswith(f"error: events file {events}: 1 of ") and \
                err[0].endswith("nothing was killed: its recovery could not be measured"), err
            assert p.stdout == "" and not junit.exists()
            assert _pids(backend, "torn") == pids  # no host was killed
    finally:
        _cli(live_env, "workload", "delete", "torn", "--wait", check=False)
