"""GKE's ``workload list`` and ``status`` show training, read from the head pod's log.

The fake API server serves the head pod a recorded run's log lines (docs/events.md); the real
CLI (in-process) and the GKE backend read them through the official client. The numbers must
be those the local backend shows for the same run from its events file.
"""

from __future__ import annotations

import datetime as dt
import json

import fake_cluster as gke
import pytest
from measure_helpers import recorded_run, to_log, ts

from elastix.backends.gke.backend import GKEBackend
from elastix.backends.gke.training import LIST_TAIL
from elastix.clients.kube import api_client_from_kubeconfig
from elastix.main import main
from elastix.measure.events import events_from_records
from elastix.measure.progress import progress, read_progress


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with gke.serving(tmp_path, monkeypatch, gke.QUIET) as f:
        yield f


def _json(capsys, *argv: str):
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _expected(recs):
    """What the local backend shows for the same run (its events file)."""
    steps = [r for r in recs if r["event"] == "step"]
    return progress(events_from_records(recs), round(steps[-1]["loss"], 4)).to_json()


def test_status_and_list_show_the_runs_training_as_the_local_backend_does(fake, capsys):
    recs, _ = recorded_run()
    gke.head_logging(fake, to_log(recs))
    want = _expected(recs)
    assert want["last_step"] == 20 and want["goodput"] is not None and want["recoveries"] == 1
    assert _json(capsys, "workload", "status", "demo", "-o", "json")["training"] == want
    [item] = _json(capsys, "workload", "list", "-o", "json")
    assert item["training"] == want  # a short log: the tail reaches its start
    capsys.readouterr()
    assert main(["workload", "list", "-o", "wide"]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("demo"))
    assert " 20 " in row and "4.8000" in row and f"{want['goodput'] * 100:.1f} %" in row
    assert main(["workload", "status", "demo"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("training:"))
    assert "step 20 (" in line and "loss 4.8000" in line and "1 recovery" in line


def test_list_reads_a_tail_and_status_the_whole_log(fake, capsys):
    recs, _ = recorded_run()
    more = [{"ts": ts(19 + k / 10), "event": "step", "pid": 4242, "step": 21 + k,
             "seconds": 0.1, "loss": 4.0 - k / 1000, "live_slices": 4}
            for k in range(LIST_TAIL)]  # more steps than list reads lines
    gke.head_logging(fake, to_log(recs[:-1] + more))
    status = _json(capsys, "workload", "status", "demo", "-o", "json")["training"]
    item = _json(capsys, "workload", "list", "-o", "json")[0]["training"]
    assert status["last_step"] == item["last_step"] == 20 + LIST_TAIL
    assert status["loss"] == item["loss"] is not None
    assert status["goodput"] is not None and status["recoveries"] == 1
    # The last 400 lines are not the run: its goodput and recoveries are not claimed.
    assert item["goodput"] is None and item["recoveries"] is None
    assert item["step_seconds"] == status["step_seconds"] == 0.1


def test_a_refresh_asks_only_for_the_lines_since_the_last_one(fake, capsys):
    recs, _ = recorded_run()
    head = gke.head_logging(fake, to_log(recs[:10]))
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    backend = GKEBackend(api, "default", where)
    backend.status("demo")
    first = read_progress(backend, "demo", whole=True)
    assert first is not None and first.last_step == 9
    fake.admin("log", {"pod": head["metadata"]["name"],
                       "container": head["spec"]["containers"][0]["name"],
                       "lines": to_log(recs)[12:]})
    fake.requests(clear=True)
    backend.status("demo")
    again = read_progress(backend, "demo", whole=True)
    assert again is not None and again.last_step == 20
    assert again.goodput == _expected(recs)["goodput"]  # old lines kept, new ones added once
    logs = [r["query"] for r in fake.requests() if r["path"].endswith("/log")]
    assert len(logs) == 1 and "sinceSeconds" in logs[0] and "tailLines" not in logs[0]


def test_no_head_log_yet_is_said_not_an_error(fake, capsys):
    assert main(gke.CREATE) == 0  # the head has only the fake's start-up line
    gke.wait_for(lambda: [p for p in fake.pods(gke.HEAD) if p["status"].get("phase") == "Running"],
                 what="head")
    training = _json(capsys, "workload", "status", "demo", "-o", "json")["training"]
    assert training["last_step"] is None
    capsys.readouterr()
    assert main(["workload", "status", "demo"]) == 0
    assert "training: no step completed yet" in capsys.readouterr().out


def test_after_a_log_rotation_the_goodput_is_not_the_runs(fake, capsys):
    """The kubelet serves only the latest log file: once rotated, the lines no longer reach
    the head's first line, so status shows the last step but claims no goodput so far."""
    recs, _ = recorded_run()
    head = gke.head_logging(fake, to_log(recs))
    where = {"pod": head["metadata"]["name"], "container": head["spec"]["containers"][0]["name"]}
    assert _json(capsys, "workload", "status", "demo", "-o", "json")["training"]["goodput"]
    fake.admin("rotate_log", where)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)  # an hour into the run
    stamp = later.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    fake.admin("log", {**where, "timestamps": True,
                       "lines": [f"{stamp} {line}" for line in to_log(recs)[-6:]]})
    training = _json(capsys, "workload", "status", "demo", "-o", "json")["training"]
    assert training["last_step"] == 20 and training["loss"] == 4.8
    assert training["goodput"] is None and training["recoveries"] is None


def test_a_real_maxtext_head_log_shows_its_training(fake, capsys):
    """A MaxText head's log as MaxText 0.2.5 really printed it (tests/fixtures/maxtext/plain.log,
    with the kubelet's timestamps; PROVENANCE.md): list and status show its last step and loss."""
    from pathlib import Path

    log = Path(__file__).resolve().parents[1] / "fixtures" / "maxtext" / "plain.log"
    lines = log.read_text(encoding="utf-8").splitlines()
    last = [ln for ln in lines if "completed step: " in ln][-1]
    step = int(last.split("completed step: ", 1)[1].split(",", 1)[0])
    loss = float(last.rsplit("loss: ", 1)[1].split(",", 1)[0])
    assert main(gke.CREATE) == 0
    head = gke.wait_for(lambda: [p for p in fake.pods(gke.HEAD)
                                 if p["status"].get("phase") == "Running"], what="head")[0]
    fake.admin("log", {"pod": head["metadata"]["name"],
                       "container": head["spec"]["containers"][0]["name"], "lines": lines,
                       "timestamps": True})
    status = _json(capsys, "workload", "status", "demo", "-o", "json")["training"]
    [item] = _json(capsys, "workload", "list", "-o", "json")
    assert status["last_step"] == item["training"]["last_step"] == step == 29
    assert status["loss"] == item["training"]["loss"] == pytest.approx(loss)
