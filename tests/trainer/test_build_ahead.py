"""The start of a run builds the step ahead: while the checkpoint is checked and the slices are
awaited, not after. A real trainer process with an empty compilation cache, its compiles
recorded with ``jax.monitoring`` (JAX's backend-compile event and the thread that compiled):
the train step compiles once, in the build-ahead thread, and the session's own build
(``Trainer.start``) waits for it rather than compiling it again. The time it saves is measured
in ``bench/bench_startup.py``, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from trainer_helpers import REPO, cli_env

PROBE = """
import json, sys, threading
import jax
seen = []
def listener(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        seen.append((threading.current_thread().name, str(kw.get("fun_name", ""))))
jax.monitoring.register_event_duration_secs_listener(listener)
from elastix_trainer.__main__ import main
try:
    code = main(sys.argv[2:])
except SystemExit as e:
    code = e.code
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "compiles": seen}, f)
"""


def _compiles(tmp_path, *args: str) -> tuple[object, list[tuple[str, str]]]:
    out = tmp_path / "compiles.json"
    env = cli_env()
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # its own, empty: the step must compile
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), "--preset", "tiny", "--num-slices", "2",
         "--steps", "2", "--checkpoint-period", "0", "--checkpoint-dir", str(tmp_path / "ck"),
         "--compilation-cache-dir", str(tmp_path / "cache"), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert out.exists(), proc.stderr[-2000:]
    got = json.loads(out.read_text())
    return got["code"], [tuple(c) for c in got["compiles"]]


def test_the_train_step_compiles_once_in_the_build_ahead_thread(tmp_path):
    code, compiles = _compiles(tmp_path)
    assert code in (0, None)
    train = [thread for thread, fun in compiles if fun == "jit(train_step)"]
    assert train == ["elastix-build-ahead"], compiles
