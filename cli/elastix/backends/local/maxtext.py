"""A MaxText head on the local backend: which Python runs it, and its Pathways stand-in.

MaxText needs its own environment (maxtext 0.2.5 requires Python >= 3.12 and a stack of its
own), so a head command that runs MaxText as a module, ``python -m maxtext.<module> ...`` (or
``MaxText.``, the older package name), has its leading ``python``/``python3`` resolved to the
MaxText environment's Python: ``ELASTIX_MAXTEXT_PYTHON``, by default
``<elastix tree>/.venv-maxtext/bin/python`` (``bash .ci/setup-maxtext`` makes it). A command
that names a Python by path runs that one. Everything is checked at submit, before the
workload exists: a missing environment, a Python without maxtext, and for
``elastic_enabled=true`` the versions the stand-in knows and the slice count.

The head gets the local Pathways stand-in (``elastix_trainer.elastic.local.maxtext``, see
docs/maxtext.md) through a ``sitecustomize`` first on its ``PYTHONPATH``: a directory of the
workload's holding links to the ``elastix`` protocol package, the ``elastix_trainer`` package
and the sitecustomize, so the MaxText environment needs nothing of elastix installed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from elastix.errors import UsageError
from elastix.protocol import entrypoints, envvars
from elastix.workload import maxtext_env
from elastix.workload.maxtext_env import SETUP_HINT

_PYTHON = re.compile(r"^python(?:3(?:\.\d+)?)?\Z")
_MODULE = re.compile(r"^(?:maxtext|MaxText)(?:\.|$)")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_TRUE = ("true", "1", "yes")
CHECK_TIMEOUT = 120.0  # seconds for the MaxText Python to report its versions (a loaded box)


@dataclasses.dataclass
class MaxTextHead:
    """What the local backend does with a MaxText head command."""

    command: list[str]
    """The head command with its leading ``python`` resolved."""
    python: str
    elastic: bool
    standin: str
    """``elastic``, ``fault`` or ``""`` (no stand-in: versions it does not know, elastic off)."""
    note: str | None = None
    """Said in the supervisor's log when the head starts (why there is no stand-in)."""


def _tokens(head_command: list[str]) -> tuple[list[str], bool] | None:
    """The head's argv as words, and whether they came from a ``bash -c`` string."""
    if len(head_command) == 3 and Path(head_command[0]).name in ("bash", "sh") \
            and head_command[1] == "-c":
        try:
            return shlex.split(head_command[2]), True
        except ValueError:
            return None
    return list(head_command), False


def parse(head_command: list[str]) -> tuple[int, bool] | None:
    """(index of the Python word, elastic?) when the command runs a MaxText module, else None.

    Leading ``VAR=value`` words are skipped; the module must follow the interpreter's options.
    """
    got = _tokens(head_command)
    if got is None:
        return None
    words, _ = got
    i = 0
    while i < len(words) and _ASSIGN.match(words[i]):
        i += 1
    if i >= len(words) or not _PYTHON.match(Path(words[i]).name):
        return None
    j = i + 1
    while j < len(words) and words[j].startswith("-") and words[j] != "-m":
        j += 1
    if j + 1 >= len(words) or words[j] != "-m" or not _MODULE.match(words[j + 1]):
        return None
    elastic = any(w.split("=", 1)[0] == "elastic_enabled" and w.split("=", 1)[1].lower() in _TRUE
                  for w in words[j + 2:] if "=" in w)
    return i, elastic


def _rewrite(head_command: list[str], index: int, python: str) -> list[str]:
    """The command with its ``index``-th word (a bare ``python``) replaced by ``python``."""
    words, from_bash = _tokens(head_command)  # type: ignore[misc]
    if "/" in words[index]:
        return list(head_command)
    if not from_bash:
        return [*head_command[:index], python, *head_command[index + 1:]]
    # Replace the word in the string itself: re-quoting the whole line would change what the
    # shell expands ($VAR inside double quotes).
    pat = re.compile(r"^(\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)" + re.escape(words[index])
                     + r"(?=\s|$)")
    line = pat.sub(lambda m: m.group(1) + shlex.quote(python), head_command[2], count=1)
    return [head_command[0], head_command[1], line]


