"""An aim the run can never meet is refused before any fault (exit 2), as the command runs it:
``chaos kill-worker --during save`` on a head that saves nothing, ``--at-step`` a step already
past, ``--during compile`` on a run already stepping (issue 59: it waited the whole
``--timeout``). The rule itself is tests/measure/test_aim.py's; this is its wiring, the real
command and runner against a workload whose events file is a real file, and a backend that
records every fault asked of it (issue 50: a rule tested in the fast tier, not through a real
trainer)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from measure_helpers import T0
from test_aim import CONFIG, rec
from test_plan import Stand

from elastix.backends.base import PodInfo
from elastix.commands import chaos as chaos_cmd
from elastix.main import main


class Recorded(Stand):
    """The stand-in workload, its trainer's events in ``path``."""

    def __init__(self, path) -> None:
        super().__init__()
        self.path = path

    def events_path(self, name: str) -> str:
        return str(self.path)

    def trainer_events(self, name: str, **kw):
        return None

    def status(self, name: str):
        """Running, its head too: started (a minute) before the run it wrote."""
        st = super().status(name)
        st.head = PodInfo(f"{name}-head", "head", "Running", started=T0 - dt.timedelta(minutes=1),
                          pid=7)
        return st


@pytest.mark.parametrize(("args", "config", "fragment"), [
    (["--during", "save"], {**CONFIG, "checkpoint_dir": None},
     "--during save: the head saves no checkpoints"),
    (["--at-step", "1"], CONFIG, "--at-step 1 is in the past: the run is at step 20"),
    # issue 59, item 7: waited the whole --timeout (10 minutes by default), then exit 1
    (["--during", "compile"], CONFIG,
     "--during compile: w is already stepping (step 20): its first compile has passed, and its "
     "head is not restarting"),
])
def test_an_aim_the_run_cannot_meet_kills_nothing(tmp_path, monkeypatch, capsys, args, config,
                                                  fragment):
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(r) + "\n" for r in [
        rec(0, "run_start", config=config),
        *(rec(1 + 0.1 * i, "step", step=i) for i in range(1, 21))]))
    stand = Recorded(events)
    monkeypatch.setattr(chaos_cmd, "get_backend", lambda target: stand)
    code = main(["chaos", "kill-worker", "w", *args, "--timeout", "10s", "--backend", "local",
                 "--state-dir", str(tmp_path / "state")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and fragment in lines[-2] and lines[-1].startswith("hint: "), lines
    assert stand.injected == []
