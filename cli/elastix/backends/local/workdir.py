"""A workload's state directory (``$ELASTIX_WORKLOAD_DIR``): the launcher's records, and what a
command wrote there, which is never deleted with them.

The state directory is the run's: its plan, state, process records, events and logs, removed
when the workload is deleted or replaced (the analogue of a pod's own filesystem, which
``kubectl replace --force`` or a JobSet's deletion takes with the pod). But a ``--command`` is
told where it is (``$ELASTIX_WORKLOAD_DIR``) and may keep checkpoints there; removing the
directory whole deleted them without a word while the notice said the workload's data was
kept. So what the launcher did not write is moved into the workload's kept data
(``$ELASTIX_LOCAL_DATA_DIR``, beside its checkpoints: ``--delete-data`` removes it), and the
notice names it. The new run starts from an empty state directory, as a re-created pod does;
checkpoints meant to be resumed belong in ``$ELASTIX_LOCAL_DATA_DIR``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

from elastix.protocol import mlgoodput

OWN = frozenset({"logs", "manifest.json", "plan.json", "state.json", "procs.jsonl",
                 "supervisor.log", "events.jsonl", "hb", "health.sock", "maxtext-standin",
                 "events" + mlgoodput.ENTRIES_SUFFIX})
"""What the launcher (backend, supervisor, default trainer's events and the ml-goodput records
it writes beside them) writes in the directory."""
_OWN_TMP = re.compile(r"^\..+\.\d+\.tmp$")  # ``state.write_json_atomic``'s half-written files

SHOWN = 3
"""Names the notice lists before "..."."""


def command_files(workload_dir: Path) -> list[str]:
    """Names in ``workload_dir`` the launcher did not write, sorted."""
    try:
        names = os.listdir(workload_dir)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n not in OWN and not _OWN_TMP.match(n))


def move_command_files(workload_dir: Path, data: Path) -> str | None:
    """Move what a command wrote in ``workload_dir`` into ``data/workload-dir-<UTC time>``.

    Returns the notice's words for it, or None when there was nothing. Raises OSError when a
    move fails: the caller must then leave the directory in place (never delete it).
    """
    names = command_files(workload_dir)
    if not names:
        return None
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    dest = data / f"workload-dir-{stamp}"
    n = 1
    while dest.exists():  # a second replace within the same second
        n += 1
        dest = data / f"workload-dir-{stamp}-{n}"
    dest.mkdir(parents=True, mode=0o700)
    for name in names:
        os.replace(workload_dir / name, dest / name)  # same file system: the data dir is a sibling
    shown = ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
    return f"moved what its command wrote in $ELASTIX_WORKLOAD_DIR ({shown}) to {dest}"
