"""The default local job's checkpoints outlive its workload: `create --replace` resumes from
them, `delete` keeps them and says where, `delete --delete-data` removes them and says so.
(They used to live in the workload's state directory, so replace and delete removed them
without a word, and training started again from step 1.)"""

from __future__ import annotations

import json
import subprocess
import sys

from local_helpers import STANDIN, wait_until

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
        # committed, whether or not it is also a periodic one's step (a busy CI run's SIGTERM
        # came at step 60, with --checkpoint-period 20): run_end's reason says it was the
        # final save that committed it
        assert step in _committed(state_dir)
        assert json.loads(cli("workload", "list", "-o", "json").stdout) == []
        cli(*CREATE)
        removed = cli("workload", "delete", "keep", "--wait", "--delete-data")
        assert f"removed its data (checkpoints) in {kept}" in removed.stderr
        assert not kept.exists()
    finally:
        cli("workload", "delete", "keep", "--wait", check=False)


def test_deleting_a_workload_waiting_for_a_killed_slice_commits_its_host_snapshot(cli,
                                                                                state_dir):
    """A worker is killed and its replacement is far away (a slow scheduler, as GKE replacing
    a TPU VM): the head waits for it. Deleted meanwhile, the head stops waiting at the SIGTERM
    and commits its newest host snapshot (newer than any checkpoint) before it exits. (It used
    to wait on for the slice, be SIGKILLed at the end of its 30 s grace, and lose the steps
    since the last checkpoint.)"""
    cli(*CREATE, "--command", "elastix-train --preset tiny --steps 100000 --step-delay 0.05 "
        "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" --checkpoint-period 1000 "
        "--snapshot-period 3", env={"ELASTIX_LOCAL_SCHEDULING_DELAY": "600"})
    try:
        events = state_dir / "keep" / "events.jsonl"
        wait_until(lambda: [e for e in _events(state_dir)
                            if e["event"] == "snapshot_taken" and e["step"] >= 6], 240,
                   "two host snapshots")
        with open(events, encoding="utf-8") as f:  # readable after delete removes the file
            cli("chaos", "kill-worker", "keep", "--slice", "1")
            wait_until(lambda: [e for e in _events(state_dir)
                                if e["event"] == "elastic_cleanup_done"], 120,
                       "the head waiting for the killed slice")
            cli("workload", "delete", "keep", "--wait")
            records = [json.loads(ln) for ln in f.read().splitlines() if ln.strip()]
    finally:
        cli("workload", "delete", "keep", "--wait", check=False)
    (lost,) = [r for r in records if r["event"] == "elastic_detected"]
    snap = max(r["step"] for r in records  # the newest kept: none of a step after the loss
               if r["event"] == "snapshot_taken" and r["step"] <= lost["last_step"])
    (end,) = [r for r in records if r["event"] == "run_end"]
    assert end["reason"].endswith(f"its slices went while it stopped: saved the host snapshot "
                                  f"of step {snap}"), end
    assert _committed(state_dir) == [snap]


def test_replace_and_delete_move_what_the_command_wrote_in_its_workload_dir(cli, state_dir):
    """A ``--command`` that keeps its checkpoints in ``$ELASTIX_WORKLOAD_DIR`` (the state
    directory, which replace and delete remove) loses nothing: each run's files are moved into
    the workload's kept data, and the notice says where, in one line. (``create --replace``
    used to remove them with the directory while saying the data was kept.)"""
    write = ('mkdir -p "$ELASTIX_WORKLOAD_DIR/ckpt" && echo {n} > "$ELASTIX_WORKLOAD_DIR/ckpt/7" '
             f"&& {sys.executable} {STANDIN} --step-delay 0.05")
    create = ("workload", "create", "mine", "--tpu-type", "v5litepod-8", "--command")
    ckpt = state_dir / "mine" / "ckpt" / "7"
    cli(*create, write.format(n="first"))
    try:
        wait_until(lambda: ckpt.exists() and ckpt.read_text() == "first\n", 60, "the first file")
        replaced = cli(*create, write.format(n="second"), "--replace")
        kept = state_dir / ".data" / "mine"
        (first,) = kept.glob("workload-dir-*")
        line = " ".join(replaced.stderr.split())
        assert (f"kept its data (checkpoints) in {kept}, and moved what its command wrote in "
                f"$ELASTIX_WORKLOAD_DIR (ckpt) to {first}; --delete-data removes it") in line
        assert (first / "ckpt" / "7").read_text() == "first\n"
        wait_until(lambda: ckpt.exists() and ckpt.read_text() == "second\n", 60, "the second")
        gone = cli("workload", "delete", "mine", "--wait")
        (second,) = set(kept.glob("workload-dir-*")) - {first}
        assert f"(ckpt) to {second}; --delete-data removes it" in " ".join(gone.stderr.split())
        assert (second / "ckpt" / "7").read_text() == "second\n"
        assert (first / "ckpt" / "7").read_text() == "first\n"
        removed = cli("workload", "delete", "mine", "--delete-data")
        assert f"removed its data (checkpoints) in {kept}" in removed.stderr
        assert not kept.exists()
    finally:
        cli("workload", "delete", "mine", "--wait", check=False)


