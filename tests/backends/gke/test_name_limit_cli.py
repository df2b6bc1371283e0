"""The real CLI against the fake API server: a name past the limit elastix states is exit 2 with
one line saying the limit and why, before any request; a name at the limit runs."""

from __future__ import annotations

import pytest
from fake_cluster import CREATE, elastix, start_fake, stop, wait_for

NAME_LIMIT = 22  # what elastix states for its template (tests/workload/test_names.py checks it)
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


@pytest.fixture
def fresh(tmp_path):
    f = start_fake(tmp_path)
    yield f
    stop(f)


@pytest.mark.parametrize("length", [NAME_LIMIT + 1, 40, 64])
def test_cli_refuses_a_long_name_before_sending_anything(fresh, length):
    """The real CLI: exit 2, one error line saying the limit and why, and the fake API server
    received no request at all."""
    name = "n" * length
    out = elastix(fresh, "workload", "create", name, *CREATE[3:], check=False)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: name: '{name}' is {length} characters: ") and (
        f"use at most {NAME_LIMIT} characters" in lines[0]), out.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: "), out.stderr
    assert fresh.get("/_fake/requests") == []


def test_cli_creates_a_workload_at_the_limit(fresh):
    name = "n" * NAME_LIMIT
    elastix(fresh, "workload", "create", name, *CREATE[3:])
    jobset = fresh.get(f"{JOBSETS}/{name}")
    assert jobset["metadata"]["name"] == name
    coordinator = f"{name}-pathways-head-0-0.{name}"
    wait_for(lambda: any(p["metadata"]["labels"].get("jobset.sigs.k8s.io/coordinator")
                         == coordinator for p in fresh.pods()), what="pods")
    assert len(coordinator) == 63
