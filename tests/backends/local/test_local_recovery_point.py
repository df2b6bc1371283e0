"""Local ``status`` shows the recovery point from the workload's real events file, as the GKE
head publishes it on its JobSet: the newest commit, its time, the steps since."""

from __future__ import annotations

import json
from pathlib import Path

from local_records import recorded_workload

from elastix.protocol import timefmt
from elastix.views.console import console
from elastix.views.status import status_renderable

# A real local run (400 steps, a checkpoint every 20, a slice lost and recovered).
RUN = Path(__file__).resolve().parents[2] / "measure" / "fixtures" / "real_run2.events.jsonl"


def _workload(state_dir: Path, lines: list[str]) -> None:
    recorded_workload(state_dir, "demo", "Completed", events=lines)


def test_status_and_list_show_the_newest_commit_and_the_steps_since(backend, state_dir):
    lines = RUN.read_text().splitlines()
    records = [json.loads(ln) for ln in lines]
    # The file as status reads it mid-run: cut 7 steps after a commit that is not the last.
    commits = [i for i, r in enumerate(records) if r["event"] == "checkpoint_committed"]
    commit = records[commits[len(commits) // 2]]
    steps_after = [i for i, r in enumerate(records) if r["event"] == "step"
                   and r["step"] > commit["step"]]
    end = steps_after[6] + 1
    assert all(r["event"] != "checkpoint_committed" for r in records[commits[len(commits) // 2]
                                                                    + 1:end])
    _workload(state_dir, lines[:end])

    st = backend.status("demo")
    when = timefmt.parse(commit["ts"])
    assert st.to_json()["recovery_point"] == {"step": commit["step"],
                                              "committed": timefmt.iso_ms(when),
                                              "steps_at_risk": 7}
    assert [w.recovery_point for w in backend.list()] == [st.recovery_point]
    c = console(width=120)
    with c.capture() as cap:
        c.print(status_renderable(st))
    assert (f"recovery point: step {commit['step']} (committed {when:%H:%M:%S}Z, 7 steps at "
            "risk)") in cap.get()


def test_nothing_committed_or_no_events_file_is_no_recovery_point(backend, state_dir):
    _workload(state_dir, [ln for ln in RUN.read_text().splitlines()[:30]
                          if "checkpoint_committed" not in ln and "restore" not in ln])
    assert backend.status("demo").recovery_point is None
    (state_dir / "demo" / "events.jsonl").unlink()
    assert backend.status("demo").recovery_point is None
    c = console(width=120)
    with c.capture() as cap:
        c.print(status_renderable(backend.status("demo")))
    assert "recovery point" not in cap.get()