def test_a_stopped_supervisor_does_not_cost_the_heads_final_save(cli, state_dir):
    """The local JobSet controller hung (its supervisor SIGSTOPped): ``status`` says so, and
    ``delete`` does the kubelet's part itself, SIGTERM to the head and its grace, so the head
    commits its step and writes run_end. (It used to wait 38 s, SIGKILL the supervisor and
    sweep every process: no final save, the steps since the last checkpoint lost, and delete
    still said it kept the data.)"""
    import os
    import signal

    name = "hung"
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2")
    sup = None
    try:
        events = state_dir / name / "events.jsonl"

        def read() -> list[dict]:
            text = events.read_text() if events.exists() else ""
            return [json.loads(ln) for ln in text.splitlines() if ln.strip()]

        wait_until(lambda: [e for e in read() if e["event"] == "step" and e["step"] > 3
                            and e["step"] % 20 >= 3], 240, "steps past a save")
        sup = json.loads((state_dir / name / "state.json").read_text())["supervisor"]["pid"]
        os.kill(sup, signal.SIGSTOP)
        st = json.loads(cli("workload", "status", name, "-o", "json").stdout)
        assert any(f"the local supervisor (the JobSet controller, pid {sup}) is stopped" in r
                   for r in st["reasons"]), st["reasons"]
        with open(events, encoding="utf-8") as f:
            gone = cli("workload", "delete", name, "--wait")
            records = [json.loads(ln) for ln in f.read().splitlines() if ln.strip()]
        said = " ".join(gone.stderr.split())
        assert "the supervisor (the local JobSet controller) was stopped (SIGSTOP): elastix " \
               "sent the head SIGTERM itself, as a kubelet does, and it exited after" in said, said
        (end,) = [r for r in records if r["event"] == "run_end"]
        step = end["step"]
        assert end["reason"].startswith(f"stopped by SIGTERM after step {step}: checkpoint of "
                                        f"step {step} committed ("), end
        ck = state_dir / ".data" / name / "checkpoints"
        assert step in [int(p.name) for p in ck.iterdir() if p.name.isdigit()]
        assert json.loads(cli("workload", "list", "-o", "json").stdout) == []
    finally:
        if sup is not None:
            try:
                os.kill(sup, signal.SIGCONT)
            except ProcessLookupError:
                pass
        cli("workload", "delete", name, "--wait", "--delete-data", check=False)


def test_two_deletes_at_once_each_say_only_what_they_did(cli, state_dir):
    """One keeps the data, one removes it: they take turns on the workload, so the second
    finds what the first left and says that. (Both used to run at once: one said it kept the
    checkpoints the other removed.)"""
    name = "twice"
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2")
    try:
        ck = state_dir / ".data" / name / "checkpoints"
        wait_until(lambda: ck.exists() and any(p.name.isdigit() for p in ck.iterdir()), 240,
                   "a committed checkpoint")
        base = [sys.executable, "-m", "elastix", "workload", "delete", name, "--wait"]
        keep = subprocess.Popen(base, env=cli.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        wipe = subprocess.Popen([*base, "--delete-data"], env=cli.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        kept_err = " ".join(keep.communicate(timeout=120)[1].split())
        wiped_err = " ".join(wipe.communicate(timeout=120)[1].split())
        assert not (state_dir / ".data" / name).exists()  # --delete-data won, first or last
        assert "removed its data (checkpoints)" in wiped_err, wiped_err
        if "kept its data" in kept_err:
            # the keeping delete went first: the other found only the data, and says so
            assert "only its data was left: removed its data" in wiped_err, wiped_err
            assert keep.returncode == 0
        else:
            # the removing delete went first: the workload was gone for the other
            assert "not found" in kept_err and keep.returncode != 0, kept_err
    finally:
        cli("workload", "delete", name, "--wait", "--delete-data", check=False)
