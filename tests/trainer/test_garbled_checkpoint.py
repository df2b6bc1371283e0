"""Restores verify what they read: bytes flipped in a committed checkpoint (its size unchanged)
are caught by the checksums recorded at commit, and the restore falls back to the newest intact
step. Damage is real: 4 KiB overwritten in the middle of a real Orbax file, on disk or on GCS."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
from fake_gcs import emulator_env
from trainer_helpers import losses, make_cfg, run_cli, run_elastic

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state import manifest
from elastix_trainer.state.checkpoint import Checkpointer
from elastix_trainer.storage import epath


def _largest(step_dir) -> str:
    files = [os.path.join(d, f) for d, _, fs in os.walk(step_dir / "state") for f in fs]
    return max(files, key=os.path.getsize)


def _garble(path: str) -> None:
    """Overwrite 4 KiB in the middle of ``path`` with other bytes, keeping its size."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        old = f.read(4096)
        f.seek(size // 2)
        f.write(bytes(b ^ 0x5A for b in old))
    assert os.path.getsize(path) == size


@pytest.fixture
def ck(reference, tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(reference["ckpt"], ck)
    return ck


def test_commit_records_a_checksum_per_file(ck):
    doc = json.loads((ck / "8" / manifest.NAME).read_text())
    on_disk = {os.path.relpath(os.path.join(d, f), ck / "8")
               for d, _, fs in os.walk(ck / "8") for f in fs} - {manifest.NAME}
    assert doc["algorithm"] == "crc32c" and set(doc["files"]) == on_disk
    assert manifest.verify(str(ck / "8")) is True


def test_garbled_newest_step_falls_back_to_the_intact_one(reference, ck, caplog):
    largest = _largest(ck / "8")
    _garble(largest)
    with caplog.at_level(logging.INFO, logger="elastix_trainer"):
        outcome, trainer, _ = run_elastic(make_cfg(checkpoint_dir=str(ck)))
    assert outcome.status == "completed", outcome
    (damaged,) = trainer.events.of("checkpoint_damaged")
    rel = os.path.relpath(largest, ck / "8")
    assert damaged["step"] == 8 and damaged["error"].startswith(f"{rel} fails its checksum")
    (restore,) = trainer.events.of("restore")
    assert restore["step"] == 4 and restore["verified"] is True
    # The run from step 4 is the uninterrupted run's, to the bit: nothing garbled was read.
    got = losses(trainer.events)
    assert {s: got[s] for s in range(5, 9)} == {s: reference["losses"][s] for s in range(5, 9)}
    said = [r.getMessage() for r in caplog.records if "step 8" in r.getMessage()
            and "checksum" in r.getMessage()]
    assert said == [f"elastix: checkpoint damaged, skipped: step 8: {damaged['error']}"]
    # The garbled files are kept aside, never deleted; step 8 is saved anew and verifies.
    assert [n for n in os.listdir(ck) if n.startswith("8.damaged-")]
    assert manifest.verify(str(ck / "8")) is True


def test_a_restarted_run_does_not_restore_the_garbled_step_again(ck):
    """A workload's head restart is a new process: it must find the damage again by itself,
    not restore the same bad step (the NaN loop of a damaged workload)."""
    _garble(_largest(ck / "8"))
    args = ["--preset", "tiny", "--steps", "12", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--checkpoint-period", "4", "--checkpoint-dir", str(ck)]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [json.loads(ln) for ln in (ck / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "restore"][-1] == 4
    assert [e["step"] for e in events if e["event"] == "checkpoint_damaged"] == [8]
    assert sum("fails its checksum" in ln for ln in proc.stdout.splitlines()) == 1


def test_a_checkpoint_without_checksums_restores_with_one_warning(ck, caplog):
    for step in ("4", "8"):
        os.remove(ck / step / manifest.NAME)  # as written before elastix recorded checksums
    with caplog.at_level(logging.WARNING, logger="elastix_trainer"):
        outcome, trainer, _ = run_elastic(make_cfg(checkpoint_dir=str(ck), steps=10))
    assert outcome.status == "completed", outcome
    (restore,) = trainer.events.of("restore")
    assert restore["step"] == 8 and restore["verified"] is False
    warned = [r.getMessage() for r in caplog.records if "unverified" in r.getMessage()]
    assert len(warned) == 1 and "step 8" in warned[0]


def test_garbled_step_on_gcs_is_caught(gcs, reference, monkeypatch, tmp_path):
    """The check compares the recorded crc32c with the one GCS keeps for each object: the
    garbled object (uploaded whole, as any rewrite is) is caught, and no object is read for
    the check itself, so a restore downloads each object once."""
    reads: list[str] = []
    real_crc = manifest._crc
    monkeypatch.setattr(manifest, "_crc", lambda path: reads.append(path) or real_crc(path))
    for k, v in emulator_env(gcs).items():
        monkeypatch.setenv(k, v)
    path = "gs://ckpts/garbled"
    for root, _, files in os.walk(reference["ckpt"]):
        for name in files:
            local = os.path.join(root, name)
            rel = os.path.relpath(local, reference["ckpt"])
            if rel.split(os.sep)[0] in ("4", "8"):
                epath(f"{path}/{rel}").write_bytes(open(local, "rb").read())
    largest = _largest(type(tmp_path)(reference["ckpt"]) / "8")
    rel = os.path.relpath(largest, reference["ckpt"])
    shutil.copy(largest, tmp_path / "blob")
    _garble(str(tmp_path / "blob"))
    epath(f"{path}/{rel}").write_bytes((tmp_path / "blob").read_bytes())
    assert Checkpointer(path, 4, EventLog(None)).committed_steps() == [4, 8]
    outcome, trainer, _ = run_elastic(make_cfg(checkpoint_dir=path, checkpoint_period=0))
    assert outcome.status == "completed", outcome
    assert [r["step"] for r in trainer.events.of("checkpoint_damaged")] == [8]
    assert trainer.events.of("restore")[0]["step"] == 4
    assert trainer.events.of("restore")[0]["verified"] is True
    assert [p for p in reads if p.startswith("gs://ckpts/garbled/4/")
            or p.startswith("gs://ckpts/garbled/8/")] == []  # listed, never downloaded
