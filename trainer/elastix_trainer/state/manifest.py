"""Checksums of a committed checkpoint's files, recorded once Orbax has committed it and checked
by every restore (beside Orbax's read: ``Checkpointer.restore``).

Why: Orbax's commit proves that every file was written, not that the bytes read back are the
bytes written. A file whose middle was overwritten (same size) read as a valid state and the run
went on from garbage (a wrong loss, or NaN and "training diverged" on every restart) while older
intact steps sat beside it. A truncated or missing file was already caught (Orbax fails to read
it); flipped bytes only a checksum catches.

Why crc32c (google-crc32c): it is the checksum GCS itself keeps per object, it runs in hardware
(SSE4.2 / ARMv8 CRC instructions) at several GB/s (3.3 GB/s measured here, against 1.0 for
``zlib.crc32`` and 0.4 for SHA-256; docs/benchmarks.md), and google-crc32c already comes with the
GCS client. It catches accidental damage (flipped bytes, torn or mixed-up files), not tampering:
that needs a signature, and a checkpoint directory is not an adversary.

The manifest (``elastix-manifest.json`` in the step's directory) lists every file under the step
with its size and checksum. It is written after Orbax's commit and before the trainer reports
``checkpoint_committed``. A committed step without one was written before elastix recorded
checksums (or its process died between the two): it is restored unverified, with a warning.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import google_crc32c

from elastix_trainer import storage

NAME = "elastix-manifest.json"
FORMAT = 1
CHUNK = 8 << 20
"""Bytes read at a time: large enough that the checksum, not the call overhead, dominates."""
READERS = 4
"""Files checksummed at once: the checksum releases the GIL (a C extension over a buffer), and a
GCS read is a round trip each."""


class ChecksumMismatch(Exception):
    """A file of a committed step is not what its manifest recorded."""


def _files(step_dir: str) -> dict[str, int]:
    """Relative path -> size of every file under ``step_dir`` (the manifest excepted)."""
    return {name: size for name, (size, _) in _listing(step_dir).items()}


def _listing(step_dir: str) -> dict[str, tuple[int, str | None]]:
    """Relative path -> (size, crc32c as hex where storage keeps one: GCS) of every file under
    ``step_dir``, the manifest excepted."""
    if storage.is_gcs(step_dir):
        import fsspec

        fs = fsspec.filesystem("gs")
        fs.invalidate_cache()
        base = step_dir.removeprefix("gs://").rstrip("/") + "/"
        out = {path.removeprefix(base): (int(info.get("size") or 0), _gcs_crc(info))
               for path, info in fs.find(step_dir, detail=True).items()}
    else:
        out = {}
        for root, _dirs, names in os.walk(step_dir):
            for name in names:
                full = os.path.join(root, name)
                out[os.path.relpath(full, step_dir)] = (os.path.getsize(full), None)
    out.pop(NAME, None)
    return {k: v for k, v in out.items() if not k.startswith(NAME + ".")}


def _gcs_crc(info: dict) -> str | None:
    """The crc32c GCS keeps for an object (base64 of 4 big-endian bytes), as hex."""
    import base64
    import binascii

    value = info.get("crc32c")
    try:
        return base64.b64decode(value).hex() if value else None
    except (binascii.Error, TypeError, ValueError):
        return None


def _crc(path: str) -> str:
    crc = google_crc32c.Checksum()
    if storage.is_gcs(path):
        import fsspec

        opener = fsspec.filesystem("gs").open(path, "rb", block_size=CHUNK)
    else:
        opener = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by the with below
    with opener as f:
        while chunk := f.read(CHUNK):
            crc.update(chunk)
    return crc.hexdigest().decode()


def _checksums(step_dir: str, names) -> dict[str, str]:
    names = sorted(names)
    with ThreadPoolExecutor(max_workers=max(1, min(READERS, len(names)))) as pool:
        return dict(zip(names, pool.map(lambda n: _crc(f"{step_dir}/{n}"), names), strict=True))


def write(step_dir: str, step: int) -> int:
    """Record every file of committed ``step_dir``; returns the bytes checksummed.

    Atomic: a local manifest is written beside and renamed into place; a GCS object is written
    whole or not at all.
    """
    listed = _listing(step_dir)
    sizes = {n: size for n, (size, _) in listed.items()}
    # On GCS each object's crc32c comes with the listing (GCS computed it over the bytes it
    # stores): nothing is downloaded to record it. Elsewhere the files are read.
    crcs = {n: crc for n, (_, crc) in listed.items() if crc is not None}
    crcs.update(_checksums(step_dir, [n for n in sizes if n not in crcs]))
    doc = {"format": FORMAT, "algorithm": "crc32c", "step": step,
           "files": {n: {"bytes": sizes[n], "crc32c": crcs[n]} for n in sorted(sizes)}}
    text = json.dumps(doc, indent=0, sort_keys=True)
    if storage.is_gcs(step_dir):
        storage.epath(f"{step_dir}/{NAME}").write_text(text)
    else:
        tmp = os.path.join(step_dir, f"{NAME}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(step_dir, NAME))
    return sum(sizes.values())


def read(step_dir: str) -> dict | None:
    """The manifest of ``step_dir``, or None when it has none."""
    path = storage.epath(f"{step_dir}/{NAME}")
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
        files = doc["files"]
        if doc.get("algorithm") != "crc32c" or not isinstance(files, dict):
            raise ValueError("unknown layout")
    except (ValueError, KeyError, TypeError) as e:
        raise ChecksumMismatch(f"its checksum manifest {NAME} is unreadable ({e})") from None
    return doc


def verify(step_dir: str) -> bool:
    """Check every file of ``step_dir`` against its manifest.

    Returns:
        True when verified, False when the step has no manifest (restore it unverified).

    Raises:
        ChecksumMismatch: a file is missing, of another size, or its bytes changed (the first
            such file named, with both checksums).
    """
    doc = read(step_dir)
    if doc is None:
        return False
    want = doc["files"]
    have = _listing(step_dir)
    for name in sorted(want):
        if name not in have:
            raise ChecksumMismatch(f"{name} is missing")
        if have[name][0] != want[name]["bytes"]:
            raise ChecksumMismatch(f"{name} holds {have[name][0]} bytes, {want[name]['bytes']} "
                                   f"were written")
    # GCS keeps each object's crc32c, computed over the bytes it stores: compared as listed,
    # no object is downloaded for the check (the restore downloads each once). Elsewhere the
    # files are read and checksummed.
    got = {n: have[n][1] for n in want if have[n][1] is not None}
    got.update(_checksums(step_dir, [n for n in want if n not in got]))
    for name in sorted(want):
        if got[name] != want[name]["crc32c"]:
            raise ChecksumMismatch(f"{name} fails its checksum (crc32c {got[name]}, "
                                   f"{want[name]['crc32c']} when written)")
    return True
