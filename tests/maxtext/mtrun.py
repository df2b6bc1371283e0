"""Run real MaxText on CPU and record its log as the Kubernetes log API returns it.

Shared by the suite's MaxText tests (``tests/maxtext``) and by the script that captures the
fixtures (``tests/fixtures/maxtext/capture.py``): standard library only, so it runs under either
Python. MaxText itself runs in its own environment (Python 3.12, ``.venv-maxtext``, made by
``bash .ci/setup-maxtext``), found through ``ELASTIX_MAXTEXT_PYTHON``.

Every line the process prints (stdout and stderr, absl logs to stderr) is written with the time
it was read in front, RFC3339 with nanoseconds, as the log API gives it with ``timestamps=true``
(e.g. ``2026-12-01T11:45:27.994810682Z I1201 11:45:27.994626 ... completed step: 0, ...``):
the only time measurement can use, since absl's own prefix has no year and no zone.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV_VAR = "ELASTIX_MAXTEXT_PYTHON"
SETUP = "bash .ci/setup-maxtext"
MODULE = "maxtext.trainers.pre_train.train"
CONFIG = "src/maxtext/configs/base.yml"
"""MaxText resolves this source-tree path against the installed package's configs as well
(maxtext 0.2.5 ``configs/pyconfig.py`` ``resolve_config_path``), so one command serves both."""

TINY = {
    "hardware": "cpu", "dataset_type": "synthetic", "per_device_batch_size": "1",
    "base_emb_dim": "64", "base_num_query_heads": "2", "base_num_kv_heads": "2",
    "base_mlp_dim": "128", "base_num_decoder_layers": "2", "head_dim": "32",
    "vocab_size": "256", "max_target_length": "64", "skip_jax_distributed_system": "true",
}
"""A model small enough that MaxText on one CPU device spends its time starting up (≈ 60 s on
a quiet machine), not training (milliseconds a step): the command of maxtext-on-cpu runs."""

ENV = {"JAX_PLATFORMS": "cpu", "DECOUPLE_GCLOUD": "TRUE", "PYTHONUNBUFFERED": "1"}
"""CPU only; ``DECOUPLE_GCLOUD`` makes MaxText stub Google Cloud (no credentials, no network)."""


def maxtext_python() -> Path:
    """The MaxText environment's python: ``$ELASTIX_MAXTEXT_PYTHON`` or ``.venv-maxtext``."""
    return Path(os.environ.get(ENV_VAR) or REPO / ".venv-maxtext" / "bin" / "python")


