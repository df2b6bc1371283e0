"""The trainer's own command line: devices made for --num-slices, readable --help, one end line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from trainer_helpers import REPO

from elastix_trainer.model import PRESETS


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "ELASTIX_NUM_SLICES",
                                                              "ELASTIX_DEVICES_PER_SLICE")}
    return subprocess.run([sys.executable, "-m", "elastix_trainer", *args], capture_output=True,
                          text=True, timeout=240, cwd=REPO,
                          env={**base, "JAX_PLATFORMS": "cpu", **env})


def test_num_slices_makes_its_cpu_devices_without_xla_flags(tmp_path):
    events = tmp_path / "ev.jsonl"
    p = _run(["--preset", "tiny", "--steps", "2", "--batch-per-device", "1", "--seq-len", "16",
              "--num-slices", "3", "--events-file", str(events)],
             ELASTIX_DEVICES_PER_SLICE="2")
    assert p.returncode == 0, p.stderr
    start = next(json.loads(line) for line in events.read_text().splitlines()
                 if json.loads(line)["event"] == "run_start")
    assert (start["num_slices"], start["devices"]) == (3, 6)
    out = p.stdout + p.stderr
    assert out.count("run end: completed at step 2") == 1
    assert "run completed" not in out  # the run_end line says it once
    # the program's own process settles its heap once, after the first step (SettleHeap)
    assert out.count("heap settled after the first step") == 1, out


def test_settle_heap_freezes_once_and_only_where_attached(tmp_path):
    """``SettleHeap`` freezes the heap at its first completed step and never again; an
    in-process run (``assemble``, as tests and benchmarks run) does not attach it."""
    import gc

    from trainer_helpers import make_cfg

    from elastix_trainer.elastic.health import StaticHealth
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.program import SettleHeap, assemble

    runtime = assemble(make_cfg(steps=2), EventLog(None), StaticHealth(1))
    assert not any(isinstance(h, SettleHeap) for h in runtime.trainer.hooks)
    before = gc.get_freeze_count()
    hook = SettleHeap()
    try:
        hook.after_complete(None, 1, 0.0, 0.1)
        frozen = gc.get_freeze_count()
        assert frozen > before
        gc.unfreeze()
        hook.after_complete(None, 2, 0.0, 0.1)
        assert gc.get_freeze_count() == 0  # once per hook: the second step froze nothing
    finally:
        gc.unfreeze()


def test_help_lists_the_presets_without_markup():
    p = _run(["--help"])
    assert p.returncode == 0
    # the list wraps as argparse wraps every help text: read it as words
    assert f"Model preset: {', '.join(PRESETS)}." in " ".join(p.stdout.split())
    assert "``" not in p.stdout and "model.PRESETS" not in p.stdout


def test_the_program_ends_without_teardown_yet_keeps_its_exit_code_and_output():
    """Run as the program, the trainer ends with ``os._exit`` after its exit handlers: the
    code a flag error (argparse's SystemExit), --help or a bad preset gives is kept, and piped
    output is whole (test_sigterm checks a stopped run's 143 and its last lines)."""
    p = _run(["--bogus"])
    assert p.returncode == 2 and p.stderr.startswith("error: flags: unrecognized arguments")
    p = _run(["--help"])
    assert p.returncode == 0 and p.stdout.rstrip().endswith(".") and "--preset" in p.stdout
    p = _run(["--preset", "nope"], ELASTIX_DEBUG="1")
    assert p.returncode == 2, p.stderr
