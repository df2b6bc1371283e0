"""A local head that runs ``elastix-train``: what ``create`` checks of it before anything starts.

Two things a newcomer met only after ``created`` (issue 49):

- an install without the trainer (``pip install .``, the launcher alone): the head died at once
  with ``ModuleNotFoundError: No module named 'jax'``. :func:`check_installed` refuses it at
  submit, in one line naming the install command.
- a run whose kept data already holds a checkpoint of its last step (the quickstart run again
  after it finished): the trainer resumes it and completes at once. :func:`finished_checkpoint`
  finds that before the run starts, so ``create`` can say so and how to start over.

Only a head whose command is ``elastix-train`` (directly, or the one command of the rendered
``bash -c`` script) is looked at: a user's own ``--command`` is never judged.

And what the supervisor asks of it before it pre-starts the head's imports
(:func:`trainer_argv`): the exact argv bash would run. That reading is stricter than
:func:`trainer_words`' (which only has to tell ``elastix-train`` from another program for a
check or a notice): the pre-started head runs that argv without a shell, so any script bash
might read otherwise is left to bash.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from elastix.errors import UsageError
from elastix.protocol import entrypoints, envvars

_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = re.compile(r"[;&|<>()`\n]")

INSTALL = "pip install 'elastix[trainer]'"
"""The one command that adds the trainer to a launcher-only install."""


def trainer_words(command: list[str]) -> list[str] | None:
    """The words of the head's command when it runs ``elastix-train`` (leading ``VAR=value``
    words dropped), else None: a script of several commands, or another program."""
    words = list(command)
    if len(command) == 3 and Path(command[0]).name in ("bash", "sh") and command[1] == "-c":
        if _OPERATORS.search(command[2]):
            return None
        try:
            words = shlex.split(command[2])
        except ValueError:
            return None
    while words and _ASSIGN.match(words[0]):
        words = words[1:]
    if not words or Path(words[0]).name != entrypoints.TRAINER_SCRIPT:
        return None
    return words


def _runs_here(word: str, env: dict[str, str]) -> bool:
    """Whether ``word`` is the ``elastix-train`` beside this interpreter: the one the local
    supervisor puts first on the head's ``PATH``, run by this same Python."""
    bindir = os.path.dirname(sys.executable)
    exe = shutil.which(word, path=os.pathsep.join((bindir, env.get("PATH", ""))))
    return exe is not None and os.path.dirname(os.path.abspath(exe)) == bindir


def missing_module() -> str | None:
    """The first of the trainer's modules this interpreter cannot import, or None.

    Located, not imported: ``find_spec`` of a top-level name reads no package's code (the
    launcher never imports JAX), and goes through every finder the import would.
    """
    for name in entrypoints.TRAINER_IMPORTS:
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a parent package missing, or a broken one
            found = None
        if found is None:
            return name
    return None


def check_installed(command: list[str], env: dict[str, str]) -> None:
    """Refuse an ``elastix-train`` head this install cannot run (no trainer installed).

    Raises:
        UsageError: a module of the trainer's is missing; the message names the install
            command (one line: the head would otherwise be Failed right after "created").
    """
    words = trainer_words(command)
    if words is None or not _runs_here(words[0], env):
        return
    missing = missing_module()
    if missing is None:
        return
    raise UsageError(f"the local job runs {entrypoints.TRAINER_SCRIPT}, and this install has no "
                     f"trainer (no module named {missing!r}): add it with {INSTALL}, or pass "
                     "--command to run a job of your own")


def _flag(words: list[str], name: str) -> str | None:
    """The value of ``--name V`` or ``--name=V`` in ``words`` (the last one given), or None."""
    value = None
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            value = words[i + 1]
        elif w.startswith(name + "="):
            value = w.split("=", 1)[1]
    return value


def _expand(text: str, known: dict[str, str]) -> str | None:
    """``$VAR``, ``${VAR}`` and ``$(VAR)`` of ``known`` replaced; None if any other is left."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return known.get(name, m.group(0))

    out = re.sub(r"\$(?:\{(\w+)\}|\((\w+)\)|(\w+))", sub, text)
    return None if "$" in out else out


def finished_checkpoint(command: list[str], workload_dir: Path, data_dir: Path,
                        cwd: str) -> tuple[int, int] | None:
    """``(kept step, --steps)`` when an ``elastix-train`` head's local ``--checkpoint-dir``
    already holds a committed checkpoint at or past its last step: the run resumes it and
    completes without a step. None otherwise, or when the command does not say."""
    words = trainer_words(command)
    if words is None:
        return None
    steps, ckpt = _flag(words, "--steps"), _flag(words, "--checkpoint-dir")
    if steps is None or not steps.isdigit() or not ckpt or ckpt.startswith("gs://"):
        return None
    path = _expand(ckpt, {envvars.LOCAL_DATA_DIR: str(data_dir),
                          envvars.WORKLOAD_DIR: str(workload_dir)})
    if path is None:
        return None
    try:  # a local checkpoint is committed once Orbax renamed it to its plain step number
        kept = [int(p.name) for p in Path(cwd, path).iterdir() if p.name.isdigit() and p.is_dir()]
    except OSError:
        return None
    if kept and max(kept) >= int(steps):
        return max(kept), int(steps)
    return None


# What a ``bash -c`` script may hold for it to be one command whose words are known without a
# shell: quotes and ``$NAME``/``${NAME}`` only; no operators, substitutions, globs, escapes or
# carriage returns (a word character to bash, a space to shlex).
_SHELL = re.compile(r"[;&|<>()`*?\[\]{}~!#\\\n\r']|\$(?![A-Za-z_{])")
_VAR = re.compile(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)\})", re.ASCII)


def trainer_argv(cmd: list[str], env: dict[str, str]) -> list[str] | None:
    """The argv ``elastix-train`` gets when the head's command runs, if the command is this
    environment's ``elastix-train`` (the one beside this interpreter), directly or as the one
    command of a ``bash -c`` script (the rendered JobSet's form: bash execs it, so it is the
    head's process). None for anything else, or a script bash might read otherwise than this
    does: that head is not pre-started (:meth:`Supervisor.prestart_head`).

    What bash itself would change is not copied: the variables it keeps (``SHLVL``, ``_``) are
    as the supervisor has them. A ``BASH_ENV`` file or an exported function could run other
    code first, so neither may be in the environment."""
    words = list(cmd)
    if len(cmd) == 3 and os.path.basename(cmd[0]) == "bash" and cmd[1] == "-c":
        script = cmd[2]
        if _SHELL.search(_VAR.sub("", script)) or "BASH_ENV" in env \
                or any(k.startswith("BASH_FUNC_") for k in env):
            return None
        names = [a or b for a, b in _VAR.findall(script)]
        # an unset or empty one's word bash would drop; an unquoted value it would split or
        # glob (refused quoted too: the rule stays simple, and such a head starts as before)
        if any(not env.get(n) or re.search(r"[\s*?\[]", env[n]) for n in names):
            return None
        try:
            words = [_VAR.sub(lambda m: env[m[1] or m[2]], w) for w in shlex.split(script)]
        except ValueError:
            return None
    exe = shutil.which(words[0], path=env.get("PATH")) if words else None
    if exe is None or os.path.basename(exe) != entrypoints.TRAINER_SCRIPT \
            or os.path.dirname(exe) != os.path.dirname(sys.executable):
        return None
    return [exe, *words[1:]]
