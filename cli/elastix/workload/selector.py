"""Label selectors (``-l/--selector``) as kubectl takes them, checked before any request.

The grammar is Kubernetes' (k8s.io/apimachinery ``pkg/labels/selector.go``, "Parse"):
requirements joined by commas, all of which must hold; each is ``key=value`` (or ``==``),
``key!=value``, ``key in (a,b)``, ``key notin (a,b)``, ``key`` (the label exists) or ``!key``
(it does not). Keys and values follow the label rules ``workload create --label`` checks.

GKE sends the selector's text to the API server as ``labelSelector``; the local backend matches
the labels kept with each workload's plan with :meth:`Selector.matches`, so both backends pick
the same workloads for the same selector.
"""

from __future__ import annotations

import dataclasses
import re

from elastix.errors import UsageError, shown
from elastix.workload.validate import LABEL_VALUE, label_key_ok  # the spec's label rules

_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<neg>!)\s*(?P<nkey>[^\s!=(),]+)"
    r"|(?P<skey>[^\s!=(),]+)\s+(?P<setop>in|notin)\s*\((?P<vals>[^()]*)\)"
    r"|(?P<key>[^\s!=(),]+)\s*(?:(?P<op>==|=|!=)\s*(?P<val>[^\s!=(),]*))?)\s*$")
_HINT = "e.g. -l team=ml, -l 'env in (dev,test)', -l '!debug' (requirements joined by commas)"


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One requirement: ``op`` is ``=``, ``!=``, ``in``, ``notin``, ``exists`` or ``!exists``."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.key)
        return {"=": have == (self.values[0] if self.values else None),
                "!=": have != (self.values[0] if self.values else None),
                "in": have in self.values,
                "notin": have not in self.values,
                "exists": self.key in labels,
                "!exists": self.key not in labels}[self.op]

    def text(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!exists":
            return f"!{self.key}"
        if self.op in ("in", "notin"):
            return f"{self.key} {self.op} ({','.join(self.values)})"
        return f"{self.key}{self.op}{self.values[0]}"


@dataclasses.dataclass(frozen=True)
class Selector:
    """A parsed selector: every requirement must hold."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a workload with these labels is selected."""
        return all(r.matches(labels) for r in self.requirements)

    def text(self) -> str:
        """The selector as the API server's ``labelSelector`` reads it."""
        return ",".join(r.text() for r in self.requirements)


def _split(text: str) -> list[str]:
    """Requirements split at the commas that are not inside ``( )``."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _check(key: str, values: tuple[str, ...], text: str) -> None:
    if not label_key_ok(key):
        raise UsageError(f"--selector {shown(text)}: {shown(key)} is not a valid label key",
                         hint=_HINT)
    for v in values:
        if len(v) > 63 or not LABEL_VALUE.match(v):
            raise UsageError(f"--selector {shown(text)}: {shown(v)} is not a valid label value "
                             "(63 characters or fewer of [A-Za-z0-9-_.], starting and ending "
                             "alphanumeric)", hint=_HINT)


def parse(text: str) -> Selector:
    """Parse ``-l/--selector``.

    Raises:
        UsageError: an empty selector, or a requirement that is not one of the forms above,
            or a key or value that no label can have (one line, naming it).
    """
    if not text.strip():
        raise UsageError("--selector is empty", hint=_HINT)
    reqs = []
    for part in _split(text):
        m = _REQUIREMENT.match(part)
        if not m:
            raise UsageError(f"--selector {shown(text)}: cannot read {shown(part.strip())}",
                             hint=_HINT)
        if m["nkey"]:
            req = Requirement(m["nkey"], "!exists")
        elif m["skey"]:
            if not m["vals"].strip():
                raise UsageError(f"--selector {shown(text)}: {m['setop']} needs at least one value",
                                 hint=_HINT)
            vals = tuple(v.strip() for v in m["vals"].split(","))
            req = Requirement(m["skey"], m["setop"], vals)
        elif m["op"]:
            req = Requirement(m["key"], "=" if m["op"] == "==" else m["op"], (m["val"],))
        else:
            req = Requirement(m["key"], "exists")
        _check(req.key, req.values, text)
        reqs.append(req)
    return Selector(tuple(reqs))
