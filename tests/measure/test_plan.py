"""A chaos experiment is a plan (issue 50): built once from the flags, shown by --dry-run,
saved as a file and run again, every rule checked before anything is killed.

The commands run in process (``elastix.main.main``) against a stand-in backend that records
what it is asked and kills nothing; ``run_soak`` is replaced by a catcher of the plan it is
given, so these tests see exactly what a real run would execute.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
import re
from pathlib import Path

import pytest
import yaml

import elastix.commands.chaos as chaos_cmd
import elastix.measure.soak as soak_mod
from elastix.backends.base import Fault, KillRecord, PodInfo, SliceStatus, WorkloadStatus
from elastix.errors import UsageError
from elastix.main import main
from elastix.measure.plan import Flags, Plan, Round, build_plan
from elastix.measure.plan_file import parse_plan

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "fixtures" / "plan_rounds_c12d5bc.json"


class Caught(BaseException):
    """Raised in place of running the soak: the plan it would run is ``plan``."""

    def __init__(self, plan: Plan) -> None:
        super().__init__("caught")
        self.plan = plan


class Stand:
    """A 2-slice x 2-host workload that is Running; records every fault asked of it."""

    name = "local"

    def __init__(self) -> None:
        self.injected: list[tuple] = []

    def status(self, name: str) -> WorkloadStatus:
        pods = lambda s: [PodInfo(f"{name}-worker-{s}-{h}", "worker", "Running", s, h)  # noqa: E731
                          for h in range(2)]
        return WorkloadStatus(name, "default", "local", "Running", None, 2,
                              slices=[SliceStatus(s, 2, pods(s)) for s in range(2)])

    def trainer_events(self, name: str) -> None:
        return None  # nothing read yet: the plan is not judged against the run's end

    def events_path(self, name: str) -> None:
        return None

    def inject(self, name: str, fault: Fault, *, slice=None, host=None, seed=None,
               dry_run=False) -> list[KillRecord]:
        self.injected.append((fault.kind, slice, host, seed))
        return [KillRecord(name, f"{name}-worker-{slice}-{host}", slice, host, None,
                           dt.datetime.now(dt.timezone.utc), fault=fault.kind)]


@pytest.fixture
def stand(monkeypatch, tmp_path):
    s = Stand()
    monkeypatch.setattr(chaos_cmd, "get_backend", lambda target: s)

    def catch(backend, name, plan, **kw):
        raise Caught(plan)

    monkeypatch.setattr(soak_mod, "run_soak", catch)
    monkeypatch.setenv("COLUMNS", "200")
    return s


def _local(tmp_path: Path) -> list[str]:
    return ["--backend", "local", "--state-dir", str(tmp_path / "state")]


def _planned(tmp_path: Path, *argv: str) -> Plan:
    """The plan ``elastix ARGV`` would run (nothing is killed)."""
    with pytest.raises(Caught) as got:
        main([*argv, *_local(tmp_path)])
    return got.value.plan


def _chaos_md_schedule(tmp_path: Path) -> str:
    """docs/chaos.md's schedule example, as a file."""
    text = (ROOT / "docs" / "chaos.md").read_text()
    block = re.search(r"```yaml\n(- \{at: 30s.*?)```", text, re.S).group(1)
    path = tmp_path / "chaosmd.yaml"
    path.write_text(block)
    return str(path)


def _as_before(plan: Plan) -> list[dict]:
    """Each round as the code before the plan expanded it (the fixture's shape: what
    run_soak's loop derived for round i from its inputs)."""
    out = []
    for r in plan.rounds:
        a = r.aim()
        f = [r.fault.kind, r.fault.grace, r.fault.hang_for]
        out.append({
            "fault": f, "count": r.count, "spread": r.spread, "mode": plan.mode,
            "seed": plan.seed, "wait_after_previous": r.interval,
            "due": round(r.at, 6) if r.at is not None else None,
            "sleep_first": r.after or None, "aim": [a.at_step, a.during, a.after],
            "opener": r.opener,
            "slice": None if plan.pinned else r.slice, "host": None if plan.pinned else r.host,
            "pinned": {"slice": r.slice, "host": r.host, "seed": plan.seed, "fault": f}
            if plan.pinned else None})
    return out


