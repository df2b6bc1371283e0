"""What is on checkpoint storage: committed, damaged and void steps, and what never committed.

Storage is the only source of truth: a step is committed when its directory says so - a plain
``<step>`` directory on a local disk (Orbax renames ``<step>.orbax-checkpoint-tmp`` when it
commits), or a ``<step>`` directory holding ``commit_success.txt`` on GCS. On top of that this
process remembers *damaged* steps (they failed to read; a new process finds the damage again
when it reads them), and storage itself records *void* ones (they hold a step completed after a
slice was gone, on the local backend's stand-in devices): ``elastix-void.txt`` in the step's
directory, so that no process ever restores them, a restarted head included. Neither is ever
deleted: a later save of the same step moves the old directory aside, so what may be recovered
by hand stays on storage.

Retention (``--max-to-keep``) is elastix's, not Orbax's: Orbax's counts every step directory,
so damaged or void steps newer than the good ones pushed the good ones out (a run restored from
step 20 past a damaged 30, committed 25 and Orbax deleted 20 and the damaged 30). Here only
intact steps are counted and retired (``retire``): the newest ``max_to_keep`` of them stay, and a
damaged or void step is never deleted by it.
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
VOID_MARKER = "elastix-void.txt"
"""In a committed step's directory: the step is void (never restored, by any process)."""
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

    Used from the training loop's thread, and from the writer's for ``declare`` and
    ``committed_steps`` (which read storage and ``void`` only: see ``declare``).
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
        self.void: set[int] = set()
        """Steps this process saved that completed after a slice was gone (local backend):
        never restored. One still being written is un-committed before it is reported committed
        (``declare``); one already reported stays on storage with ``VOID_MARKER``, skipped by
        every process (``is_void``)."""
        self._copied_at: dict[int, float] = {}  # step -> when save()'s blocking copy ended

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
        """The newest committed step that is neither damaged nor void, or None."""
        for step in reversed(self.committed_steps()):
            if step not in self.damaged and not self.is_void(step):
                return step
        return None

    def is_void(self, step: int) -> bool:
        """Whether committed ``step`` is void: voided here, or marked so on storage by the
        process that voided it (then remembered: ``reclaim`` moves it aside without asking
        storage on every save)."""
        if step in self.void:
            return True
        try:
            marked = (storage.epath(self.directory) / str(step) / VOID_MARKER).exists()
        except OSError:
            return False  # unreadable: its restore says why
        if marked:
            self.void.add(step)
        return marked

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
    def copied(self, step: int) -> None:
        """``save()``'s blocking copy of ``step`` just ended (``void_newer`` dates it)."""
        self._copied_at[step] = time.monotonic()

    def declare(self, step: int) -> str | None:
        """Make Orbax-committed ``step`` elastix-committed: record its checksums, then, unless
        the step was voided meanwhile (it completed after a slice was gone), let it be reported.
        Returns why it is not committed, or None.

        Runs on the writer while the loop may call ``void_newer``; no lock is needed: the only
        thing shared is one membership test of ``void``, atomic in CPython. A step voided before
        the test is un-committed here, before anyone was told it was committed; one voided after
        it is reported committed, stays on storage and is skipped (``latest_committed``).
        """
        try:
            manifest.write(f"{self.directory}/{step}", step)
        except Exception as e:  # noqa: BLE001 - Orbax's commit stands; a restore warns
            log.warning("elastix: recording the checksums of step %d failed (%s): it will be "
                        "restored unverified", step, first_line(e))
        if step not in self.void:
            return None
        self._uncommit(step)
        return "it holds a step completed after a slice was gone: not committed"

    def _uncommit(self, step: int) -> None:
        """Turn Orbax-committed ``step`` (never reported committed) back into an uncommitted
        directory, which ``remove_uncommitted`` then removes."""
        root = storage.epath(self.directory)
        if storage.is_gcs(self.directory):
            (root / str(step) / COMMIT_MARKER).unlink(missing_ok=True)
        else:
            (root / str(step)).rename(root / f"{step}.orbax-checkpoint-tmp-void")

    def reclaim(self, step: int) -> bool:
        """Before ``step`` is saved again: move a damaged or void directory of it aside
        (``<step>.damaged-<time>``, ``<step>.void-<time>``), never deleted. Returns whether
        anything moved (a manager then lists a directory that is gone)."""
        moved = False
        if step in self.damaged:
            self._move_aside(step, "damaged")
            del self.damaged[step]
            moved = True
        if step in self.void:  # committed before its loss was known: kept, moved aside
            if step in self.committed_steps():
                self._move_aside(step, "void")
                moved = True
            self.void.discard(step)
        return moved

    def _move_aside(self, step: int, why: str) -> None:
        root = storage.epath(self.directory)
        (root / str(step)).rename(root / f"{step}.{why}-{int(time.time())}")

    # -- skipping ------------------------------------------------------------------------------
    def void_newer(self, step: int, since: float) -> list[int]:
        """Void the steps after ``step`` whose copy ended after monotonic time ``since``;
        returns them."""
        steps = sorted(s for s, at in self._copied_at.items()
                       if s > step and at > since and s not in self.void)
        self.void.update(steps)
        committed = set(self.committed_steps()) if steps else set()
        for s in steps:
            if s in committed:  # already reported committed: say so on storage, for good
                self._mark_void(s)
        return steps

    def _mark_void(self, step: int) -> None:
        """Write ``VOID_MARKER`` into committed ``step``'s directory. A step the writer
        un-commits meanwhile (``declare``) has moved: nothing to mark, it is never restored."""
        marker = storage.epath(self.directory) / str(step) / VOID_MARKER
        try:
            marker.write_text("this step completed after a slice was gone: never restored\n")
        except FileNotFoundError:
            pass
        except OSError as e:  # this process still skips it; a restarted one would not
            log.warning("elastix: marking the checkpoint of step %d void failed (%s): a "
                        "restarted trainer may restore it", step, first_line(e))

    # -- retiring ------------------------------------------------------------------------------
    def retire(self, known_good: int | None = None) -> list[int]:
        """Delete the intact committed steps that ``max_to_keep`` no longer keeps; returns them.

        Kept: the newest ``max_to_keep`` intact steps (neither damaged nor void), the newest
        intact one no newer than ``known_good`` (the newest step no slice loss found later can
        undo; None: every step), and every one newer than ``known_good``. Damaged and void steps
        are neither counted nor deleted (they stay for a look by hand until their step is saved
        again: ``reclaim``), so the step a restore falls back to is never deleted.

        Why not Orbax's ``max_to_keep``: it counts every step directory. Damaged steps newer
        than the intact ones pushed the intact ones out, and on the local backend, where a hung
        host's loss is found a heartbeat timeout late while the stand-in devices checkpoint on,
        the checkpoints of steps the loss then voided pushed out the last good one: the run went
        back to step 0 with good checkpoints deleted. Only the caller knows which steps are known
        good (``Hooks.known_good``). A failed deletion is logged, never raised (the next save
        retires it again).
        """
        if not self.max_to_keep:
            return []
        damaged = set(self.damaged)  # a copy: the loop may add to it
        intact = [s for s in self.committed_steps() if s not in damaged and not self.is_void(s)]
        kept = set(intact[-self.max_to_keep:])
        good = [s for s in intact if known_good is None or s <= known_good]
        if good:
            kept.add(good[-1])
        gone = [s for s in intact if s not in kept and (known_good is None or s <= known_good)]
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
