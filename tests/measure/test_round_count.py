"""A round's ``--count`` is what the workload can take (issue 59, item 9).

``chaos run --fault slice --count 3`` on 2 slices killed both slices, then exited 2 ("nothing
was killed") with no report; other rounds made fewer faults than planned, or counted one
process twice. Now a count beyond what the workload holds (slices for a slice fault, hosts
for a host fault, one head) is exit 2 before any fault, with a hint naming what it holds; and
a round's faults never take a host the round already hit.

The command runs in process against the stand-in backend of test_plan (it records each fault
asked of it and kills nothing); the round's killer runs against a backend that picks its
victim from a seed as the local one does, and whose status still shows a killed host running
(as a status read before its replacement does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

import pytest
from test_plan import Stand

import elastix.commands.chaos as chaos_cmd
from elastix.backends.base import Fault, KillRecord
from elastix.main import main
from elastix.measure.soak import _killer


@pytest.mark.parametrize(("args", "message"), [
    (["--fault", "slice", "--count", "3"],
     "--count 3 asks more slice faults than w holds: 2 slices of 2 hosts, so 2 slices to fault"),
    (["--mode", "slice", "--count", "3"],
     "--count 3 asks more slice faults than w holds: 2 slices of 2 hosts, so 2 slices to fault"),
    (["--count", "5"],
     "--count 5 asks more host faults than w holds: 2 slices of 2 hosts, so 4 hosts to fault"),
    (["--mode", "host", "--fault", "term", "--count", "5"], "--count 5 asks more host faults"),
    (["--fault", "head", "--count", "2"],
     "--count 2 asks more head faults than w holds: 2 slices of 2 hosts, so 1 head to fault"),
])
def test_a_count_beyond_the_workload_is_refused_before_any_fault(tmp_path, capsys,
                                                                 monkeypatch, args, message):
    stand = Stand()
    monkeypatch.setattr(chaos_cmd, "get_backend", lambda target: stand)
    code = main(["chaos", "run", "w", "--kills", "1", *args, "--backend", "local",
                 "--state-dir", str(tmp_path / "state")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 2, lines
    assert lines[0] == f"error: {message}" or lines[0].startswith(f"error: {message}"), lines
    assert lines[1].startswith("hint: use --count "), lines
    assert stand.injected == []


def test_a_plan_round_beyond_the_workload_names_its_round(tmp_path, capsys, monkeypatch):
    stand = Stand()
    monkeypatch.setattr(chaos_cmd, "get_backend", lambda target: stand)
    plan = tmp_path / "p.yaml"
    plan.write_text("rounds:\n- {fault: kill}\n- {fault: slice, count: 3}\n")
    code = main(["chaos", "run", "w", "--plan", str(plan), "--dry-run", "--backend", "local",
                 "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err
    assert code == 2 and "error: round 2: count 3 asks more slice faults than w holds" in err
    assert stand.injected == []


class Picking(Stand):
    """The stand-in, choosing an unnamed victim from the seed among the running workers, as
    the local backend does; a killed host still reads Running (not yet replaced)."""

    def inject(self, name, fault, *, slice=None, host=None, seed=None, dry_run=False):
        running = [(p.slice, p.host) for s in self.status(name).slices for p in s.pods
                   if slice is None or p.slice == slice]
        rng = random.Random(seed)
        if fault.kind == "slice":
            chosen = slice if slice is not None else rng.choice(sorted({s for s, _ in running}))
            victims = [(s, h) for s, h in running if s == chosen]
        else:
            victims = [(slice, host)] if host is not None else [rng.choice(running)]
        self.injected += [(fault.kind, s, h, seed) for s, h in victims]
        now = dt.datetime.now(dt.timezone.utc)
        return [KillRecord(name, f"{name}-worker-{s}-{h}", s, h, None, now, fault=fault.kind)
                for s, h in victims]


@pytest.mark.parametrize("mode", ["random", "host"])
def test_a_round_never_hits_one_host_twice(mode):
    for seed in range(20):
        stand = Picking()
        recs = _killer(stand, "w", mode, random.Random(seed), Fault("kill"), count=4)()
        hosts = [(r.slice, r.host) for r in recs]
        assert len(hosts) == 4 and len(set(hosts)) == 4, (seed, hosts)
        assert {s for s, _ in hosts[:2]} == {0, 1}, (seed, hosts)  # a slice not yet hit first


def test_a_slice_round_takes_each_slice_once():
    for seed in range(10):
        stand = Picking()
        recs = _killer(stand, "w", "random", random.Random(seed), Fault("slice"), count=2)()
        assert sorted({r.slice for r in recs}) == [0, 1] and len(recs) == 4, recs
        assert all(dataclasses.asdict(r)["fault"] == "slice" for r in recs)
