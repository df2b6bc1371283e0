"""plan.json and state.json: typed on both sides, the same JSON on disk."""

from __future__ import annotations

import json

import pytest

from elastix.backends.local.state import CorruptStateFile, PodRecord, SliceState, WorkloadState


def test_state_json_round_trips_and_keeps_its_keys(tmp_path):
    head = PodRecord("w-head-0-0-0", "head", None, None, pid=7, create_time=1.5, phase="Running",
                     started="2026-11-29T09:50:01.123456Z", log="/l/head-0.log")
    st = WorkloadState(state="Running", restarts=1, max_restarts=2,
                       supervisor={"pid": 6, "create_time": 1.0}, message="m",
                       updated="2026-11-29T09:50:02.000000Z", head=head,
                       slices=[SliceState(0, 1, 4, [PodRecord("w-worker-0-0-1", "worker", 0, 0)])],
                       events=[{"ts": "2026-11-29T09:50:02.000000Z", "msg": "started"}])
    st.write(tmp_path)
    raw = json.loads((tmp_path / "state.json").read_text())
    assert set(raw) == {"supervisor", "state", "restarts", "max_restarts", "message", "updated",
                        "head", "slices", "events"}
    assert set(raw["slices"][0]) == {"index", "failures", "backoff_limit", "pods"}
    assert set(raw["head"]) == {"name", "role", "slice", "host", "pid", "create_time", "phase",
                                "started", "exit_code", "reason", "log"}
    assert WorkloadState.read(tmp_path) == st


def test_missing_state_json_reads_as_pending(tmp_path):
    st = WorkloadState.read(tmp_path)
    assert (st.state, st.restarts, st.slices, st.head) == ("Pending", 0, [], None)


@pytest.mark.parametrize(("content", "error"), [
    (b"{not json", "JSONDecodeError"),
    (b"", "JSONDecodeError"),  # truncated (a full disk)
    (b"\xff\xfe{}", "UnicodeDecodeError"),
    (b"[1, 2]", "AttributeError"),
    (b'{"head": 5}', "TypeError"),
    (b'{"slices": [{"index": 0}]}', "KeyError"),
])
def test_a_damaged_state_json_names_the_file_and_the_fix(tmp_path, content, error):
    d = tmp_path / "demo"
    d.mkdir()
    (d / "state.json").write_bytes(content)
    with pytest.raises(CorruptStateFile) as err:
        WorkloadState.read(d)
    assert err.value.message.startswith(f"local workload 'demo' is damaged: {d / 'state.json'} "
                                        f"is not a valid state.json ({error}")
    assert err.value.hint == ("remove it with: elastix workload delete demo --backend local "
                              f"(--state-dir {tmp_path})")
    assert err.value.exit_code == 2
    assert isinstance(err.value, ValueError)  # delete still sweeps a damaged workload
