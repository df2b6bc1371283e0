"""Fixtures for the GKE tests (helpers live in fake_cluster)."""

from __future__ import annotations

import pytest
from fake_cluster import start_fake, stop


@pytest.fixture
def fake_cluster(tmp_path):
    """A fresh fake cluster with the JobSet CRD installed (fast timings)."""
    fake = start_fake(tmp_path, {"log_interval": 0.1, "terminate_delay": 0.2})
    yield fake
    stop(fake)
