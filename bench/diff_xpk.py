"""Structural diff of elastix's dry-run JobSet against xpk 1.16.0's reference render.

Loads both YAML documents and prints every key path that exists in only one of them or holds a
different value. Lists of objects are matched by a natural key (``name``, ``containerPort``,
``key``, ``mountPath``) rather than by position, so reordering alone is reported once, not as a
cascade; lists of scalars (``args``) are compared as sets plus order.

Run by hand::

    .venv/bin/python bench/diff_xpk.py                # renders with elastix itself
    .venv/bin/python bench/diff_xpk.py --elastix out.yaml
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cli import ELASTIX_DRY_RUN, REFERENCE  # noqa: E402

MATCH_KEYS = ("name", "containerPort", "key", "mountPath")


def _short(value: Any, width: int = 70) -> str:
    text = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _match_key(items: list) -> str | None:
    for key in MATCH_KEYS:
        if items and all(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def _by_key(a: dict, b: dict, keys: list, at: Any) -> list[tuple[str, str, str]]:
    """The differences of two mappings over ``keys``: a key on one side only, or the diff of
    its two values; ``at(key)`` spells the key's path (``.k``, ``[name=k]`` in a keyed list,
    ``[i]`` in another)."""
    out: list[tuple[str, str, str]] = []
    for k in keys:
        if k not in b:
            out.append(("only-xpk", at(k), _short(a[k])))
        elif k not in a:
            out.append(("only-elastix", at(k), _short(b[k])))
        else:
            out.extend(diff(a[k], b[k], at(k)))
    return out


def diff(a: Any, b: Any, path: str = "") -> list[tuple[str, str, str]]:
    """(kind, path, detail) for every difference; a is xpk, b is elastix."""
    out: list[tuple[str, str, str]] = []
    if isinstance(a, dict) and isinstance(b, dict):
        return _by_key(a, b, sorted(set(a) | set(b), key=str),
                       lambda k: f"{path}.{k}" if path else str(k))
    if isinstance(a, list) and isinstance(b, list):
        key = _match_key(a + b)
        if key:
            ia = {i[key]: i for i in a}
            ib = {i[key]: i for i in b}
            out = _by_key(ia, ib, list(ia) + [k for k in ib if k not in ia],
                          lambda k: f"{path}[{key}={k}]")
            if [k for k in ia if k in ib] != [k for k in ib if k in ia]:
                out.append(("order", path, f"by {key}: xpk {list(ia)} elastix {list(ib)}"))
            return out
        if all(not isinstance(i, (dict, list)) for i in a + b):
            sa, sb = [_short(i) for i in a], [_short(i) for i in b]
            for i in sa:
                if i not in sb:
                    out.append(("only-xpk", f"{path}[]", i))
            for i in sb:
                if i not in sa:
                    out.append(("only-elastix", f"{path}[]", i))
            if sorted(sa) == sorted(sb) and sa != sb:
                out.append(("order", path, "same items, different order"))
            return out
        return _by_key(dict(enumerate(a)), dict(enumerate(b)), list(range(max(len(a), len(b)))),
                       lambda i: f"{path}[{i}]")
    if a != b:
        kind = "type" if type(a) is not type(b) and str(a) == str(b) else "value"
        out.append((kind, path, f"xpk {_short(json.dumps(a), 50)} | elastix {_short(json.dumps(b), 50)}"))
    return out


def _abbrev(path: str) -> str:
    path = re.sub(r"^spec\.replicatedJobs\[name=([^\]]+)\]", r"rj[\1]", path)
    path = path.replace(".template.spec.template.spec", ".pod")
    return re.sub(r"\[name=([^\]]+)\]", r"[\1]", path)


def _jobset(text: str) -> dict:
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    jobsets = [d for d in docs if d.get("kind") == "JobSet"]
    if not jobsets:
        raise SystemExit(f"no JobSet document found (kinds: {[d.get('kind') for d in docs]})")
    return jobsets[0]


def render_with_elastix(elastix: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="diff_xpk_") as tmp:
        env = {"PATH": f"{elastix.parent}:/usr/bin:/bin", "HOME": tmp}
        argv = [str(elastix), *ELASTIX_DRY_RUN]
        proc = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"elastix failed (exit {proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xpk", type=Path, default=REFERENCE, help="xpk's rendered JobSet")
    parser.add_argument("--elastix", type=Path, help="elastix's JobSet YAML (default: render it)")
    parser.add_argument("--elastix-bin", type=Path, default=Path(sys.executable).parent / "elastix")
    args = parser.parse_args()
    xpk = _jobset(args.xpk.read_text())
    text = args.elastix.read_text() if args.elastix else render_with_elastix(args.elastix_bin)
    diffs = diff(xpk, _jobset(text))
    print("rj[X] = spec.replicatedJobs[name=X], .pod = .template.spec.template.spec\n")
    for kind, path, detail in diffs:
        print(f"{kind:<12} {_abbrev(path)}\n{'':<12} {detail}")
    print(f"\n{len(diffs)} differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
