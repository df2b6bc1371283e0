"""Checkpoints an earlier elastix marked on the local backend, and what happens to them now.

Before the stand-in devices failed in time (``standin``), the local trainer let them run on
after a slice host died and undid the work afterwards: a committed checkpoint of a step that
completed after the loss got an ``elastix-void.txt`` file and was skipped by every restore. No
elastix writes that file any more, and nothing reads it during a run. A checkpoint directory
that still holds such steps is tidied once, when a local trainer opens it: each marked step is
moved aside as ``<step>.void-<time>`` (Orbax and elastix see no step there), never restored and
never deleted, so it can still be looked at by hand. Only the local backend ever wrote the
file, so only where the stand-in is attached is it looked for.
"""

from __future__ import annotations

import time

from elastix.errors import UsageError
from elastix_trainer import storage
from elastix_trainer.obs.events import log
from elastix_trainer.state.store import COMMIT_MARKER

MARKER = "elastix-void.txt"
"""The file an earlier elastix left in a committed step it had undone."""


def set_aside_marked(directory: str | None) -> list[int]:
    """Move the steps of ``directory`` that carry ``MARKER`` aside; returns them.

    Raises:
        UsageError: a marked step could not be moved (it must not be restored).
    """
    if not directory:
        return []
    root = storage.epath(directory)
    gcs = storage.is_gcs(directory)
    try:
        if not root.exists():
            return []
        marked = sorted(int(p.name) for p in root.iterdir() if p.name.isdigit()
                        and (p / MARKER).exists() and (not gcs or (p / COMMIT_MARKER).exists()))
    except OSError:
        return []  # unreadable now: the first save or restore says why, in its own words
    for step in marked:
        try:
            (root / str(step)).rename(root / f"{step}.void-{int(time.time())}")
        except OSError as e:
            raise UsageError(
                f"checkpoint step {step} in {directory} carries {MARKER} (an earlier elastix "
                f"undid it) and could not be moved aside: {e}",
                hint=f"move {directory}/{step} out of the checkpoint directory by hand: it "
                     "must not be restored") from None
        log.warning("elastix: checkpoint step %d carries %s (an earlier elastix undid it): "
                    "moved aside as %s.void-*, never restored", step, MARKER, step)
    return marked
