"""What is on checkpoint storage: committed and damaged steps, and what never committed.

Storage is the only source of truth: a step is committed when its directory says so - a plain
``<step>`` directory on a local disk (Orbax renames ``<step>.orbax-checkpoint-tmp`` when it
commits), or a ``<step>`` directory holding ``commit_success.txt`` on GCS. On top of that this
process remembers *damaged* steps (they failed to read; a new process finds the damage again
when it reads them). A damaged step is never deleted: a later save of the same step moves the
old directory aside, so what may be recovered by hand stays on storage. Nothing committed is
ever un-committed: a save whose copy needed a lost host never starts (``Checkpointer.save``).

Retention (``--max-to-keep``) is elastix's, not Orbax's: Orbax's counts every step directory,
so damaged steps newer than the good ones pushed the good ones out (a run restored from step
20 past a damaged 30, committed 25 and Orbax deleted 20 and the damaged 30). Here only intact
steps are counted and retired (``retire``): the newest ``max_to_keep`` of them stay, and a
damaged step is never deleted by it.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from elastix.errors import ElastixError, UsageError
from elastix.protocol import eventspec
from elastix_trainer import storage
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.state import manifest
from elastix_trainer.state.manager import first_line

COMMIT_MARKER = "commit_success.txt"
_TMP = re.compile(r"^\d+\.orbax-checkpoint-tmp.*$")

REMOVE_PATIENCE = 10.0
"""Seconds an uncommitted directory's removal outlasts the writers still adding to it."""


class CheckpointsUnreadable(ElastixError):
    """Every committed checkpoint failed to read: starting over would silently lose them.

    Exit code 1 (a runtime failure: the files are there, not the user's flags).
    """

    HINT = "restore the files from a copy, or move the directory aside to start over"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint or self.HINT)


