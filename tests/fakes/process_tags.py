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


def reap(tag: str) -> list[int]:
    """SIGKILL every process still carrying ``tag``; return their pids (empty: none was left).

    Tests assert the result is empty after killing, so one failing test cannot leak into the next.
    """
    import os
    import signal

    left = tagged_pids(tag)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


def local_env(tag: str, state_dir, tmp_path) -> dict[str, str]:
    """Variables for the CLI on the local backend in a test: tagged, state in ``state_dir``,
    no kubeconfig, fast replacement and health timeouts."""
    return {"NO_COLOR": "1", "COLUMNS": "200", TAG_ENV: tag, "ELASTIX_STATE_DIR": str(state_dir),
            "ELASTIX_BACKEND": "local", "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
            "ELASTIX_LOCAL_SCHEDULING_DELAY": "0.2", "ELASTIX_HEALTH_TIMEOUT": "1.0"}
