"""The local backend's records read back as the types they were written with.

``plan.json`` and ``state.json`` are elastix's own files, but a user may edit one, or a disk may
damage it: a value of the wrong type (a ``created`` that is a number, ``labels: null``, a pid
that is text) surfaced later as an ``unexpected TypeError`` in whichever command read it first.
:func:`typed` checks each value against its dataclass field's annotation when it is read, so
the file is said to be damaged (``CorruptStateFile``) in one line instead.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any

from elastix.errors import shown


def typed(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (a record's fields, by name), each checked against ``cls``'s annotation.

    Raises:
        TypeError: a value that is not of its field's type, named.
    """
    hints = _hints(cls)
    for name, v in values.items():
        if not fits(v, hints[name]):
            raise TypeError(f"{name} {shown(v)} is not {_words(hints[name])}")
    return values


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def fits(v: Any, t: Any) -> bool:
    """Whether ``v`` (read from JSON) is of type ``t``: str, int, float, bool, None, Any,
    lists and dicts of those, unions, and dataclasses (a dict their ``from_json`` reads)."""
    origin, args = typing.get_origin(t), typing.get_args(t)
    if t is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(fits(v, a) for a in args)
    if t is type(None):
        return v is None
    if t is bool:
        return isinstance(v, bool)
    if t is int:
        return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**63
    if t is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
            and abs(v) < 1e18
    if origin is list:
        return isinstance(v, list) and all(fits(x, args[0]) for x in v)
    if origin is dict:
        return isinstance(v, dict) and all(fits(k, args[0]) and fits(x, args[1])
                                           for k, x in v.items())
    if dataclasses.is_dataclass(t):
        return isinstance(v, dict)
    return isinstance(v, t)


def _words(t: Any) -> str:
    return f"a {getattr(t, '__name__', None) or str(t).replace('typing.', '')}"
