"""Local-or-GCS path helpers (etils.epath, the same layer Orbax uses, so both see one view)."""

from __future__ import annotations

import os

from elastix.errors import ElastixError


def is_gcs(path: str) -> bool:
    """True for ``gs://`` paths."""
    return str(path).startswith("gs://")


def epath(path: str):
    """An ``etils.epath.Path``; for gs:// this goes through gcsfs."""
    if is_gcs(path):
        # gcsfs otherwise probes for hierarchical-namespace buckets and waits ~60 s per call on
        # anything that is not the real GCS (an emulator such as fake-gcs-server).
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    from etils import epath as _epath

    return _epath.Path(path)


def upload_file_bytes(data: bytes, remote: str) -> None:
    """Write ``data`` as the whole object ``remote``."""
    epath(remote).write_bytes(data)


def tree_bytes(path) -> int:
    """Total size of the files under ``path`` (an epath.Path)."""
    if is_gcs(str(path)):
        import fsspec

        fs = fsspec.filesystem("gs")
        fs.invalidate_cache()
        return int(sum(fs.du(str(path), total=False).values()))
    total = 0
    for root, _dirs, files in os.walk(str(path)):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


class StorageDenied(ElastixError):
    """The checkpoint storage refused access (403, EACCES): no retry helps, a grant does."""


def denied(path: str, error: BaseException) -> StorageDenied | None:
    """A :class:`StorageDenied` for ``error`` when it is a refusal, else None.

    gcsfs raises a plain ``OSError("Forbidden: ...")`` for HTTP 403 (and 401 as "Unauthorized");
    a local directory raises ``PermissionError``.
    """
    text = str(error)
    if isinstance(error, PermissionError) or (
            isinstance(error, OSError) and text.startswith(("Forbidden", "Unauthorized"))):
        code = "403" if text.startswith("Forbidden") else "401" if text.startswith(
            "Unauthorized") else "EACCES"
        hint = ("grant the head pod's service account (Workload Identity) read and write on the "
                "bucket, e.g. roles/storage.objectUser, or point --checkpoint-dir elsewhere"
                if is_gcs(path) else "make the directory readable and writable by this user, "
                "or point --checkpoint-dir elsewhere")
        return StorageDenied(f"cannot read {path}: permission denied ({code})", hint=hint)
    return None