CASES = json.loads(EXPECTED.read_text())


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c["argv"][1:]) for c in CASES])
def test_todays_documented_command_lines_make_the_same_rounds(stand, tmp_path, case):
    """Every command line of README.md, docs/chaos.md, docs/examples/faults.yaml and the CI
    smoke script makes the rounds the code before the plan made (recorded at c12d5bc:
    tests/measure/fixtures/PROVENANCE.md)."""
    argv = [a.replace("{chaos.md}", _chaos_md_schedule(tmp_path)) for a in case["argv"]]
    argv = [str(ROOT / a) if a.startswith("docs/") else a for a in argv]
    plan = _planned(tmp_path, *argv)
    if "--seed" not in argv and argv[1] == "run":  # the code before ran with no seed; a run
        # draws its own (kill-worker's victim is drawn as a plain kill-worker draws it)
        assert isinstance(plan.seed, int)
        plan = dataclasses.replace(plan, seed=None)
    got = json.loads(json.dumps(_as_before(plan)))
    assert got == case["rounds"]
    assert stand.injected == []


@pytest.mark.parametrize("case", [c for c in CASES if c["argv"][1] == "run"],
                         ids=[" ".join(c["argv"][1:]) for c in CASES if c["argv"][1] == "run"])
def test_a_dry_runs_plan_file_runs_the_same_plan(stand, tmp_path, capsys, case):
    """``--dry-run -o yaml > p.yaml`` then ``--plan p.yaml``: the same rounds, the same seed
    (so the same victims, drawn from it, at the same moments); -o json likewise. A dry run
    without ``--seed`` draws one and writes it (issue 59: ``seed: null``, and a replay hit
    other victims)."""
    argv = [a.replace("{chaos.md}", _chaos_md_schedule(tmp_path)) for a in case["argv"]]
    argv = [str(ROOT / a) if a.startswith("docs/") else a for a in argv]
    direct = _planned(tmp_path, *argv)
    for fmt in ("yaml", "json"):
        capsys.readouterr()
        assert main([*argv, "--dry-run", "-o", fmt, *_local(tmp_path)]) == 0
        path = tmp_path / f"p.{fmt}"
        path.write_text(capsys.readouterr().out)
        seed = yaml.safe_load(path.read_text())["seed"]
        assert isinstance(seed, int) and (seed == direct.seed or "--seed" not in argv)
        replayed = _planned(tmp_path, "chaos", "run", "demo", "--plan", str(path))
        assert replayed == dataclasses.replace(direct, seed=seed)
        assert _planned(tmp_path, "chaos", "run", "demo", "--plan", str(path)) == replayed
    again = _planned(tmp_path, "chaos", "run", "demo", "--plan", str(path), "--seed", "99")
    assert again == dataclasses.replace(direct, seed=99)
    assert stand.injected == []


def test_a_schedule_of_one_or_five_faults_is_one_or_five_rounds(stand, tmp_path, capsys):
    """A schedule's rounds are its faults: not --kills' default of 3 (a one-fault file's
    dry run once ended in IndexError, a five-fault one showed three)."""
    for n in (1, 5):
        sched = tmp_path / f"s{n}.yaml"
        sched.write_text("".join(f"- {{at: {i}s}}\n" for i in range(1, n + 1)))
        capsys.readouterr()
        argv = ["chaos", "run", "demo", "--schedule", str(sched)]
        assert main([*argv, "--dry-run", "-o", "json", *_local(tmp_path)]) == 0
        assert len(json.loads(capsys.readouterr().out)["rounds"]) == n
        assert main([*argv, "--dry-run", *_local(tmp_path)]) == 0
        rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()[:1].isdigit()]
        assert len(rows) == n
        assert len(_planned(tmp_path, *argv).rounds) == n
        assert f"demo: {n} round{'s' if n > 1 else ''} of kill" in capsys.readouterr().err


