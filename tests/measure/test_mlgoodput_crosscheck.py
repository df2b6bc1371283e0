"""elastix's ml-goodput view against Google's own calculator, on real recorded runs.

The same entries (:func:`elastix.measure.mlgoodput.entries` of a run's events) go to the real
``ElasticGoodputCalculator`` of ml-goodput-measurement 0.2.3 (the test extra's pin) and to
:func:`elastix.measure.mlgoodput.calculate`; they must agree to 0.5 points of goodput and, per
category, to 1 % of the wall time. Offline: any connection beyond loopback fails the test.
"""

from __future__ import annotations

import datetime
import socket
import types
from pathlib import Path

import pytest

from elastix.measure import mlgoodput
from elastix.measure.events import events_from_jsonl

FIX = Path(__file__).parent / "fixtures"
RUNS = ("clean_run", "replica_resize_run", "replica_resize_down_run", "real_run", "real_run2")


class _Entries:
    """Stands in for the library's ``_CloudLogger``: hands over the entries once."""

    def __init__(self, job: str, entries: list[dict]):
        self.job_name, self.job_start_time = job, None
        self._entries = entries

    def write_cloud_logging_entry(self, entry):  # pragma: no cover - the calculator only reads
        self._entries.append(entry)

    def flush(self):
        pass

    def read_cloud_logging_entries(self, start_time=None, end_time=None, last_entry_info=None):
        out, self._entries = self._entries, []
        return out, (None, None)


def library_report(entries: list[dict], now: float, cache_dir: Path, monkeypatch) -> dict:
    """The real library's goodput, breakdown and details for ``entries``.

    The one place this suite reaches into the library's private parts, and why:
    - ``cloud_logger=``: ``GoodputCalculator.__init__`` (goodput.py L610-646) documents it as
      "Should never be passed directly by the user"; it is the library's own tests' seam and the
      only way to give the calculator entries without Cloud Logging.
    - ``goodput.datetime``: ``get_job_goodput`` ends a job that recorded no end at *now*
      (L1254-1294); a recorded run without ``run_end`` is measured up to its last event, so the
      clock is pinned there (only for that call).
    """
    from ml_goodput_measurement.src import goodput as gp
    from ml_goodput_measurement.src import goodput_elastic

    class _Now(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(now, tz)

    monkeypatch.setattr(gp, "datetime", types.SimpleNamespace(
        datetime=_Now, timezone=datetime.timezone, timedelta=datetime.timedelta))
    calc = goodput_elastic.ElasticGoodputCalculator(
        "elastix-run", "elastix", cloud_logger=_Entries("elastix-run", list(entries)),
        cache_dir=str(cache_dir))
    pct, breakdown, max_step = calc.get_job_goodput(include_badput_breakdown=True)
    details = calc.get_job_goodput_details()
    return {"goodput": pct, "breakdown": {k.name: v for k, v in breakdown.items()},
            "max_step": max_step, "details": details}


@pytest.fixture
def no_network(monkeypatch):
    """Refuse every connection that is not loopback."""
    real = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") \
                and self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"the cross-check tried to reach {address}")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


def _run(name: str):
    events = events_from_jsonl((FIX / f"{name}.events.jsonl").read_text())
    return events, mlgoodput.entries(events)


@pytest.mark.parametrize("name", RUNS)
def test_same_goodput_and_categories_as_the_library(name, tmp_path, monkeypatch, no_network):
    pytest.importorskip("ml_goodput_measurement", reason="pip install -e '.[test]' (.ci/setup)")
    events, entries = _run(name)
    ours = mlgoodput.measure(events)
    lib = library_report(entries, events[-1].t / 1000, tmp_path, monkeypatch)
    assert abs(ours.goodput_percent - lib["goodput"]) <= 0.5, (ours.goodput_percent, lib)
    mine = ours.badput_percent()
    assert set(lib["breakdown"]) <= set(mine)
    for cat, theirs in lib["breakdown"].items():
        if isinstance(theirs, dict):
            assert set(theirs) == set(mine[cat]), cat
            for sub, v in theirs.items():
                assert abs(mine[cat][sub] - v) <= 1.0, (cat, sub, mine[cat][sub], v)
        else:
            assert abs(mine[cat] - theirs) <= 1.0, (cat, mine[cat], theirs)
    d = lib["details"]
    assert abs(ours.total_elapsed_time - d["total_elapsed_time"]) < 1e-3
    assert ours.max_productive_step == lib["max_step"]
    assert ours.disruption_count == d["disruption_count"]
    assert abs(ours.stepping_slice_efficiency - d["stepping_slice_efficiency"]) <= 0.01
    assert abs(ours.available_slice_efficiency - d["available_slice_efficiency"]) <= 0.01


def test_the_runs_reach_the_categories_they_are_here_for():
    """A feed that silently stopped mapping an event would still agree with the library:
    each run must land time in what it is in the suite for."""
    got = {n: mlgoodput.measure(_run(n)[0]) for n in RUNS}
    clean = got["clean_run"]
    assert clean.disruption_count == 0 and clean.ended
    assert clean.badput_seconds["TRAINING_PREP"] > 0
    assert clean.badput_seconds["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] > 0
    up = got["replica_resize_run"]
    assert up.badput_seconds["ELASTIC_SCALE_UP"] > 0
    assert up.badput_seconds["ELASTIC_REINITIALIZATION"] > 0
    assert up.badput_seconds["CUSTOM_BADPUT_EVENTS"][mlgoodput.SNAPSHOT] > 0
    down = got["replica_resize_down_run"]
    assert down.stepping_slice_efficiency < 0.75  # most of the run on 1 of 2 slices
    assert got["real_run"].badput_seconds["WASTED_PROGRESS_FROM_DISRUPTION"] > 0
    assert not got["real_run"].ended  # no run_end: measured to its last event