def missing() -> str | None:
    """Why MaxText cannot run here (one line, with the setup command), or None."""
    py = maxtext_python()
    if not py.exists():
        return f"no MaxText environment at {py} (make it with `{SETUP}`, or set {ENV_VAR})"
    try:
        subprocess.run([str(py), "-c", "import maxtext, pathwaysutils"], check=True,
                       capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as err:
        return f"{py} cannot import maxtext ({err.__class__.__name__}); re-run `{SETUP}`"
    return None


def args(overrides: dict[str, str]) -> list[str]:
    """``key=value`` arguments, in order."""
    return [f"{k}={v}" for k, v in overrides.items()]


def stamp(ns: int | None = None) -> str:
    """RFC3339 with nanoseconds in UTC: the log API's ``timestamps=true`` time of a line."""
    ns = time.time_ns() if ns is None else ns
    s, frac = divmod(ns, 10**9)
    day = dt.datetime.fromtimestamp(s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{day}.{frac:09d}Z"


class Process:
    """One MaxText process whose lines are stamped and appended to ``log`` as they come.

    ``wait_for`` blocks on a line (never on a sleep): the reader thread wakes it as each line is
    written. Several processes may append to the same file in turn, as a restarted container's
    log follows the previous one's.
    """

    def __init__(self, argv: list[str], log: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.log = log
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._done = False
        full_env = {**os.environ, **ENV, **(env or {})}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, errors="replace", env=full_env, cwd=cwd,
                                     start_new_session=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("a") as out:
            for raw in self.proc.stdout:
                line = f"{stamp()} {raw.rstrip(chr(10))}"
                out.write(line + "\n")
                out.flush()
                with self._cond:
                    self.lines.append(line)
                    self._cond.notify_all()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float, start: int = 0) -> tuple[int, re.Match]:
        """(index, match) of the first line from ``start`` on that matches ``pattern``.

        Raises:
            RuntimeError: the process ended first, or ``timeout`` passed (the log's tail says why).
        """
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return i, m
                    i += 1
                left = deadline - time.monotonic()
                if self._done or left <= 0:
                    why = "ended" if self._done else f"did not print it in {timeout:g} s"
                    tail = "\n".join(self.lines[-15:])
                    raise RuntimeError(f"MaxText {why} before {pattern!r}; its last lines:\n{tail}")
                self._cond.wait(left)

    def kill(self) -> None:
        """SIGKILL, no warning (as a lost host or ``kubectl delete --force``), then reap."""
        self._killpg()
        self.finish(60)

    def stop(self) -> None:
        """Make sure nothing of it is left running (a test that failed midway)."""
        if self.proc.poll() is None:
            self.kill()

    def _killpg(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it has ended already

    def finish(self, timeout: float) -> int:
        """Wait for the process to end and its last line to be written; its exit code."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._killpg()
            code = self.proc.wait(60)
        self._thread.join(60)
        return code


STEP = r"completed step: (\d+),"
SAVED = r"Saved a checkpoint at step (\d+)\."


def kill_after_checkpoint(p: Process, *, saved: int, then: int, timeout: float) -> int:
    """SIGKILL ``p`` once it has saved step ``saved`` and completed ``then`` steps past it.

    Steps take milliseconds, so MaxText may have gone on a few steps (or past another save) by
    the time the signal lands: what happened is read back from the log, never assumed.
    Returns the index of the line the kill followed.
    """
    i, _ = p.wait_for(SAVED.replace(r"(\d+)", str(saved)), timeout)
    j, _ = p.wait_for(STEP.replace(r"(\d+)", str(saved + then)), timeout, start=i)
    p.kill()
    return j


NEEDS_PATHWAYS = ("enable_single_controller", "elastic_enabled", "elastic_timeout_seconds",
                  "elastic_max_retries", "elastic_min_slice_count")
"""Flags of the published run that MaxText refuses without Pathways (maxtext 0.2.5
``configs/types.py``: "Elastic training is only supported with Pathways")."""


def readme_command(readme: Path = REPO / "docs" / "maxtext.md") -> list[str]:
    """The MaxText command docs/maxtext.md's "Running MaxText as the trainer" shows (the
    README's MaxText section moved there), after ``python``: ``-m``, the module, the config and
    its ``key=value`` flags.

    Raises:
        ValueError: the page shows no ``--command '... -m maxtext...'``.
    """
    text = readme.read_text()
    m = re.search(r"--command '(python3? -m " + re.escape(MODULE) + r"[^']*)'", text)
    if not m:
        raise ValueError(f"{readme.name} shows no --command running {MODULE}")
    words = m.group(1).replace("\\\n", " ").split()
    return words[1:]


def tiny_run(readme_args: list[str], **values: str) -> list[str]:
    """README's command made to run here: the Pathways-only flags and the model dropped (the
    tiny model of :data:`TINY` instead), ``values`` replacing or adding flags."""
    want = {**TINY, **values}
    out, seen = [], set()
    for w in readme_args:
        key, eq, _ = w.partition("=")
        if eq and (key in NEEDS_PATHWAYS or key == "model_name"):
            continue
        if eq and key in want:
            out.append(f"{key}={want[key]}")
            seen.add(key)
            continue
        out.append(w)
    return out + args({k: v for k, v in want.items() if k not in seen})
