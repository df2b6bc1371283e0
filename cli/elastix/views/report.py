"""A chaos report for CI: JUnit XML (``--junit``) and Markdown (``--summary``).

JUnit: one ``testsuite`` of one ``testcase`` per kill (a ``failure`` per missed bound, the
recovery's phase table in ``system-out``); a kill the run never got to (the workload completed
or died first) is a ``skipped`` or ``error`` testcase, so the count of kill testcases is always
the count of kills asked for. ``--verify`` adds a testcase ``verify``, failed when the losses
differ from the reference's (or could not be compared). The numbers are ``property`` elements
of the suite (``kill.N.KEY``): the schema CI tools read has no properties inside a testcase.
That schema is Jenkins' ``junit-10.xsd`` (jenkinsci/xunit-plugin,
``src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd`` @ 0c37522),
vendored in ``tests/fixtures/junit/`` and validated against in the tests.

Markdown: a heading with the verdict, the kills' table and the missed bounds, for
``$GITHUB_STEP_SUMMARY`` (or any CI page that renders Markdown).
"""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from elastix.errors import BackendError, UsageError, shown
from elastix.measure.report import ChaosReport
from elastix.views.measurement import recovery_rows, run_goodput, window_goodput

_PHASES = ("detection", "cleanup", "waiting_for_slices", "restore", "first_step")


def check_report_path(path: str, flag: str) -> None:
    """Refuse, before anything is killed, a report path that cannot be written (exit 2)."""
    p = Path(path)
    try:
        _check_report_path(p, path, flag)
    except OSError as e:  # a name too long, a loop of links
        raise UsageError(f"{flag} {shown(path)}: {e.strerror or e}",
                         hint="give a shorter path you can write") from None


def _check_report_path(p: Path, path: str, flag: str) -> None:
    if not path or p.is_dir():
        raise UsageError(f"{flag} {path!r} is a directory, not a file",
                         hint=f"e.g. {flag} chaos.xml")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path!r}: folder {str(parent)!r} does not exist",
                         hint="create it first, or write the file elsewhere")