@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_a_schedules_targets_are_checked_against_the_workload_before_any_fault(
        stand, tmp_path, capsys, dry):
    """slice 99 host 7 on a 2-slice workload: one line, exit 2, and nothing killed; not the
    first fault made and the run stopped at the second."""
    sched = tmp_path / "s.yaml"
    sched.write_text("- {at: 1s, fault: kill, slice: 0}\n- {at: 2s, slice: 99, host: 7}\n")
    argv = ["chaos", "run", "demo", "--schedule", str(sched), *(["--dry-run"] if dry else [])]
    assert main([*argv, *_local(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "error: round 2 (kill, slice 99 host 7): slice 99 is out of range: demo " \
        "has 2 slices (0-1)", err
    assert stand.injected == []
    sched.write_text("- {at: 2s, slice: 1, host: 7}\n")
    assert main([*argv, *_local(tmp_path)]) == 2
    assert "host 7 is out of range: demo has 2 hosts per slice (0-1)" in capsys.readouterr().err


def test_a_plan_files_targets_are_checked_too(stand, tmp_path, capsys):
    p = tmp_path / "p.yaml"
    p.write_text("version: 1\nrounds:\n- {fault: slice, at: 1, slice: 2}\n")
    assert main(["chaos", "run", "demo", "--plan", str(p), *_local(tmp_path)]) == 2
    assert "round 1 (slice, slice 2): slice 2 is out of range" in capsys.readouterr().err
    assert stand.injected == []


def test_the_dry_run_table_is_the_plan(stand, tmp_path, capsys):
    assert main(["chaos", "run", "demo", "--during", "restore", "--kills", "2", "--dry-run",
                 *_local(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "faults planned (nothing killed)" in out
    assert "during restore (after an opener kill)" in out
    assert "during restore (after an opener kill), 120 s after fault 1 or later" in out


def test_the_plan_file_reads_back_exactly():
    plan = Plan((Round(Fault("term", 5.0), 2, 0.25, at=166.44999023012), Round(
        Fault("hang", None, 5.0), interval=30.0, during="restore", opener=True),
        Round(Fault("slice"), step=40, slice=1), Round(after=0.0, interval=4.0)), "host", 7)
    for text in (yaml.safe_dump(plan.to_json(), sort_keys=False), json.dumps(plan.to_json())):
        assert parse_plan(yaml.safe_load(text), "plan 'p'", _duration) == plan


def _duration(text: str, what: str, zero_ok: bool) -> float:
    from elastix.commands.faults import duration

    return duration(text, what, zero_ok)


@pytest.mark.parametrize(("doc", "message"), [
    ([], "plan 'p' is not a plan: a mapping with rounds"),
    ({"rounds": [{}], "when": 1}, "plan 'p': unknown key 'when'"),
    ({"version": 2, "rounds": [{}]}, "plan 'p': version 2 is not 1"),
    ({"mode": "all", "rounds": [{}]}, "plan 'p': mode 'all' is not random, slice, host"),
    ({"seed": "x", "rounds": [{}]}, "plan 'p': seed 'x' is not a whole number"),
    ({"rounds": []}, "plan 'p': rounds is not a list of rounds"),
    ({"rounds": [{}, 3]}, "plan 'p', round 2 is not a mapping"),
    ({"rounds": [{"node": 1}]}, "plan 'p', round 1: unknown key 'node'"),
    ({"rounds": [{"fault": "meteor"}]}, "plan 'p', round 1: fault 'meteor' is not one of"),
    ({"rounds": [{"at": "soon"}]}, "plan 'p', round 1: at 'soon' is not a duration"),
    ({"rounds": [{"grace": 5}]}, "plan 'p', round 1: grace is for fault term only"),
    ({"rounds": [{"fault": "hang", "for": 0}]}, "plan 'p', round 1: for '0' is out of range"),
    ({"rounds": [{"host": 1}]}, "plan 'p', round 1: host needs slice"),
    ({"rounds": [{"fault": "head", "slice": 0}]},
     "plan 'p', round 1: fault head takes no slice or host"),
    ({"rounds": [{"fault": "slice", "slice": 0, "host": 1}]},
     "plan 'p', round 1: fault slice takes every host of a slice: not host"),
    ({"rounds": [{"count": 0}]}, "plan 'p', round 1: count 0 is not a whole number, 1 or more"),
    ({"rounds": [{"during": "lunch"}]}, "plan 'p', round 1: during 'lunch' is not a moment"),
    ({"rounds": [{"at": 1, "step": 4}]}, "plan 'p', round 1: at and step cannot be combined"),
    ({"rounds": [{"at": 1, "interval": 4}]}, "plan 'p', round 1: at and interval cannot"),
    ({"rounds": [{"during": "save", "opener": True}]},
     "plan 'p', round 1: opener goes with during recovery or restore"),
])
def test_a_bad_plan_file_is_one_line_naming_the_field(doc, message):
    with pytest.raises(UsageError) as e:
        parse_plan(doc, "plan 'p'", _duration)
    assert e.value.message.startswith(message), e.value.message


def test_the_target_rules_live_in_one_place():
    """The command, the schedule, the plan file and both backends ask ``Fault.check_target``:
    flags are named as flags, a file's keys as keys."""
    for kind, sl, host, flag_words in (
            ("head", 0, None, "--fault head takes no --slice or --host"),
            ("head", None, 1, "--fault head takes no --slice or --host"),
            ("slice", 0, 1, "--fault slice takes every host of a slice: not --host")):
        with pytest.raises(UsageError, match=re.escape(flag_words)):
            Fault(kind).check_target(sl, host)
        with pytest.raises(UsageError, match=re.escape(
                "f, fault 2: " + flag_words[2:].replace("--", ""))):
            Fault(kind).check_target(sl, host, "f, fault 2")
    Fault("kill").check_target(0, 1)
    Fault("slice").check_target(1, None)
    Fault("head").check_target(None, None)
    for path in ("commands/chaos.py", "backends/gke/faults.py", "backends/local/faults.py",
                 "backends/local/backend.py", "measure/schedule.py", "measure/plan.py"):
        src = (ROOT / "cli" / "elastix" / path).read_text()
        assert "takes no --slice" not in src and "takes every host" not in src, path


@pytest.mark.parametrize(("flags", "message"), [
    (Flags(kills=2, at_step="1,2,3"), "--kills 2 but --at-step names 3 steps"),
    (Flags(during="startup", kills=2), "--during startup aims at the run's start"),
    (Flags(mtbf="5m", schedule="x"), "--mtbf and --schedule cannot be combined"),
    (Flags(schedule="x", interval="1m"), "--interval and --schedule cannot be combined"),
    (Flags(kill_worker=True, host=1), "--host needs --slice"),
    (Flags(kill_worker=True, fault="slice", slice=0, host=1),
     "--fault slice takes every host of a slice"),
    (Flags(kill_worker=True, at_step="3", during="save"), "--at-step and --during cannot be"),
])
def test_the_flag_rules_are_the_builders(flags, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        build_plan(flags, duration=_duration, read_schedule=lambda p: [])


def test_a_plan_file_takes_no_flag_that_says_its_rounds_again(tmp_path):
    for flags, flag in ((Flags(kills=2), "--kills"), (Flags(hang_for="5s"), "--for"),
                        (Flags(at_step="4"), "--at-step"), (Flags(fault="term"), "--fault")):
        with pytest.raises(UsageError, match=f"--plan and {flag} cannot be combined"):
            build_plan(flags, duration=_duration, read_schedule=lambda p: [],
                       plan_file="p.yaml", read_plan=lambda p: Plan((Round(),)))


def test_the_same_plan_and_seed_pick_the_same_victims():
    """The runner draws every un-pinned victim from one Random of the plan's seed."""
    plan = Plan((Round(count=2), Round(Fault("slice")), Round(interval=0.0)), "host", 7)

    def victims(seed: int) -> list[tuple]:
        s = Stand()
        soak = soak_mod._Soak(s, "demo", dataclasses.replace(plan, seed=seed),
                               soak_mod.Bounds(), 1.0, lambda: 0.0, lambda t: None,
                               lambda: 0.0, None)
        for r in plan.rounds:
            soak._kill(r, None)
        return s.injected

    assert victims(7) == victims(7) != victims(8)
    assert len(victims(7)) == 4 and random.Random(7)  # 2 + 1 + 1 faults


def test_the_plan_and_each_rounds_result_are_in_the_json_and_junit_reports():
    """A CI job keeps both: the plan run (the plan file's JSON) and, per kill, its round."""
    from test_chaos_report import _kill, _report, validate_junit

    from elastix.measure.report import Bounds
    from elastix.views.report import junit_xml

    plan = Plan((Round(Fault("term", 5.0), at=10.0, slice=1, host=0),
                 Round(during="save", interval=30.0)), seed=7)
    res = _report([_kill(1), _kill(2)], Bounds(), plan=plan)
    d = res.to_json()
    assert d["plan"] == plan.to_json() and [k["index"] for k in d["kills"]] == [1, 2]
    assert d["kills"][0]["round"] == {"when": "10.000 s after stepping",
                                      "target": "slice 1 host 0"}
    props = {p.get("name"): p.get("value")
             for p in validate_junit(junit_xml(res, 2)).iter("property")}
    assert json.loads(props["plan"]) == plan.to_json()
    assert props["kill.1.when"] == "10.000 s after stepping"
    assert props["kill.1.target"] == "slice 1 host 0"
    assert props["kill.2.when"] == "during save, 30 s after fault 1 or later"


def test_docs_chaos_md_plan_example_is_what_the_dry_run_writes_and_reads(stand, tmp_path,
                                                                          capsys):
    """docs/chaos.md's plan file: its command writes its first two rounds, word for word,
    and the whole file reads back as a plan."""
    text = (ROOT / "docs" / "chaos.md").read_text()
    cmd = re.search(r"elastix (chaos run demo --during restore .*?) > p\.yaml", text).group(1)
    block = re.search(r"```yaml\n(# elastix chaos plan.*?)```", text, re.S).group(1)
    assert main([*cmd.split(), *_local(tmp_path)]) == 0
    written = capsys.readouterr().out.splitlines()
    documented = [re.sub(r"\s+#.*", "", ln) for ln in block.splitlines()]
    assert written == documented[:len(written)]
    plan = parse_plan(yaml.safe_load(block), "plan 'docs'", _duration)
    assert len(plan.rounds) == 4 and plan.seed == 7
    path = tmp_path / "p.yaml"
    path.write_text(block)
    assert _planned(tmp_path, "chaos", "run", "demo", "--plan", str(path)) == plan


def test_mtbf_with_a_seed_plans_the_same_times_and_the_dry_run_kills_nothing(stand, tmp_path,
                                                                              capsys):
    def at(seed: str) -> list[float]:
        capsys.readouterr()
        assert main(["chaos", "run", "demo", "--mtbf", "5m", "--seed", seed, "--kills", "4",
                     "--dry-run", "-o", "json", *_local(tmp_path)]) == 0
        return [r["at"] for r in json.loads(capsys.readouterr().out)["rounds"]]

    assert at("7") == at("7") != at("8") and len(at("7")) == 4
    assert stand.injected == []


class _Stepping(Stand):
    """The stand, its trainer 100 steps into a 3000-step run at 0.11 s a step (the
    quickstart's job: 2900 steps, about 319 s, left)."""

    def trainer_events(self, name: str):
        from elastix.backends.base import TrainerEvents

        t0 = dt.datetime(2026, 12, 5, tzinfo=dt.timezone.utc)
        at = lambda s: (t0 + dt.timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
        recs = [{"ts": at(0), "event": "run_start", "pid": 1, "num_slices": 2, "devices": 8,
                 "config": {"steps": 3000}}]
        recs += [{"ts": at(k * 0.11), "event": "step", "pid": 1, "step": k, "seconds": 0.1,
                  "loss": 1.0, "live_slices": 2} for k in range(1, 101)]
        return TrainerEvents(source="events", from_start=True, records=recs)


def test_a_plan_that_outlasts_the_run_is_refused_and_the_dry_run_says_so(
        monkeypatch, tmp_path, capsys):
    s = _Stepping()
    monkeypatch.setattr(chaos_cmd, "get_backend", lambda target: s)
    monkeypatch.setattr(soak_mod, "run_soak", lambda backend, name, plan, **kw: (
        _ for _ in ()).throw(Caught(plan)))
    monkeypatch.setenv("COLUMNS", "200")
    # The README's line on the quickstart's job: faults up to ~20 minutes out, a 5-minute run.
    argv = ["chaos", "run", "demo", "--mtbf", "5m", "--seed", "7", "--kills", "10",
            *_local(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the plan's last fault is due ") and "but demo ends in about " \
        "319 s (2900 steps left at 0.110 s a step): a fault due after that is never made" in err
    assert "hint: plan fewer or closer faults" in err and s.injected == []
    assert main([*argv, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "faults planned (nothing killed)" in out
    assert err.startswith("note: the plan's last fault is due ")
    # 3 kills 2 minutes apart fit (240 s < 319 s); 3 kills 3 minutes apart do not
    with pytest.raises(Caught):
        main(["chaos", "run", "demo", "--kills", "3", *_local(tmp_path)])
    assert main(["chaos", "run", "demo", "--kills", "3", "--interval", "3m",
                 *_local(tmp_path)]) == 2
