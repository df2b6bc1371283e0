"""A head started before its workload exists: what ``workload create --replace`` overlaps with
the old run's stop (the local backend's supervisor, :mod:`elastix.backends.local.supervisor`).

``python -m elastix_trainer.warm`` is started with the head's whole environment, the one
``elastix-train`` would get, while the run it replaces still makes its final save. It imports
what the trainer needs first (:func:`_imports`), which depends on nothing the old run writes,
then reads one line from stdin:

- ``{"argv": [...], "log": PATH}`` once the new run's state directory exists: what it printed
  so far is copied into ``PATH``, its output then goes there, and it runs ``elastix-train``
  with ``argv`` in this process, exactly as the spawned command would (same entry point, same
  exit). Nothing before this line reads or writes a checkpoint, an event or a log.
- end of file (the create failed or was interrupted, or the supervisor died): it exits 0,
  having touched nothing.
"""

from __future__ import annotations

import json
import os
import sys
import threading


def _imports() -> threading.Thread:
    """What ``elastix-train`` imports before its first step: JAX, optax, the model and the
    trainer (0.85 s of a quiet machine), then, in a thread, Orbax (1.5 s more, which the
    trainer needs only once it checks the checkpoint, as its step builds beside it). The
    thread lets the trainer start as soon as the old run has stopped: its own ``import
    orbax.checkpoint`` then waits for this one to finish, as it would have imported it itself
    while its step built (the trainer's start imports beside a compiling thread anyway)."""
    import elastix_trainer.__main__  # noqa: F401
    import elastix_trainer.config  # noqa: F401
    import elastix_trainer.program  # noqa: F401

    def orbax() -> None:
        try:
            import orbax.checkpoint  # noqa: F401
        except Exception:  # noqa: BLE001 - the trainer's own import says what is wrong
            pass

    t = threading.Thread(target=orbax, name="elastix-warm-imports", daemon=True)
    t.start()
    return t


def _take_output(log: str) -> None:
    """Send fds 1 and 2 to ``log`` from now on, after what they got so far (stdout is the
    supervisor's unnamed temporary file until the log exists; stderr the same file)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.lseek(1, 0, os.SEEK_SET)
        while chunk := os.read(1, 1 << 16):
            os.write(fd, chunk)
    except OSError:  # not a seekable file (run by hand on a terminal): nothing to copy
        pass
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)  # as a spawned head's stdin
    os.dup2(null, 0)
    os.close(null)


def main() -> int:
    imports = _imports()
    line = sys.stdin.readline()
    if not line.strip():
        imports.join()  # no run to join, nothing was touched; an import is not cut half-way
        return 0
    msg = json.loads(line)
    _take_output(msg["log"])
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (the process's own fd)
    sys.argv = list(msg["argv"])
    from elastix_trainer.__main__ import main as train

    return train()


if __name__ == "__main__":
    sys.exit(main())
