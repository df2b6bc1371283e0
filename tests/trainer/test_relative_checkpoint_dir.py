"""A relative ``--checkpoint-dir`` means the working directory's, as for any other tool: it is
made absolute once, said in one line, and every save commits. (Orbax refuses a relative path on
each save: the run used to train all its steps, commit nothing, and exit 1 with a storage hint.)"""

from __future__ import annotations

import json
import subprocess
import sys

from trainer_helpers import cli_env


def test_a_relative_checkpoint_dir_is_the_working_directorys(tmp_path):
    args = ["--preset", "tiny", "--steps", "4", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--checkpoint-period", "2", "--checkpoint-dir", "rel"]
    proc = subprocess.run([sys.executable, "-m", "elastix_trainer", *args], env=cli_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = [ln for ln in proc.stdout.splitlines() if "is relative" in ln]
    assert len(said) == 1 and said[0].endswith(
        f"elastix: --checkpoint-dir rel is relative: using {tmp_path / 'rel'}")
    ck = tmp_path / "rel"
    assert sorted(p.name for p in ck.iterdir() if p.name.isdigit()) == ["2", "4"]
    assert not [p.name for p in ck.iterdir() if "tmp" in p.name]
    events = [json.loads(ln) for ln in (ck / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["event"] == "checkpoint_save_failed"]
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "completed"
