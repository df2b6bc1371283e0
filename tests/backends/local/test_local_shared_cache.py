"""One JAX compilation cache for every workload of a state directory (issue 49, item 6).

It used to live in each workload's kept data (``.data/<name>/jax-cache``), so a new workload of
a model compiled before compiled it again. Now the supervisor points every head at
``<state-dir>/.cache/jax``: a new workload of that model finds every program there, a workload
of another model adds its own entries beside them (JAX's key holds the program), and ``delete
--delete-data`` removes one workload's data, never the cache.

A hit is read from the cache directory, not from a clock: a whole run of the same model writes
no entry the first runs did not (JAX writes an entry for every program it compiles here).
"""

from __future__ import annotations

import json
import stat

from local_helpers import wait_until

WORKERS = ("--tpu-type", "v5litepod-4", "--num-slices", "2", "--elastic-slices", "2")


def _command(preset: str) -> str:
    """A short run of ``preset`` with no ``--compilation-cache-dir``: the default's the test."""
    return (f"elastix-train --preset {preset} --steps 12 --step-delay 0.02 --checkpoint-period 0 "
            "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\"")


def _create(cli, name: str, preset: str = "tiny") -> None:
    cli("workload", "create", name, *WORKERS, "--command", _command(preset))


def _ended(state_dir, name: str) -> dict:
    """The trainer's ``run_end`` once it has ended; the run must have completed."""
    def end() -> dict | None:
        path = state_dir / name / "events.jsonl"
        if not path.exists():
            return None
        for line in path.read_text().splitlines():
            if line.endswith("}") and json.loads(line)["event"] == "run_end":
                return json.loads(line)
        return None

    rec = wait_until(end, 300, f"{name}'s trainer to end its run")
    assert rec["status"] == "completed", rec
    return rec


def _entries(state_dir) -> dict[str, int]:
    """JAX's entries in the shared cache (``<key>-cache`` files; ``-atime`` files are its LRU
    bookkeeping, rewritten on every read), with their inode change times: an entry JAX wrote
    again would show."""
    cache = state_dir / ".cache" / "jax"
    return {p.name: p.stat().st_ctime_ns for p in cache.glob("*-cache")} if cache.is_dir() else {}


def _head_log(state_dir, name: str) -> str:
    return (state_dir / name / "logs" / "head-0.log").read_text(errors="replace")


def _no_cache_trouble(log: str) -> None:
    """JAX warns on an entry it could not read or write (a half-written one, a lock it could
    not take), then compiles: the runs must not have met one."""
    assert "persistent compilation cache" not in log.lower(), log


def test_a_new_workload_of_a_compiled_model_compiles_nothing(cli, state_dir):
    cache = state_dir / ".cache" / "jax"
    # Two workloads of one model at once, the cache empty: both compile and write the same
    # entries, under JAX's file lock (the shared cache has a size bound).
    _create(cli, "first")
    _create(cli, "twin")
    try:
        _ended(state_dir, "first")
        _ended(state_dir, "twin")
        compiled = _entries(state_dir)
        assert [e for e in compiled if e.startswith("jit_train_step-")], compiled
        assert (cache / ".lockfile").exists()  # JAX's lock: the bound is on
        # private, as everything elastix writes: the trainer runs under umask 077
        assert {stat.S_IMODE(p.stat().st_mode) for p in (cache, cache.parent)} == {0o700}
        assert {stat.S_IMODE(p.stat().st_mode) for p in cache.iterdir()} == {0o600}
        for name in ("first", "twin"):
            log = _head_log(state_dir, name)
            assert f"compilation cache {cache} (shared by this state directory's workloads)" in log
            _no_cache_trouble(log)
        assert not (state_dir / ".data" / "first" / "jax-cache").exists()

        # delete --delete-data removes the workload's data and says the cache stays
        gone = cli("workload", "delete", "first", "--wait", "--delete-data")
        said = " ".join(gone.stderr.split())
        assert f"removed its data (checkpoints) in {state_dir / '.data' / 'first'}" in said
        assert f"kept the compilation cache all workloads here share, {cache}" in said
        assert not (state_dir / ".data" / "first").exists()
        assert _entries(state_dir) == compiled

        # a new workload of the same model: every program it builds is in the cache
        _create(cli, "second")
        _ended(state_dir, "second")
        assert _entries(state_dir) == compiled
        _no_cache_trouble(_head_log(state_dir, "second"))

        # another model: its own entries beside the first model's, which stay as they were
        _create(cli, "other", preset="small")
        _ended(state_dir, "other")
        now = _entries(state_dir)
        assert {k: now[k] for k in compiled} == compiled
        added = [e for e in set(now) - set(compiled) if e.startswith("jit_train_step-")]
        assert len(added) == 1, sorted(now)
        cli("workload", "delete", "other", "--wait", "--delete-data")
        assert _entries(state_dir) == now

        # and a new workload of the first model still compiles nothing beside them
        _create(cli, "third")
        _ended(state_dir, "third")
        assert _entries(state_dir) == now
    finally:
        for name in ("first", "twin", "second", "other", "third"):
            cli("workload", "delete", name, "--wait", "--ignore-not-found", check=False)
