"""Find the processes a test started, by a tag in their environment (inherited by children).

Tests that start real process trees (the local backend's supervisor, slice hosts, trainer) tag
them and assert that none is left afterwards.
"""

from __future__ import annotations

TAG_ENV = "ELASTIX_TEST_TAG"


def tagged_pids(tag: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries this test's tag."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(TAG_ENV) == tag:
                out.append(p.info["pid"])
        except psutil.Error:
            continue
    return out
