"""A copy of a local workload, from its own rendered manifest (``chaos run --verify``'s
uninterrupted reference).

The copy runs the manifest the workload was created from, renamed
(:func:`elastix.workload.manifest.renamed`), in the directory it was created from, with the
plan's values that came from the creator's environment (devices per slice, timeouts) taken
from the workload's own plan: the same job, under its own name. Its state directory and its
kept data are its own, so a command that keeps its checkpoints under
``$ELASTIX_LOCAL_DATA_DIR`` or ``$ELASTIX_WORKLOAD_DIR`` (the default job does) starts from
nothing. A command that names another place would share it, and the copy would restore the
workload's checkpoints and write its own among them: :func:`shared_storage` finds that in the
command, before anything starts.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from elastix.backends.local.plan import Plan, data_dir, make_plan
from elastix.errors import UsageError
from elastix.workload.manifest import renamed
from elastix.workload.names import companion_name, problems

AS_THE_ORIGINAL = ("devices_per_slice", "scheduling_delay", "health_timeout",
                   "heartbeat_interval", "hung_host_timeout")
"""Plan fields read from the creator's environment at submit: the copy keeps the workload's."""

_STORAGE = re.compile(r"(?:--checkpoint[-_]dir|--base[-_]output[-_]directory|"
                      r"\bbase_output_directory|\bcheckpoint_dir)(?:=|\s+)"
                      r"(\"[^\"]*\"|'[^']*'|\S+)")
"""Where a command keeps checkpoints: elastix-train's flag, MaxText's setting."""
_OWN = re.compile(r"\$(?:\{|\()?(?:ELASTIX_LOCAL_DATA_DIR|ELASTIX_WORKLOAD_DIR)\b")
"""A workload's own directories: every workload (and so every copy) has its own."""


def _expanded(text: str, env: dict[str, str]) -> str:
    """``$VAR``, ``${VAR}`` and ``$(VAR)`` of the head's literal env replaced by their values
    (the rest left as written)."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return env.get(name, m.group(0))

    return re.sub(r"\$(?:\{(\w+)\}|\((\w+)\)|(\w+))", sub, text)


def shared_storage(plan: Plan) -> str | None:
    """The first checkpoint location the head's command names that is not under its own
    workload's directories (a copy would share it), or None."""
    env = {e["name"]: str(e["value"]) for e in plan.head_env if "value" in e}
    text = _expanded(" ".join(plan.head_command), env)
    for m in _STORAGE.finditer(text):
        where = m.group(1).strip("\"'")
        if not _OWN.search(where):
            return where
    return None


def copy_of(name: str, workload_dir: Path, manifest: dict[str, Any], plan: Plan,
            env: dict[str, str], suffix: str) -> tuple[str, dict[str, Any], Plan]:
    """The copy's name, manifest and plan, checked (nothing is started).

    Raises:
        UsageError: the command keeps its checkpoints where the copy would share them, no
            name fits, or the copy's name (or its kept data) is taken.
    """
    where = shared_storage(plan)
    if where is not None:
        raise UsageError(f"{name} keeps its checkpoints in {where}: a copy would restore them "
                         "and write its own there", hint="keep them under "
                         "$ELASTIX_LOCAL_DATA_DIR (each workload has its own), or create the "
                         "reference yourself and pass --reference NAME")
    new = companion_name(name, suffix, lambda n: not problems(renamed(manifest, n)))
    if new is None:
        raise UsageError(f"no name for a copy of {name} fits the name rules",
                         hint="create the reference yourself and pass --reference NAME")
    root = workload_dir.parent
    if (root / new).exists():
        raise UsageError(f"workload {new} exists: it would be {name}'s {suffix}",
                         hint=f"compare against it with --reference {new}, or delete it: "
                              f"elastix workload delete {new} --delete-data")
    if data_dir(root / new).exists():
        raise UsageError(f"{new}, the name of {name}'s {suffix}, has kept data (checkpoints) "
                         f"in {data_dir(root / new)}: a copy would resume from it",
                         hint=f"remove it: elastix workload delete {new} --delete-data")
    copy = renamed(manifest, new)
    fresh = make_plan(copy, root / new, env, plan.cwd)
    return new, copy, dataclasses.replace(
        fresh, **{k: getattr(plan, k) for k in AS_THE_ORIGINAL})
