"""Real MaxText (docs/maxtext.md's command, made tiny) trained on CPU, SIGKILLed after a checkpoint,
restarted, and measured from the log it really printed (``conftest.maxtext_run``).

What each number should be is read from the log's own lines here (the last step the killed
process completed, the step MaxText says it restores, Orbax's load time), never assumed.
"""

from __future__ import annotations

import json
import re
import subprocess

import mtrun
import pytest
import yaml
from mtsuite import SAVED, STEPS, require_maxtext

from elastix.main import main
from elastix.measure.events import events_from_log, fmt_ms, parse_ts, recoveries

pytestmark = pytest.mark.maxtext

STEP = re.compile(r"completed step: (\d+),")


def _steps(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for x in lines if (m := STEP.search(x))]


def _first(lines: list[str], pattern: str) -> re.Match:
    return next(m for x in lines if (m := re.search(pattern, x)))


def _ms(line: str) -> int:
    """A stamped line's time as measurement truncates it (ms; Python takes 6 digits)."""
    stamp = line.split(" ", 1)[0]
    return parse_ts(stamp[:26] + "Z")


def test_readme_shows_maxtexts_entry_point_config_and_real_flags():
    """The module and config docs/maxtext.md names exist in the pinned MaxText, and every flag of
    the published run is a key of that MaxText's base.yml (a misspelt one fails at start)."""
    require_maxtext()
    words = mtrun.readme_command()
    assert words[:3] == ["-m", mtrun.MODULE, mtrun.CONFIG]
    py = str(mtrun.maxtext_python())
    where = subprocess.run(
        [py, "-c", "import importlib.util as u, os; s = u.find_spec('maxtext.trainers.pre_train"
                   ".train'); print(os.path.dirname(u.find_spec('maxtext').origin))"],
        check=True, capture_output=True, text=True, timeout=120).stdout.strip()
    base = yaml.safe_load(open(f"{where}/configs/base.yml"))
    flags = [w.partition("=")[0] for w in words[3:]]
    assert "elastic_enabled" in flags and "checkpoint_period" in flags
    assert [f for f in flags if f not in base] == []


def test_the_readme_command_trains_saves_and_restarts(maxtext_run):
    r = maxtext_run
    assert any(f"Saved a checkpoint at step {SAVED}." in x for x in r.first)
    assert _steps(r.first)[-1] >= SAVED  # killed mid-run, after the save
    assert r.second_code == 0
    assert _steps(r.second)[-1] == STEPS - 1


def test_the_restart_is_measured_from_the_real_log(maxtext_run):
    r = maxtext_run
    last_before = _steps(r.first)[-1]
    restored = int(_first(r.second, r"restoring from this run's directory step (\d+)").group(1))
    load = float(_first(r.second, r"Finished load in (\d+\.\d+) seconds").group(1))
    events = events_from_log(r.lines)
    assert events.skipped == 0
    (rec,) = recoveries(events)
    assert rec.kind == "restart" and rec.complete
    assert (rec.last_step, rec.restored_step, rec.first_step) == (last_before, restored,
                                                                  restored + 1)
    assert rec.steps_lost == last_before - restored
    assert rec.restore_load_seconds == load and rec.restore_source == "checkpoint"
    # The new process began at its own first line, right after the killed one's last.
    assert rec.start == _ms(r.second[0])
    assert rec.prev_event is not None and rec.prev_event <= _ms(r.first[-1])
    assert all(v is not None and v >= 0 for v in rec.phase_seconds().values())
    assert rec.not_in_log == []


def test_goodput_of_the_real_log(maxtext_run, capsys):
    r = maxtext_run
    assert main(["workload", "goodput", "--log", str(r.log), "-o", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["source"] == f"log {r.log}"  # nothing skipped
    # Start-up counts from the first process's first line, not from its step 0.
    assert d["start"] == fmt_ms(_ms(r.first[0]))
    step0 = next(x for x in r.first if "completed step: 0," in x)
    assert d["badput_seconds"]["startup"] > 0 and _ms(step0) > _ms(r.first[0])
    (rec,) = d["recoveries"]
    assert rec["kind"] == "restart" and d["steps_redone"] == rec["steps_lost"]
    saves = sum(1 for x in r.lines if "Saved a checkpoint at step" in x)
    assert saves >= 3 and d["badput_seconds"]["checkpoint_stall"] > 0
    assert d["last_step"] == STEPS - 1