class Store:
    """The steps of one checkpoint directory, read from storage on every question.

    Used from the training loop's thread, and from the writer's for ``declare``,
    ``committed_steps`` and ``retire`` (which read storage only).
    """

    def __init__(self, directory: str, events: EventLog, max_to_keep: int | None = None) -> None:
        self.directory = str(directory).rstrip("/")
        if not storage.is_gcs(self.directory) and os.path.exists(self.directory) and not \
                os.path.isdir(self.directory):
            raise UsageError(f"--checkpoint-dir {self.directory} is a file, not a directory",
                             hint="point --checkpoint-dir at a directory (it is created if missing)")
        self.events = events
        self.max_to_keep = max_to_keep
        """Intact committed steps to keep (None: all); see ``retire``."""
        self.damaged: dict[int, str] = {}
        """Committed steps that failed to read (step -> the error's first line): skipped."""

    # -- listing -------------------------------------------------------------------------------
    def _entries(self) -> list:
        root = storage.epath(self.directory)
        if storage.is_gcs(self.directory):
            import fsspec

            fsspec.filesystem("gs").invalidate_cache()
        try:
            if not root.exists():
                return []
            return list(root.iterdir())
        except OSError as e:  # a refusal is one clear line; anything else stays as it was
            err = storage.denied(self.directory, e)
            if err is None:
                raise
            raise err from None

    def committed_steps(self) -> list[int]:
        """Steps whose directory is committed on storage, ascending."""
        gcs = storage.is_gcs(self.directory)
        steps = []
        for p in self._entries():
            if p.name.isdigit() and (not gcs or (p / COMMIT_MARKER).exists()):
                steps.append(int(p.name))
        return sorted(steps)

    def latest_committed(self) -> int | None:
        """The newest committed step that is not damaged, or None."""
        for step in reversed(self.committed_steps()):
            if step not in self.damaged:
                return step
        return None

    def uncommitted(self) -> list[str]:
        """Names of step directories that never committed."""
        gcs = storage.is_gcs(self.directory)
        out = []
        for p in self._entries():
            if _TMP.match(p.name) or (gcs and p.name.isdigit() and not (p / COMMIT_MARKER).exists()):
                out.append(p.name)
        return sorted(out)

    def remove_uncommitted(self) -> list[str]:
        """Delete the uncommitted step directories; the caller makes sure none is being
        written."""
        names = self.uncommitted()
        root = storage.epath(self.directory)
        for name in names:
            _remove_tree(root / name)
        if names:
            log.info("elastix: removed uncommitted checkpoint directories %s", names)
        return names

    def step_bytes(self, step: int) -> int:
        return storage.tree_bytes(storage.epath(self.directory) / str(step))

    # -- committing ----------------------------------------------------------------------------
    def declare(self, step: int) -> None:
        """Orbax committed ``step``: record its checksums before it is reported committed."""
        try:
            manifest.write(f"{self.directory}/{step}", step)
        except Exception as e:  # noqa: BLE001 - Orbax's commit stands; a restore warns
            log.warning("elastix: recording the checksums of step %d failed (%s): it will be "
                        "restored unverified", step, first_line(e))

    def reclaim(self, step: int) -> bool:
        """Before ``step`` is saved again: move a damaged directory of it aside
        (``<step>.damaged-<time>``), never deleted. Returns whether anything moved (a manager
        then lists a directory that is gone)."""
        if step not in self.damaged:
            return False
        self._move_aside(step, "damaged")
        del self.damaged[step]
        return True

    def _move_aside(self, step: int, why: str) -> None:
        root = storage.epath(self.directory)
        (root / str(step)).rename(root / f"{step}.{why}-{int(time.time())}")

    # -- retiring ------------------------------------------------------------------------------
    def retire(self) -> list[int]:
        """Delete the intact committed steps that ``max_to_keep`` no longer keeps; returns them.

        Kept: the newest ``max_to_keep`` intact steps (not damaged). Damaged steps are neither
        counted nor deleted (they stay for a look by hand until their step is saved again:
        ``reclaim``), so the step a restore falls back to is never deleted. Every committed
        step holds a completed step (nothing committed is undone later), so the newest ones
        are the ones to keep. A failed deletion is logged, never raised (the next save retires
        it again).
        """
        if not self.max_to_keep:
            return []
        damaged = set(self.damaged)  # a copy: the loop may add to it
        intact = [s for s in self.committed_steps() if s not in damaged]
        gone = intact[:-self.max_to_keep]
        root = storage.epath(self.directory)
        for s in gone:
            try:
                _remove_tree(root / str(s))
            except OSError as e:
                log.warning("elastix: retiring checkpoint %d failed (%s); kept for now", s,
                            first_line(e))
        if gone:
            log.info("elastix: retired checkpoints %s (--max-to-keep %d)", gone, self.max_to_keep)
        return gone

    def mark_damaged(self, step: int, error: BaseException) -> None:
        """Remember that committed ``step`` cannot be read, say so, and go on without it."""
        why = first_line(error)
        self.damaged[step] = why
        # One line, the event's: "checkpoint damaged, skipped: step N: why" (the restore's own
        # line follows, naming the step it fell back to).
        self.events.emit(eventspec.CHECKPOINT_DAMAGED, step=step, error=why)

    def unreadable(self) -> CheckpointsUnreadable:
        """The error for "nothing committed can be read" (every damaged step named)."""
        steps = ", ".join(str(s) for s in sorted(self.damaged, reverse=True))
        first = self.damaged[max(self.damaged)]
        return CheckpointsUnreadable(
            f"no committed checkpoint in {self.directory} can be read (steps {steps}; step "
            f"{max(self.damaged)}: {first})")

    def verify(self, step: int) -> tuple[bool, float]:
        """Check committed ``step``'s files against the checksums recorded at its commit.

        Returns (verified, seconds). Not verified (with a one-line warning): a step without a
        manifest, written by an elastix that recorded none, or its process died between
        Orbax's commit and the manifest. Its files are complete (Orbax committed them).

        Raises:
            manifest.ChecksumMismatch: a file differs from what was written (the restore
                then skips the step: ``mark_damaged``).
        """
        t0 = time.monotonic()
        ok = manifest.verify(f"{self.directory}/{step}")
        seconds = time.monotonic() - t0
        if not ok:
            log.warning("elastix: the checkpoint of step %d in %s has no checksums (%s): "
                        "restoring it unverified", step, self.directory, manifest.NAME)
        return ok, seconds


def _remove_tree(path: Any) -> None:
    """``rmtree`` that outlasts writers still finishing. A save that failed part-way (a full
    disk) raises at its first failed write while TensorStore may still be writing the other
    arrays for a moment; each adds a file to the directory being removed, and ``rmtree`` then
    fails with "Directory not empty" (seen on a loaded machine: the final save's retry then
    failed with that instead of saying the final checkpoint did not commit). So removal is
    retried until the directory is gone, for up to ``REMOVE_PATIENCE`` seconds."""
    deadline = time.monotonic() + REMOVE_PATIENCE
    while True:
        try:
            path.rmtree(missing_ok=True)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
