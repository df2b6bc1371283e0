"""elastix-train writes ml-goodput-measurement's records as it trains (issue 36, item 3).

The records are what Google's recorders would have logged for the run (``elastix.protocol.
mlgoodput.Feed``, event by event); they go to a file beside a local events file and, with
``--ml-goodput-logger``, through the library's own ``ElasticGoodputRecorder`` to Cloud Logging.
Here the recorder is the real one, writing into the library's test seam (tests/fakes/
goodput_library.py), and the real calculator reads what it wrote.
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path

import pytest
from goodput_library import Entries, library_report, refuse_network
from trainer_helpers import make_cfg, on, run_cli, run_elastic

from elastix.measure import mlgoodput
from elastix.measure.events import events_from_jsonl, events_from_records
from elastix.protocol import eventspec
from elastix.protocol.mlgoodput import JOB_END, JOB_START, STEP_COUNT
from elastix_trainer.elastic.health import ManualHealth
from elastix_trainer.obs.mlgoodput import MlGoodputSink, RecorderWriter, entries_path
from elastix_trainer.train import run_start_event

JOB = "elastix-run"


def _key(e: dict) -> tuple:
    """Order-free identity of an entry: its keys and its first time, to 10 ms (a commit is
    emitted from a watcher thread, so its entry's place among the steps' may differ)."""
    times = [v for k, v in sorted(e.items()) if k.endswith(("_time", "_timestamp"))]
    return tuple(sorted(e)), round(times[0], 2) if times else None, e.get("step")


def assert_same_entries(got: list[dict], want: list[dict], tol: float = 0.002) -> None:
    """The same entries, each value equal, times within ``tol`` s (the events file keeps ms,
    the live records us)."""
    kinds = Counter(tuple(sorted(e)) for e in got)
    wanted = Counter(tuple(sorted(e)) for e in want)
    assert kinds == wanted, (kinds - wanted, wanted - kinds)
    for a, b in zip(sorted(got, key=_key), sorted(want, key=_key), strict=True):
        assert set(a) == set(b), (a, b)
        for k in a:
            if isinstance(a[k], float) and isinstance(b[k], float):
                assert abs(a[k] - b[k]) <= tol, (k, a, b)
            else:
                assert a[k] == b[k], (k, a, b)


def test_live_records_are_the_derived_ones_and_the_library_reads_them(tmp_path, monkeypatch):
    """A run that loses a slice and waits for it: the records written live equal the ones
    ``workload goodput --categories ml-goodput`` derives from its events, the real recorder logs
    exactly them, and the real calculator over that log agrees with elastix's view."""
    pytest.importorskip("ml_goodput_measurement", reason="pip install -e '.[test]' (.ci/setup)")
    from ml_goodput_measurement.src.goodput_elastic import ElasticGoodputRecorder

    refuse_network(monkeypatch)
    logged: list[dict] = []
    recorder = ElasticGoodputRecorder(JOB, "goodput_test", logging_enabled=True,
                                      cloud_logger=Entries(JOB, logged))
    live: list[dict] = []
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), num_slices=2, steps=14,
                   snapshot_period=3)
    health = ManualHealth(cfg.num_slices)
    health.on_wait = lambda h, required: h.set_up(*range(h.num_slices))

    def setup(trainer, runtime):
        setup.sink = MlGoodputSink(JOB, [live.append, RecorderWriter(recorder)]).attach(
            trainer.events)
        run_start_event(trainer, cfg)  # as elastix-train starts (elastix_trainer.program)

        def down_once(session, n, fired=[]):  # noqa: B006 - once per run
            if n == 11 and not fired:
                fired.append(n)
                health.set_down(1)
        on(trainer, before_dispatch=down_once)

    outcome, trainer, _ = run_elastic(cfg, health, setup=setup)
    assert outcome.status == "completed"
    trainer.events.emit(eventspec.RUN_END, status=outcome.status, reason=outcome.reason,
                        step=outcome.step)
    setup.sink.close()
    events = events_from_records(trainer.events.records)
    assert [e.name for e in events].count("elastic_detected") == 1

    assert_same_entries(live, mlgoodput.entries(events, job=JOB))
    kinds = {k for e in live for k in e}
    assert {JOB_START, JOB_END, STEP_COUNT, "elastic_wait_start_time", "elastic_reinit_end_time",
            "custom_badput_event_start_time", "elastic_slice_counts_timestamp",
            "event_type"} <= kinds
    assert_same_entries(logged, live, tol=1e-6)  # through the recorder's public calls

    ours = mlgoodput.measure(events)
    lib = library_report(logged, events[-1].t / 1000, tmp_path, monkeypatch)
    assert abs(ours.goodput_percent - lib["goodput"]) <= 0.5, (ours.goodput_percent, lib)
    assert lib["details"]["disruption_count"] == ours.disruption_count
    assert lib["breakdown"]["ELASTIC_SLICE_DOWN"] > 0


def test_the_trainer_writes_them_privately_and_trains_on_without_the_library(tmp_path):
    """``elastix-train --ml-goodput-logger`` where the library cannot be imported: one warning,
    the run completes, and the records still go to the file beside the events file (0600)."""
    shim = tmp_path / "shim" / "ml_goodput_measurement"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    events_file = tmp_path / "run" / "events.jsonl"
    path = os.pathsep.join(p for p in (str(shim.parent), os.environ.get("PYTHONPATH")) if p)
    p = run_cli(["--preset", "tiny", "--steps", "3", "--batch-per-device", "1", "--seq-len", "16",
                 "--num-slices", "2", "--events-file", str(events_file),
                 "--ml-goodput-logger", "goodput_elastix-run"], PYTHONPATH=path,
                ELASTIX_WORKLOAD=JOB)
    assert p.returncode == 0, p.stderr
    out = p.stdout + p.stderr
    assert out.count("ml-goodput-measurement is not installed") == 1, out
    assert "Traceback" not in out
    records = Path(entries_path(str(events_file)))
    assert stat.S_IMODE(records.stat().st_mode) == 0o600
    got = [json.loads(line) for line in records.read_text().splitlines()]
    assert {e["job_name"] for e in got} == {JOB}
    assert JOB_START in got[0] and JOB_END in got[-1]
    assert [e[STEP_COUNT] for e in got if STEP_COUNT in e] == [0, 1, 2]
    events = events_from_jsonl(events_file.read_text())
    assert_same_entries(got, mlgoodput.entries(events, job=JOB))
