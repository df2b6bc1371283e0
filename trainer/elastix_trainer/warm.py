"""A head started before its workload exists: what ``workload create --replace`` overlaps with
the old run's stop (the local backend's supervisor, :mod:`elastix.backends.local.supervisor`).

``python -m elastix_trainer.warm`` is started with the head's whole environment, the one
``elastix-train`` would get, while the run it replaces still makes its final save. It imports
what the trainer needs first (:func:`_imports`), which depends on nothing the old run writes,
then reads one line from stdin:

- ``{"argv": [...], "log": PATH}`` once the new run's state directory exists: what it printed
  so far is copied into ``PATH``, its output then goes there, and it runs ``elastix-train``'s
  entry point with ``argv`` in this process: the same flags, environment, working directory
  and exit as the spawned command (its exit handler registered first, as there). Nothing
  before this line reads or writes a checkpoint, an event or a log.

It is started as ``python -c`` code that drops the working directory from ``sys.path`` first
(:data:`elastix.protocol.entrypoints.TRAINER_WARM_CODE`): a console script's path holds its
bin directory, never the directory it runs in, so a package there (a checkout's
``elastix_trainer``, a ``jax/``) must not be imported instead.
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
    """Send fds 1 and 2 to ``log`` from now on, after what they got so far (stdout and stderr
    are the supervisor's unnamed temporary file until the log exists). Read at explicit
    offsets, never moving the file's own: the import thread may still write to it. What it
    writes between the first copy and the switch is copied after it."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    early = os.dup(1)
    done = _copy(early, fd, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    _copy(early, fd, done)
    os.close(early)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)  # as a spawned head's stdin
    os.dup2(null, 0)
    os.close(null)


def _copy(src: int, dst: int, offset: int) -> int:
    """Append ``src`` from ``offset`` to its end onto ``dst``; returns the offset reached."""
    try:
        while chunk := os.pread(src, 1 << 16, offset):
            os.write(dst, chunk)
            offset += len(chunk)
    except OSError:  # not a file (run by hand on a terminal): nothing to copy
        pass
    return offset


def main() -> int:
    import elastix_trainer.__main__ as entry  # the entry point's module: a dunder, not private

    # The trainer's last exit handler, registered before the imports register theirs (JAX's,
    # the step's, logging's), so they run first, as when elastix-train imports them itself.
    code = entry.exit_without_teardown()
    imports = _imports()
    line = sys.stdin.readline()
    if not line.strip():
        imports.join()  # no run to join, nothing was touched; an import is not cut half-way
        code[0] = 0
        return 0
    msg = json.loads(line)
    _take_output(msg["log"])
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (the process's own fd)
    sys.argv = list(msg["argv"])
    return entry.main(code=code)


if __name__ == "__main__":
    sys.exit(main())