def write_report(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise BackendError(f"cannot write {path!r}: {e.strerror or e}",
                           hint="the measurement above was printed; check the path") from None


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _kill_props(i: int, k: dict[str, Any]) -> list[tuple[str, Any]]:
    r = k.get("recovery") or {}
    phases = r.get("phases") or {}
    out = [(f"kill.{i}.pod", ", ".join(x["pod"] for x in k["kills"])),
           (f"kill.{i}.time", k["kills"][0]["time"]),
           (f"kill.{i}.downtime_seconds", r.get("downtime_seconds")),
           (f"kill.{i}.kill_to_loss_seconds", r.get("kill_to_loss_seconds")),
           (f"kill.{i}.steps_lost", r.get("steps_lost")),
           (f"kill.{i}.restored_step", r.get("restored_step")),
           (f"kill.{i}.restore_source", r.get("restore_source")),
           (f"kill.{i}.in_process", k["in_process"]),
           (f"kill.{i}.fault", k.get("fault", "kill"))]
    aim = k.get("aim")
    if aim:
        out += [(f"kill.{i}.aimed", aim["aimed"]), (f"kill.{i}.aimed_window", aim["window"]),
                (f"kill.{i}.aimed_offset_seconds", aim["offset_seconds"]),
                (f"kill.{i}.aimed_inside", aim["inside"])]
    if k.get("planned_seconds") is not None:
        out += [(f"kill.{i}.planned_seconds", k["planned_seconds"]),
                (f"kill.{i}.late_seconds", k.get("late_seconds"))]
    out += [(f"kill.{i}.{p}_seconds", phases.get(p)) for p in _PHASES]
    return out


def _case_name(i: int, k: dict[str, Any]) -> str:
    """``kill 1: demo-worker-1-0``; another fault or an aimed one says so:
    ``kill 2 (term, during save): demo-worker-0-1``."""
    what = [f for f in (k.get("fault") if k.get("fault", "kill") != "kill" else None,
                        (k.get("aim") or {}).get("aimed")) if f]
    pods = k["kills"][k.get("openers", 0):] or k["kills"]
    return f"kill {i}" + (f" ({', '.join(what)})" if what else "") + f": {pods[0]['pod']}"


def junit_xml(res: ChaosReport, planned: int) -> str:
    """The report as a JUnit XML document (``planned``: the kills asked for)."""
    d = res.to_json()
    name = d["workload"]
    suite = ET.Element("testsuite", name=f"elastix chaos {name}",
                       timestamp=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
                       hostname=socket.gethostname())
    props = ET.SubElement(suite, "properties")
    b = d["bounds"]
    pairs: list[tuple[str, Any]] = [
        ("workload", name), ("exit_code", d["exit_code"]), ("ok", d["ok"]),
        ("stopped", d["stopped"]), ("goodput", d["totals"]["goodput"]),
        ("max_downtime_seconds", b["max_downtime_seconds"]),
        ("max_steps_lost", b["max_steps_lost"]), ("timeout_seconds", b["timeout_seconds"]),
        ("min_goodput", b["min_goodput"]),
        ("chaos_window_goodput", (d["chaos_window"] or {}).get("goodput"))]
    if d["plan"] is not None:  # the plan run, whole (a plan file's JSON), and each round's
        pairs.append(("plan", json.dumps(d["plan"], separators=(",", ":"))))
    for k in d["kills"]:
        pairs += _kill_props(k["index"], k)
        pairs += [(f"kill.{k['index']}.{key}", v) for key, v in k.get("round", {}).items()]
    for key, value in pairs:
        ET.SubElement(props, "property", name=key, value=_fmt(value))
    failures = errors = skipped = 0
    total = 0.0
    for m, k in zip(res.measurements, d["kills"], strict=True):
        i = k["index"]
        r = k.get("recovery") or {}
        secs = r.get("downtime_seconds") or 0.0
        total += secs
        case = ET.SubElement(suite, "testcase", name=_case_name(i, k),
                             classname=f"elastix.chaos.{name}", time=f"{secs:.3f}")
        for v in res.kill_violations(i):
            failures += 1
            f = ET.SubElement(case, "failure", type=v.bound, message=v.text())
            f.text = f"bound {v.bound}: limit {_fmt(v.limit)}, value {_fmt(v.value)}"
        if m.unreadable is not None:  # made, and not measured to its end
            errors += 1
            e = ET.SubElement(case, "error", type="events_unreadable", message=m.unreadable)
            e.text = m.unreadable
        if m.interrupted:  # made, and Ctrl-C stopped its measurement
            errors += 1
            e = ET.SubElement(case, "error", type="interrupted",
                              message="not measured to its end: interrupted (Ctrl-C)")
            e.text = d["stopped"]
        if m.gone is not None and not (m.recovery and m.recovery.complete):  # made, and the
            errors += 1  # workload went before its recovery did
            e = ET.SubElement(case, "error", type="workload_gone",
                              message=f"not measured to its end: {m.gone}")
            e.text = d["stopped"]
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join(f"{what:<24} {val}" for what, val in recovery_rows(m)) + "\n"
    if res.bounds.min_goodput is not None:  # the run's own bound: one testcase of its own
        got = d["chaos_window"]["goodput"] if d["chaos_window"] else None
        case = ET.SubElement(suite, "testcase",
                             name=f"goodput >= {res.bounds.min_goodput:.1%} (chaos window)",
                             classname=f"elastix.chaos.{name}", time="0")
        for v in (v for v in res.kill_violations(0) if v.bound == "min_goodput"):
            failures += 1
            f = ET.SubElement(case, "failure", type=v.bound, message=v.text())
            f.text = f"bound {v.bound}: limit {_fmt(v.limit)}, value {_fmt(v.value)}"
        out = ET.SubElement(case, "system-out")
        w = d["chaos_window"]
        out.text = (f"goodput {_pct(got)} from {w['start']} to {w['end']} ({w['seconds']:.1f} s)"
                    if w else "no fault was made: no chaos window") + "\n"
    for i in range(len(res.measurements) + 1, max(planned, len(res.measurements)) + 1):
        case = ET.SubElement(suite, "testcase", name=f"kill {i}",
                             classname=f"elastix.chaos.{name}", time="0")
        if res.completed_early:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"not made: {d['stopped']}")
        else:
            errors += 1
            e = ET.SubElement(case, "error", type="not_made", message=f"not made: {d['stopped']}")
            e.text = d["error"] or d["stopped"]
    if res.verify is not None:
        kind = _verify_case(suite, res, name)
        failures += kind == "failure"
        errors += kind == "error"
    sysout = ET.SubElement(suite, "system-out")
    sysout.text = f"stopped: {d['stopped']}\nexit code: {d['exit_code']}\n"
    tests = len(suite.findall("testcase"))
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", f"{total:.3f}")
    root = ET.Element("testsuites", name="elastix chaos", tests=str(tests),
                      failures=str(failures), errors=str(errors), time=f"{total:.3f}")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def _verify_case(suite: ET.Element, res: ChaosReport, name: str) -> str | None:
    """``chaos run --verify``'s testcase: a failure when the losses differ (or could not be
    compared), an error when the reference did not get there in time; its numbers in
    ``system-out``. Returns ``failure``, ``error`` or None."""
    v = res.verify
    assert v is not None
    case = ET.SubElement(suite, "testcase", name="verify", classname=f"elastix.chaos.{name}",
                         time="0")
    d = v.to_json()
    kind = None if v.ok else "error" if v.timed_out else "failure"
    if kind is not None:
        f = ET.SubElement(case, kind, type="verify", message=v.text())
        m = d["first_mismatch"]
        f.text = (f"first differing step {m['step']}: run {m['run']!r}, reference "
                  f"{m['reference']!r}" if m else v.reason or "")
    out = ET.SubElement(case, "system-out")
    out.text = "\n".join(f"{k:<24} {_fmt(d[k])}" for k in (
        "reference", "steps_compared", "last_step", "mismatches", "max_abs_diff", "tolerance",
        "source")) + "\n"
    return kind


