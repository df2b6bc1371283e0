"""Where a workload's spec comes from: flags, an env file, a spec file and backend defaults.

:func:`resolve_spec` is the one place that decides which source gives a field, so
``workload create`` only parses its options and calls it, and the precedence is tested without
a command line. A field takes the first of:

1. its flag (``--env`` and ``--label`` merge key by key over the spec file's mapping);
2. for ``env`` only, the ``--env-file`` (a command-line source, so over the spec file, under
   ``--env``);
3. the spec file (``--spec``);
4. the backend's default (the local backend's job), unless the workload is headless;
5. the :class:`~elastix.workload.spec.WorkloadSpec` default.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from elastix.errors import UsageError, load_user_yaml, shown
from elastix.workload.spec import FIELDS, KINDS, WorkloadSpec, build_spec, read_user_text

FlagValue = str | int | bool | list[str] | None
"""A flag's value as the command line parses it: None (or an empty list) when not given; a
mapping field's as its repeated ``KEY=VALUE`` strings."""


def resolve_spec(flags: Mapping[str, FlagValue], *, spec_file: Path | None = None,
                 env_file: Path | None = None,
                 backend_defaults: Mapping[str, object] | None = None) -> WorkloadSpec:
    """The validated spec from every source, each field from the first that gives it.

    Args:
        flags: field name -> flag value (see :data:`FlagValue`); the target's fields (name,
            cluster, project, location, namespace) too.
        spec_file: the ``--spec`` YAML file (keys may use ``-`` or ``_``).
        env_file: the ``--env-file`` of ``KEY=VALUE`` lines.
        backend_defaults: the fields the chosen backend fills in when nothing else gives them
            (``Backend.defaults``); ignored for a headless workload, which runs no trainer.

    Raises:
        UsageError: a file cannot be read or parsed, or a ``KEY=VALUE`` flag has no ``=``.
        SpecError: every problem of the merged spec, each with its field and a fix.
    """
    file_values = load_spec_file(spec_file) if spec_file else {}
    given = flag_values(flags)
    if env_file:
        given["env"] = {**load_env_file(env_file), **given.get("env", {})}
    in_file = {str(k).replace("-", "_"): v for k, v in file_values.items()}
    headless = given["headless"] if "headless" in given else in_file.get("headless")
    if not headless:
        for field, value in (backend_defaults or {}).items():
            if field not in given and not in_file.get(field):
                given[field] = value
    return build_spec(file_values, given)


def flag_values(flags: Mapping[str, FlagValue]) -> dict[str, Any]:
    """The flags that were given, as field values: ``KEY=VALUE`` lists become mappings.

    An option left out (None) or a repeatable one never given (an empty list) is dropped, so
    the spec file's value applies.

    Raises:
        UsageError: a ``KEY=VALUE`` item without ``=``; the hint names the field's flag.
    """
    out: dict[str, Any] = {}
    for key, value in flags.items():
        if value is None or value == []:
            continue
        if KINDS.get(key) == "map" and isinstance(value, list):
            meta = FIELDS[key].metadata
            value = parse_kv(value, meta["flags"][0], meta["kv"])
        out[key] = value
    return out


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML spec file into a plain mapping (keys may use - or _)."""
    p = Path(path)
    text = read_user_text(p, "spec file", "--spec", "save it as UTF-8 YAML")
    data = load_user_yaml(text, f"spec file {str(p)!r}",
                          "fix the YAML (indentation, quotes, ': '); a spec is a mapping of "
                          "fields to strings, numbers, lists and mappings, a few levels deep",
                          too_deep=" to be a workload spec")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"spec file {str(p)!r} must be a mapping of fields",
                         hint="e.g. 'name: demo' and 'tpu_type: v5litepod-16' on separate lines")
    if data and not any(str(k).replace("-", "_") in FIELDS for k in data):
        # Not a spec at all (some other YAML or key: value file): its keys are not quoted,
        # they may be anything the file holds.
        raise UsageError(f"spec file {str(p)!r} is not a workload spec: none of its {len(data)} "
                         "keys is a spec field",
                         hint="check the path given to --spec; elastix workload create --help "
                              "lists the fields")
    return data


def load_env_file(path: str | Path) -> dict[str, str]:
    """Read ``KEY=VALUE`` lines (``#`` comments, blank lines and ``export`` allowed)."""
    p = Path(path)
    lines = read_user_text(p, "env file", "--env-file",
                           "save it as UTF-8 KEY=VALUE lines").splitlines()
    out: dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("export "):
            s = s[len("export "):].lstrip()
        if "=" not in s:  # its content is not quoted: it may be a file of secrets
            raise UsageError(f"{p}:{n}: expected KEY=VALUE (the line has no '=')",
                             hint="one KEY=VALUE per line; quote nothing")
        k, v = s.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        out[k.strip()] = v
    return out


def parse_kv(items: list[str], flag: str, example: str = "key=value") -> dict[str, str]:
    """Repeated ``FLAG KEY=VALUE`` values to a dict; a value may contain ``=``.

    Raises:
        UsageError: an item without ``=``; the hint shows ``FLAG example``.
    """
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"{flag} {shown(item)} is not KEY=VALUE",
                             hint=f"write {flag} {example}")
        k, v = item.split("=", 1)
        out[k] = v
    return out
