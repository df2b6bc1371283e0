"""What a diagnostics bundle must never carry: the values of a workload's own environment.

``--env NAME=VALUE`` (and any ``env`` a user's YAML sets) is where tokens and keys go, and a
bundle (``elastix workload inspect``) is made to be attached to a ticket or a CI run. So the
value of every variable the user set is replaced by :data:`HIDDEN` in the manifest (the name
kept; the copy of the manifest in ``kubectl``'s last-applied annotation too), and scrubbed
from every string of the bundle (a head that echoes its environment, an error message quoting
it): :class:`Scrubber`. A variable is the user's whatever its name, ``ELASTIX_*`` included;
what stays shown are the platform's own: the names elastix, xpk and Cluster Toolkit render for
Pathways themselves (:data:`PLATFORM`: ``JAX_PLATFORMS=proxy``, ``MEGASCALE_NUM_SLICES``...)
and elastix's own protocol (:data:`ELASTIX_OWN`, ``elastix.protocol.envvars``), which are no
one's secret and say how the workload is wired. The heartbeat key the local supervisor gives
its processes (``ELASTIX_HEARTBEAT_KEY``) is always hidden where it is named. References
(``valueFrom``: a Secret's or a ConfigMap's name and key) stay: they say where a value comes
from, not what it is. Secrets themselves are never read.

How a value is found in text (:func:`forms`): as a program may print it: verbatim; JSON-escaped
(``json.dumps``, ASCII-only and not); Python's ``repr`` of the string and of its UTF-8 bytes
(``print(os.environ)``, ``os.environb``); shell double-quoted (``export -p``); and each line of
a multi-line value on its own (a PEM key printed line by line). And by name, whatever the
value's length: ``NAME=...`` to the end of its line (``env``, ``export``), ``"NAME": "..."`` and
``'NAME': '...'`` (a dict printed as JSON or by Python). Not base64 or other encodings a
program would have to choose to apply.

What is never rewritten: text that is not one of those. A form is replaced only where it stands
whole, not as a piece of a longer word (``last_step`` keeps its ``step``: a character that can
be part of a word, a letter, digit or ``_``, next to a form's own word character means the form
is inside a word), and only forms of at least :data:`MIN_SCRUBBED` characters are looked for in
free text: a shorter value (``1``, ``on``, ``train``) is hidden in the manifest and by name, not
wherever the same word happens to appear.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from typing import Any

from elastix.protocol import envvars

HIDDEN = "<hidden by elastix>"

PLATFORM = frozenset({
    # elastix's own rendering (elastix.workload.render: main_env, worker_env, the RM's env)
    "PATHWAYS_HEAD", "JAX_PLATFORMS", "XCLOUD_ENVIRONMENT", "JAX_BACKEND_TARGET",
    "REPLICATED_JOB_NAME", "JOBSET_NAME", "HOST_ADDRESS", "TPU_SKIP_MDS_QUERY",
    "TPU_MIN_LOG_LEVEL", "TF_CPP_MIN_LOG_LEVEL", "MEGASCALE_GRPC_ENABLE_XOR_TRACER",
    "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS",
    # xpk 1.16's Pathways JobSet (tests/fixtures/xpk-1.16.0-pathways-elastic.yaml) sets the
    # same names; Cluster Toolkit's pathways_jobset.tmpl (tests/fixtures/gcluster) adds:
    "ABSL_FLAGS",
})
"""Environment variables the Pathways JobSet renderers set themselves: their values are
shown."""

ALWAYS_HIDDEN = frozenset({envvars.HEARTBEAT_KEY})
"""Names whose value is hidden wherever they are named, set by the user or not."""

ELASTIX_OWN = frozenset(
    v for k, v in vars(envvars).items()
    if k.isupper() and isinstance(v, str) and v.startswith("ELASTIX_")) - ALWAYS_HIDDEN
"""elastix's own variables (``elastix.protocol.envvars``): their values are shown. Any other
``ELASTIX_*`` a user sets is theirs, and hidden."""

MIN_SCRUBBED = 8
"""Forms shorter than this are not looked for in free text (they are still hidden in the
manifest and where their variable is named): a value of ``1``, ``on`` or ``train`` would blot
out every such word, and a token or key is longer."""

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""The annotation ``kubectl apply`` keeps the applied object in, as JSON text."""


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container and init container of every replicated job's pod template."""
    out: list[dict[str, Any]] = []
    for rj in ((manifest.get("spec") or {}).get("replicatedJobs") or []):
        pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec") or {}
        for key in ("initContainers", "containers"):
            out += [c for c in pod.get(key) or [] if isinstance(c, dict)]
    return out