def _cell(v: Any, unit: str = " s") -> str:
    if v is None:
        return "-"
    return f"{v:.3f}{unit}" if isinstance(v, float) else str(v)


def _pct(v: float | None) -> str:
    """Goodput as the other views print it: ``13.9%`` (the JSON and the JUnit properties keep
    the fraction, their documented value)."""
    return "-" if v is None else f"{v:.1%}"


def summary_markdown(res: ChaosReport, planned: int) -> str:
    """The report as Markdown: verdict, kills table, missed bounds, why it stopped."""
    d = res.to_json()
    verdict = "passed" if d["ok"] else f"failed (exit {d['exit_code']})"
    b = d["bounds"]
    bounds = ", ".join(x for x in (
        f"max downtime {b['max_downtime_seconds']:g} s" if b["max_downtime_seconds"] is not None
        else "", f"max steps lost {b['max_steps_lost']}" if b["max_steps_lost"] is not None
        else "", f"min goodput {b['min_goodput']:.1%} (chaos window)"
        if b["min_goodput"] is not None else "",
        f"recovery timeout {b['timeout_seconds']:g} s") if x)
    lines = [f"### elastix chaos `{d['workload']}`: {verdict}", "",
             f"{len(d['kills'])} of {planned} kill{'s' if planned != 1 else ''} made; "
             f"bounds: {bounds}; goodput {run_goodput(res)}"
             + (f" (chaos window: {window_goodput(res)})" if d["chaos_window"] else ""), "",
             "| kill | fault | pod | detection | cleanup | waiting for slices | restore "
             "| first step | downtime | steps lost | restored from | result |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for k in d["kills"]:
        r = k.get("recovery") or {}
        ph = r.get("phases") or {}
        src = (f"step {r['restored_step']} ({r['restore_source']})"
               if r.get("restored_step") is not None else "-")
        lines.append("| " + " | ".join([
            str(k["index"]), k.get("fault", "kill") + (f", {k['aim']['aimed']}"
                                                       if k.get("aim") else ""),
            ", ".join(f"`{x['pod']}`" for x in k["kills"]),
            *(_cell(ph.get(p)) for p in _PHASES), _cell(r.get("downtime_seconds")),
            _cell(r.get("steps_lost")), src, "ok" if k["ok"] else "**not measured**"
            if k.get("unreadable") else "**missed**"]) + " |")
    lines.append("")
    for k in d["kills"]:
        if k.get("aim"):
            a = k["aim"]
            where = ("inside" if a["inside"] else "after it" if a["inside"] is False
                     else "unknown")
            off = f" {a['offset_seconds']:.3f} s after it opened" \
                if a["offset_seconds"] is not None else ""
            lines.append(f"- kill {k['index']} aimed {a['aimed']}: {a['window'] or '-'}; "
                         f"landed{off}, {where}" + (f" ({a['note']})" if a["note"] else ""))
    if res.verify is not None and (res.verify.ok or res.verify.timed_out):
        lines.append(f"- {res.verify.text()}")
    for v in res.violations:
        lines.append(f"- bound missed: {v.text()}")
    lines += [f"- stopped: {d['stopped']}", ""]
    return "\n".join(lines)
