"""The persistent compilation cache: where it goes, that a second start compiles nothing new,
and that a cache that cannot be written costs a warning, not the run.

Real ``elastix-train`` processes (the cache is process-wide JAX state, switched on once).
"""

from __future__ import annotations

import os

from trainer_helpers import run_cli

from elastix.protocol import envvars
from elastix_trainer.state.compilecache import resolve

ARGS = ["--preset", "tiny", "--steps", "3", "--num-slices", "4", "--batch-per-device", "1",
        "--seq-len", "32"]


def test_where_the_cache_goes(monkeypatch, tmp_path):
    for name in (envvars.LOCAL_DATA_DIR, envvars.LOCAL_COMPILATION_CACHE,
                 "JAX_COMPILATION_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert resolve(None, None) is None
    assert resolve(None, str(tmp_path / "ck")) is None  # a local checkpoint dir: no stranger in it
    assert resolve(None, "gs://b/run/ck/") == "gs://b/run/ck/jax-cache"
    assert resolve("off", "gs://b/run/ck") is None
    assert resolve(str(tmp_path / "c"), "gs://b/ck") == str(tmp_path / "c")
    monkeypatch.setenv(envvars.LOCAL_DATA_DIR, str(tmp_path / "data"))
    assert resolve(None, "gs://b/ck") == str(tmp_path / "data" / "jax-cache")
    assert resolve("OFF", None) is None


def test_the_local_backends_shared_cache_and_a_users_own(monkeypatch, tmp_path):
    """The local backend's shared cache is the default over the workload's kept data (issue
    49: a new workload of a compiled model starts warm); ``off`` turns it off; the flag and a
    user's own ``JAX_COMPILATION_CACHE_DIR`` (JAX read it at import) win over both."""
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv(envvars.LOCAL_DATA_DIR, str(tmp_path / "data"))
    monkeypatch.setenv(envvars.LOCAL_COMPILATION_CACHE, str(tmp_path / "shared"))
    assert resolve(None, None) == str(tmp_path / "shared")
    assert resolve(str(tmp_path / "flag"), None) == str(tmp_path / "flag")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    assert resolve(None, "gs://b/ck") == str(tmp_path / "mine")
    assert resolve("off", None) is None
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv(envvars.LOCAL_COMPILATION_CACHE, "off")
    assert resolve(None, "gs://b/ck") is None


def test_a_second_start_finds_every_program_in_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ELASTIX_TEST_NO_SHARED_JAX_CACHE", "1")  # JAX's own variable would win
    data = tmp_path / "data"
    env = {envvars.LOCAL_DATA_DIR: str(data)}
    first = run_cli([*ARGS, "--events-file", str(tmp_path / "a.jsonl")], **env)
    assert first.returncode == 0, first.stderr
    cache = data / "jax-cache"
    entries = sorted(p for p in os.listdir(cache) if not p.startswith("."))
    # The step itself is cached: it holds no host callback (the fault seam is its own program).
    assert any("train_step" in e for e in entries), entries
    second = run_cli([*ARGS, "--events-file", str(tmp_path / "b.jsonl")], **env)
    assert second.returncode == 0, second.stderr
    assert sorted(p for p in os.listdir(cache) if not p.startswith(".")) == entries


def test_an_unwritable_cache_dir_warns_once_and_trains(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_cli([*ARGS, "--compilation-cache-dir", str(blocker / "cache"),
                    "--events-file", str(tmp_path / "ev.jsonl")])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert out.count("not writable") == 1, out
    assert "going on without it" in out and "Traceback" not in out


def test_a_gcs_checkpoint_dir_keeps_the_cache_beside_its_steps(gcs, tmp_path, monkeypatch):
    from fake_gcs import emulator_env

    monkeypatch.setenv("ELASTIX_TEST_NO_SHARED_JAX_CACHE", "1")  # JAX's own variable would win

    proc = run_cli([*ARGS, "--checkpoint-dir", "gs://ckpts/cc", "--checkpoint-period", "0"],
                   **emulator_env(gcs))
    assert proc.returncode == 0, proc.stderr
    assert "compilation cache gs://ckpts/cc/jax-cache" in proc.stdout, proc.stdout
    assert "not writable" not in proc.stdout


_BUILD = """
import sys
import jax
hits = []
jax.monitoring.register_event_listener(
    lambda e, **kw: hits.append(e) if e == "/jax/compilation_cache/cache_hits" else None)
from elastix_trainer.state import compilecache
from elastix_trainer.config import parse_args
from elastix_trainer.obs.events import EventLog
from elastix_trainer.mesh import build_mesh
from elastix_trainer.elastic.health import StaticHealth
from elastix_trainer.program import build_trainer
compilecache.enable(sys.argv[1])
tr, _ = build_trainer(parse_args(["--num-slices", "4", "--steps", "3"]), EventLog(None),
                      StaticHealth(4))  # the step as a run builds it (with the fault seam)
tr.step_fns_for(build_mesh(tr.slices, [int(c) for c in sys.argv[2]]))
print(len(hits))
"""


def test_a_cached_step_serves_the_same_slices_only(tmp_path):
    """Why replica-resize compiles ahead in-process rather than relying on the cache: JAX's key
    holds the concrete device assignment on CPU (and TPU), so slices {1,2,3} cannot reuse the
    step compiled for {0,1,2}. If JAX ever drops it, the cache alone would serve a resize."""
    import subprocess
    import sys

    from trainer_helpers import REPO, cli_env

    def hits(slices: str) -> int:
        out = subprocess.run([sys.executable, "-c", _BUILD, str(tmp_path / "c"), slices],
                             capture_output=True, text=True, env=cli_env(), cwd=REPO, timeout=240)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.strip().splitlines()[-1])

    assert hits("012") == 0
    assert hits("123") == 0
    assert hits("012") >= 1