def resolve(head_command: list[str], env: dict[str, str], num_slices: int) -> MaxTextHead | None:
    """The MaxText head of ``head_command``, checked; None when it is not a MaxText command.

    Raises:
        UsageError: no MaxText environment, no maxtext in it, or an elastic run the stand-in
            cannot carry (versions it does not know, more than one slice).
    """
    found = parse(head_command)
    if found is None:
        return None
    index, elastic = found
    words, _ = _tokens(head_command)  # type: ignore[misc]
    if "/" in words[index]:
        python = words[index]
    else:
        python = maxtext_env.python(env)
    if not os.access(python, os.X_OK):
        where = (f"{envvars.MAXTEXT_PYTHON}={python}" if env.get(envvars.MAXTEXT_PYTHON)
                 else python)
        raise UsageError(f"a MaxText command needs the MaxText environment, and {where} does "
                         "not exist", hint=SETUP_HINT)
    versions, problem = _check(python, env)
    if not versions.get("maxtext"):
        raise UsageError(f"{python} has no maxtext installed", hint=SETUP_HINT)
    head = MaxTextHead(_rewrite(head_command, index, python), python, elastic,
                       "elastic" if elastic else "fault")
    if elastic and num_slices != 1:
        raise UsageError(
            f"MaxText's elastic path runs locally on one slice, not {num_slices}: CPU devices "
            "have no slice_index, so MaxText would count one slice where pathwaysutils counts "
            f"{num_slices}", hint="pass --num-slices 1 (docs/maxtext.md)")
    if problem and elastic:
        raise UsageError(problem, hint="install the versions it knows (bash .ci/setup-maxtext), "
                                       "or run without elastic_enabled=true")
    if problem:
        head.standin = ""
        head.note = (f"no local Pathways stand-in ({problem}): a killed slice host does not "
                     "fail MaxText's step")
    return head


def _check(python: str, submit_env: dict[str, str]) -> tuple[dict[str, str | None], str | None]:
    """The versions the stand-in checks, as the MaxText Python reports them, and its verdict."""
    with tempfile.TemporaryDirectory() as tmp:
        shim = link_shim(Path(tmp) / "shim")
        env = dict(submit_env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), env.get("PYTHONPATH")) if p)
        env.pop(envvars.MAXTEXT_STANDIN, None)
        try:
            out = subprocess.run([python, "-m", entrypoints.MAXTEXT_STANDIN, "--check"],
                                 env=env, capture_output=True, text=True,
                                 timeout=CHECK_TIMEOUT, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise UsageError(f"the MaxText environment's Python {python} did not run: {err}",
                             hint=SETUP_HINT) from None
    try:
        report = json.loads(out.stdout.strip().splitlines()[-1])
        return report["versions"], report["problem"]
    except (IndexError, ValueError, KeyError, TypeError):
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"the MaxText environment's Python {python} failed: {last}",
                         hint=SETUP_HINT) from None


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # a top-level package: located, not imported
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"the {name} package is not installed beside the launcher",
                         hint="reinstall elastix (pip install .)")
    return Path(next(iter(spec.submodule_search_locations)))


def link_shim(shim: Path) -> Path:
    """Make ``shim``: links to ``elastix``, ``elastix_trainer`` and the stand-in's
    ``sitecustomize``, for the head's ``PYTHONPATH``. Idempotent."""
    shim.mkdir(parents=True, exist_ok=True)
    trainer = _package_dir(entrypoints.TRAINER_PACKAGE)
    links = {"elastix": _package_dir("elastix"), entrypoints.TRAINER_PACKAGE: trainer,
             "sitecustomize.py": trainer.joinpath(*entrypoints.MAXTEXT_SITECUSTOMIZE)}
    for name, target in links.items():
        link = shim / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return shim


def head_env(workload_dir: Path, standin: str, env: dict[str, str]) -> dict[str, str]:
    """What the supervisor adds to a MaxText head's environment."""
    out = {"DECOUPLE_GCLOUD": env.get("DECOUPLE_GCLOUD", "TRUE")}  # no Google Cloud locally
    if standin:
        shim = link_shim(workload_dir / "maxtext-standin")
        out["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), env.get("PYTHONPATH")) if p)
        out[envvars.MAXTEXT_STANDIN] = standin
    return out