def _own(entry: Any) -> bool:
    """An ``env`` entry with a literal value that is the workload's own, not the platform's."""
    if not isinstance(entry, dict) or entry.get("value") in (None, ""):
        return False
    name = str(entry.get("name", ""))
    return name not in PLATFORM and name not in ELASTIX_OWN


def _applied(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The object kept in the last-applied annotation, when it is JSON of a mapping."""
    text = ((manifest.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str):
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _manifests(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    applied = _applied(manifest)
    return [manifest] + ([applied] if applied is not None else [])


def env_values(manifest: dict[str, Any]) -> list[str]:
    """The literal values of the workload's own environment variables, longest first."""
    values = {str(e["value"]) for m in _manifests(manifest) for c in _containers(m)
              for e in c.get("env") or [] if _own(e)}
    return sorted(values, key=len, reverse=True)


def env_names(manifest: dict[str, Any]) -> list[str]:
    """The names of the workload's own environment variables (and :data:`ALWAYS_HIDDEN`)."""
    names = {str(e["name"]) for m in _manifests(manifest) for c in _containers(m)
             for e in c.get("env") or [] if _own(e)}
    return sorted(names | ALWAYS_HIDDEN)


def hide_env(manifest: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``manifest`` with the value of each of the workload's own environment
    variables replaced by :data:`HIDDEN`, in the last-applied annotation's copy too."""
    out = copy.deepcopy(manifest)
    for c in _containers(out):
        for e in c.get("env") or []:
            if _own(e):
                e["value"] = HIDDEN
    applied = _applied(out)
    if applied is not None:
        out["metadata"]["annotations"][LAST_APPLIED] = json.dumps(
            hide_env(applied), separators=(",", ":"))
    return out


def forms(value: str) -> set[str]:
    """The ways a program may print ``value`` (the module's docstring), each at least
    :data:`MIN_SCRUBBED` long."""
    shell = (value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
             .replace("`", "\\`"))
    out = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
           repr(value)[1:-1], repr(value.encode("utf-8", "surrogatepass"))[2:-1], shell}
    if "\n" in value or "\r" in value:
        for line in value.splitlines():
            out |= forms(line.strip()) if line.strip() != value else set()
    return {f for f in out if len(f) >= MIN_SCRUBBED}


def _whole(form: str) -> str:
    """``form`` as a pattern that matches it only where it stands whole (not in a word)."""
    left = r"(?<!\w)" if re.match(r"\w", form[0]) else ""
    right = r"(?!\w)" if re.match(r"\w", form[-1]) else ""
    return f"{left}{re.escape(form)}{right}"


_QUOTED = r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''


class Scrubber:
    """Hides the values of a workload's own variables in any text or JSON-like data."""

    def __init__(self, values: Iterable[str], names: Iterable[str] = ()) -> None:
        found = sorted({f for v in values if v for f in forms(str(v))}, key=len, reverse=True)
        self._values = re.compile("|".join(_whole(f) for f in found)) if found else None
        names = sorted({n for n in names if n}, key=len, reverse=True)
        alt = "|".join(re.escape(n) for n in names)
        # NAME=..., to the end of the line; "NAME": "...", 'NAME': '...'
        self._assigned = re.compile(rf"(?<![\w$])((?:{alt})=)[^\n]*") if names else None
        self._keyed = re.compile(
            rf"""((["'])(?:{alt})\2\s*:\s*)(?:{_QUOTED})""") if names else None

    def text(self, s: str) -> str:
        """``s`` with every form of a value, and every value after its name, hidden."""
        if self._assigned is not None:
            s = self._assigned.sub(lambda m: m.group(1) + HIDDEN, s)
            s = self._keyed.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}{m.group(2)}", s)
        if self._values is not None:
            s = self._values.sub(HIDDEN, s)
        return s

    def __call__(self, data: Any) -> Any:
        """``data`` (JSON-like) with :meth:`text` applied to every string, keys included."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {self(k): self(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self(v) for v in data]
        return data


def scrub(data: Any, values: list[str], names: Iterable[str] = ()) -> Any:
    """``data`` (JSON-like) with the values of the workload's own variables hidden in every
    string, keys included (:class:`Scrubber`)."""
    return Scrubber(values, names)(data)
