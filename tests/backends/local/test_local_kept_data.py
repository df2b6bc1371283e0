"""The default local job's checkpoints outlive its workload: `create --replace` resumes from
them, `delete` keeps them and says where, `delete --delete-data` removes them and says so.
(They used to live in the workload's state directory, so replace and delete removed them
without a word, and training started again from step 1.)"""

from __future__ import annotations

import json
import subprocess

from local_helpers import wait_until

CREATE = ("workload", "create", "keep", "--tpu-type", "v5litepod-4", "--num-slices", "2",
          "--elastic-slices", "2")


def _events(state_dir) -> list[dict]:
    path = state_dir / "keep" / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _committed(state_dir) -> list[int]:
    ck = state_dir / ".data" / "keep" / "checkpoints"
    return sorted(int(p.name) for p in ck.iterdir() if p.name.isdigit()) if ck.exists() else []


def _delete_reading_the_events(cli, state_dir) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """``delete --wait`` of the running workload: what it printed, and every event its trainer
    wrote (the file is opened first: it stays readable after delete removes it)."""
    with open(state_dir / "keep" / "events.jsonl", encoding="utf-8") as f:
        gone = cli("workload", "delete", "keep", "--wait")
        records = [json.loads(ln) for ln in f.read().splitlines() if ln.strip()]
    return gone, records


def test_checkpoints_survive_replace_and_delete_unless_asked(cli, state_dir):
    """Also: deleting a running workload commits its last step first. The head is told to stop
    first and commits the step it is on; its slice hosts are stopped only once it has exited.
    (Stopped together, the hosts died first, the head took it for a slice loss and was killed
    before its final save: the steps since the last checkpoint were lost in 2 of 3 tries.)
    One workload serves both stories: each start of the trainer costs a compile."""
    cli(*CREATE)
    try:
        wait_until(lambda: _committed(state_dir), 240, "a committed checkpoint")
        replaced = cli(*CREATE, "--replace")
        kept = state_dir / ".data" / "keep"
        assert (f"note: replaced keep: the previous run's events, logs and measurements are "
                f"removed with it; kept its data (checkpoints) in {kept}; --delete-data removes "
                f"it") in " ".join(replaced.stderr.split())
        restore = wait_until(lambda: [e for e in _events(state_dir) if e["event"] == "restore"],
                             240, "the replaced workload's restore")
        assert restore[0]["source"] == "checkpoint" and restore[0]["step"] >= 20
        wait_until(lambda: [e for e in _events(state_dir)
                            if e["event"] == "step" and e["step"] % 20 >= 3 and e["step"] > 20],
                   240, "steps past a committed checkpoint")
        gone, records = _delete_reading_the_events(cli, state_dir)
        kept = state_dir / ".data" / "keep"
        assert f"kept its data (checkpoints) in {kept}; --delete-data removes it" in gone.stderr
        assert _committed(state_dir)
        (end,) = [r for r in records if r["event"] == "run_end"]
        step = end["step"]
        assert end["reason"].startswith(f"stopped by SIGTERM after step {step}: checkpoint of "
                                        f"step {step} committed ("), end
        assert not [r for r in records if r["event"] == "elastic_detected"]
        assert step in _committed(state_dir) and step % 20
        assert json.loads(cli("workload", "list", "-o", "json").stdout) == []
        cli(*CREATE)
        removed = cli("workload", "delete", "keep", "--wait", "--delete-data")
        assert f"removed its data (checkpoints) in {kept}" in removed.stderr
        assert not kept.exists()
    finally:
        cli("workload", "delete", "keep", "--wait", check=False)
