"""The trainer's command line as a rendered JobSet holds it, parsed rather than grepped.

The head's main container runs the trainer; what it was told (MaxText's ``key=value``
overrides, ``elastix-train``'s ``--flag value`` / ``--flag=value``) is read here once, for every
check that judges a manifest before it is submitted (:mod:`elastix.workload.lint`; the restore
preflight reads the same words). ``$VAR``, ``${VAR}`` and ``$(VAR)`` of the container's literal
environment are expanded first, as the shell (``bash -c``) and Kubernetes (``$(VAR)`` in
``command``) would.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from typing import Any

from elastix.protocol import entrypoints
from elastix.workload import labels
from elastix.workload.manifest import pod_spec, replicated_job

_MAXTEXT = re.compile(r"\bMaxText\.train\b|\bmaxtext\.train\b|\bmaxtext/train\.py\b|"
                      r"\bMaxText/train\.py\b|\btrain_compile\b|\bmaxtext\.trainers\.")
MAXTEXT_ENV_PREFIX = "M_"
"""MaxText reads any config key from the environment as ``M_<KEY>`` (upper case) when the
command line does not set it (``maxtext/configs/pyconfig.py`` L43, L124-125, L526-545 of 0.2.5)."""


@dataclasses.dataclass(frozen=True)
class TrainerCommand:
    """The head's main container: its command line and its literal environment."""

    command: str  # the command line, as one shell string
    env: dict[str, str]  # name -> value of the env entries that have a literal ``value``

    @property
    def maxtext(self) -> bool:
        """The command runs MaxText's trainer (its module, or a ``base_output_directory=``)."""
        return bool(_MAXTEXT.search(self.command)) or "base_output_directory=" in self.command

    @property
    def elastix_train(self) -> bool:
        """The command runs ``elastix-train`` (the script or its module)."""
        package = entrypoints.TRAINER_PACKAGE
        return any(os.path.basename(w) == entrypoints.TRAINER_SCRIPT
                   or w in (package, f"{package}.__main__") for w in self.words())

    def words(self) -> list[str]:
        """The command line split as the shell would, its environment expanded (a backslash
        before a newline continues the line, as in the shell)."""
        line = expanded(self.command, self.env).replace("\\\n", "")
        try:
            return shlex.split(line)
        except ValueError:  # an unbalanced quote: the shell would refuse it too
            return line.split()

    def maxtext_key(self, name: str) -> str | None:
        """A MaxText setting: ``name=value`` on the command line, else ``M_NAME`` in the env."""
        found = key(self.words(), name)
        return found if found is not None else self.env.get(MAXTEXT_ENV_PREFIX + name.upper())


def expanded(text: str, env: dict[str, str]) -> str:
    """``$VAR``, ``${VAR}`` and ``$(VAR)`` of the container's literal env replaced."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return env.get(name, m.group(0))

    return re.sub(r"\$(?:\{(\w+)\}|\((\w+)\)|(\w+))", sub, text)


def flag(words: list[str], *names: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` (the last given wins)."""
    found = None
    for i, w in enumerate(words):
        for n in names:
            if w == n and i + 1 < len(words):
                found = words[i + 1]
            elif w.startswith(n + "="):
                found = w[len(n) + 1:]
    return found


def key(words: list[str], name: str) -> str | None:
    """A MaxText ``name=value`` setting (the last given wins)."""
    found = None
    for w in words:
        if w.startswith(name + "="):
            found = w[len(name) + 1:]
    return found


def head_containers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The head pod's containers by name, its (sidecar) init containers included."""
    spec = pod_spec(replicated_job(manifest, labels.HEAD_JOB))
    return {c.get("name"): c for c in (spec.get("initContainers") or []) +
            (spec.get("containers") or []) if isinstance(c, dict)}


def literal_env(container: dict[str, Any]) -> dict[str, str]:
    """The entries of a container's ``env`` that have a literal value."""
    return {e["name"]: str(e["value"]) for e in container.get("env") or []
            if isinstance(e, dict) and "name" in e and "value" in e}


_WRAPPED = re.compile(r"^[ \t]*\(\s*(.+?)\s*\)\s*&\s*PID=\$!", re.DOTALL | re.MULTILINE)
"""The trainer inside a launcher's SIGTERM wrapper script: ``(CMD) & PID=$!``, as xpk's
(``tests/fixtures/xpk-1.16.0-pathways-elastic.yaml``) and gcluster's (cluster-toolkit
``pkg/orchestrator/gke/templates/pathways_jobset.tmpl`` L177-196 @ c765092) run it."""


def main_container(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The head's trainer container: elastix's and xpk's ``jax-tpu``, else the head's first
    container (gcluster's ``workload-container``; the Pathways sidecars are init containers);
    None when the head has none that is not a Pathways sidecar (headless)."""
    spec = pod_spec(replicated_job(manifest, labels.HEAD_JOB))
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    named = [c for c in containers if c.get("name") == labels.MAIN_CONTAINER]
    rest = [c for c in containers if c.get("name") not in (
        labels.PROXY_CONTAINER, labels.RM_CONTAINER)]
    return (named or rest or [None])[0]


def trainer_command(manifest: dict[str, Any]) -> TrainerCommand | None:
    """The head's main container's :class:`TrainerCommand` (out of a launcher's SIGTERM wrapper
    when it has one); None when it has none (headless)."""
    main = main_container(manifest)
    if main is None:
        return None
    argv = [str(a) for a in (*(main.get("command") or []), *(main.get("args") or []))]
    shell = len(argv) > 2 and os.path.basename(argv[0]) in ("bash", "sh") and argv[1] == "-c"
    command = argv[-1] if shell else shlex.join(argv)
    wrapped = _WRAPPED.search(command) if shell else None
    if wrapped is not None:
        command = wrapped.group(1)
    return TrainerCommand(command=command, env=literal_env(main))
