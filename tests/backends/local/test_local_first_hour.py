"""A newcomer's first hour on the local backend (issue 49, items 1 and 3), through the real CLI.

1. An install without the trainer (``pip install .``) asked to run the default job is refused
   at ``create``, before anything starts, in one line naming the install command. The missing
   module is made the way Python sees one: a ``sitecustomize`` first on ``PYTHONPATH`` puts a
   finder in front of the others that finds no ``jax`` (what a launcher-only virtualenv has),
   for the launcher and for any head it would start alike.
2. Creating again over a finished run's kept data: ``create`` says the kept checkpoint is at
   the job's last step and how to start over; ``wait`` and ``status`` name it as the reason;
   ``create --fresh`` starts from step 0.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from elastix.errors import ExitCode

SLICES = ["--tpu-type", "v5litepod-8", "--num-slices", "2", "--elastic-slices", "2"]
NO_JAX = textwrap.dedent("""\
    import sys


    class _NoJax:
        def find_spec(self, name, path=None, target=None):
            if name == "jax" or name.startswith("jax."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, _NoJax())
    """)


@pytest.fixture
def no_jax(tmp_path):
    """``PYTHONPATH`` for a Python that cannot import jax, as a launcher-only install."""
    d = tmp_path / "no-jax"
    d.mkdir()
    (d / "sitecustomize.py").write_text(NO_JAX)
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(d), os.environ.get("PYTHONPATH")) if p)}


def test_a_launcher_only_install_is_refused_at_create_in_one_line(cli, state_dir, no_jax):
    p = cli("workload", "create", "demo", *SLICES, env=no_jax, check=False)
    assert p.returncode == ExitCode.USAGE == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines  # no traceback, no workload "created"
    assert lines[0].startswith("error: the local job runs elastix-train")
    assert "no module named 'jax'" in lines[0]
    assert "pip install 'elastix[trainer]'" in lines[0]
    assert not (state_dir / "demo").exists()  # nothing was made, nothing started
    # the same install runs a command of the user's own: it is never judged
    p = cli("workload", "create", "mine", *SLICES, "--command", "sleep 1",
            "--dry-run=server", env=no_jax, check=False)
    assert p.returncode == 0, p.stderr


def _trainer(steps: int) -> str:
    return (f"elastix-train --preset tiny --steps {steps} --batch-per-device 2 --seq-len 32 "
            "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" --checkpoint-period 2 "
            "--compilation-cache-dir \"$ELASTIX_TEST_JAX_CACHE\"")


def _training(cli, name: str) -> dict:
    return json.loads(cli("workload", "status", name, "-o", "json").stdout)["training"]


def test_creating_over_a_finished_checkpoint_says_so_and_fresh_starts_over(cli, state_dir):
    job = ["--tpu-type", "v5litepod-8", "--num-slices", "1", "--command", _trainer(4)]
    try:
        cli("workload", "create", "again", *job)
        cli("workload", "wait", "again", "--for", "completed", "--timeout", "300s")
        cli("workload", "delete", "again")  # its checkpoints are kept
        # the quickstart run again: said at create, before anything is trained
        p = cli("workload", "create", "again", *job)
        assert "kept data holds a checkpoint of step 4, and the job's last step is 4" \
            in p.stderr and "--fresh" in p.stderr, p.stderr
        p = cli("workload", "wait", "again", "--for", "stepping", "--timeout", "300s",
                check=False)
        assert p.returncode == ExitCode.COMPLETED == 5, p.stderr
        assert "resumed its kept checkpoint of step 4" in p.stderr, p.stderr
        assert "--delete-data" in p.stderr and "--fresh" in p.stderr
        assert "give the job more steps" not in p.stderr
        training = _training(cli, "again")
        assert training["resumed_complete"] == 4 and training["last_step"] is None
        status = cli("workload", "status", "again").stdout
        assert "none to do: it resumed the kept checkpoint of step 4" in status, status
        # --fresh: replaces it, removes the kept data first, and says so
        p = cli("workload", "create", "again", *job, "--fresh")
        assert "removed its data (checkpoints)" in p.stderr, p.stderr
        assert "kept data holds a checkpoint" not in p.stderr
        cli("workload", "wait", "again", "--for", "completed", "--timeout", "300s")
        training = _training(cli, "again")
        assert training["last_step"] == 4 and training["resumed_complete"] is None
    finally:
        cli("workload", "delete", "again", "--delete-data", check=False)
