"""The Kubernetes adapter: kubeconfig files read as input, and every request bounded in time.

A real fake API server (``fake_k8s``) behind the fault proxy, read through the official client.
"""

from __future__ import annotations

import pytest
from fake_cluster import start_fake, stop, write_kubeconfig
from fault_proxy import Rule, fault_proxy

from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import ApiTimeout, api_client_from_kubeconfig
from elastix.errors import UsageError


@pytest.fixture
def fake(tmp_path):
    fake = start_fake(tmp_path)
    yield fake
    stop(fake)


def test_a_silent_server_is_one_bounded_wait_named_in_the_error(tmp_path, fake, monkeypatch):
    """urllib3 retried a timed-out GET three times: minutes of silence, then "timed out"."""
    from elastix.backends.gke import backend as gke

    monkeypatch.setattr(gke, "TIMEOUT", (5.0, 0.5))  # the read bound, small for the test
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule("GET", "/jobsets", "stall", seconds=3.0, count=10))
        api, where = api_client_from_kubeconfig(str(write_kubeconfig(tmp_path / "kc", url)), None)
        with api:
            with pytest.raises(ApiTimeout) as err:
                GKEBackend(api, "default", where).list()
    assert err.value.message == (f"timed out listing workloads: the Kubernetes API server did "
                                 f"not answer in 0.5 s (context fake ({url}))")
    assert len(proxy.matching("GET", "/jobsets")) == 1  # asked once, not four times
    assert err.value.exit_code == 1  # a runtime failure, not bad input


@pytest.mark.parametrize(("content", "message"), [
    (b"a: [b\n::: {\n", "is not valid YAML at line 2: expected ',' or ']', but got ':'"),
    (b"- a\n- b\n", "is not a kubeconfig: a list, not a mapping"),
    (b"just words\n", "is not a kubeconfig: a str, not a mapping"),
    (b"\xff\xfe: x\n", "is not UTF-8 text (byte 0)"),
    (b"clusters: 5\n", "is not a kubeconfig: 'clusters' must be a list of mappings"),
    (b"contexts: [1]\n", "is not a kubeconfig: 'contexts' must be a list of mappings"),
    (b"users: [{name: u, user: [1]}]\n", "is not a kubeconfig: 'users' must be a list of mappings"),
    (b"[" * 5000 + b"]" * 5000, "is nested too deeply"),
])
def test_a_broken_kubeconfig_is_bad_input(tmp_path, content, message):
    kc = tmp_path / "kc"
    kc.write_bytes(content)
    with pytest.raises(UsageError) as err:
        api_client_from_kubeconfig(str(kc), None)
    assert err.value.message.startswith(f"kubeconfig {str(kc)!r} {message}")
    assert "--kubeconfig" in err.value.hint


def test_a_directory_as_kubeconfig_is_bad_input(tmp_path):
    with pytest.raises(UsageError) as err:
        api_client_from_kubeconfig(str(tmp_path), None)
    assert err.value.message == f"cannot read kubeconfig {str(tmp_path)!r}: Is a directory"
