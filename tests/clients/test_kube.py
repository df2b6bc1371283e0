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
    from elastix.backends.gke import api as gke  # where the request bound lives

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


@pytest.fixture
def silent_tls(tmp_path):
    """A local HTTPS endpoint that accepts connections and never answers: ``(url, ca, mode)``
    with ``mode["tls"]`` False (no TLS handshake ever) or True (a handshake, then silence)."""
    import socket
    import ssl
    import threading

    from fake_cluster import self_signed

    self_signed(tmp_path / "tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem")
    srv = socket.create_server(("127.0.0.1", 0))
    mode, held, stop = {"tls": False}, [], threading.Event()

    def serve():
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            if mode["tls"]:
                try:
                    conn = ctx.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError):
                    pass
            held.append(conn)  # kept open, never read from, never written to

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield f"https://127.0.0.1:{srv.getsockname()[1]}", str(tmp_path / "tls" / "cert.pem"), mode
    stop.set()
    t.join(5)
    for c in held:
        c.close()
    srv.close()


@pytest.mark.parametrize(("tls", "says"), [
    (False, "did not complete the TLS handshake in 0.5 s"),
    (True, "did not answer in 1.5 s"),
])
def test_a_silent_tls_server_is_said_to_have_run_out_the_bound_that_ran_out(
        tmp_path, monkeypatch, silent_tls, tls, says):
    """A handshake that never completes runs out the *connect* timeout (urllib3 calls it a read
    timeout): the error used to name the read timeout, after the connect timeout had passed."""
    from elastix.backends.gke import api as gke  # where the request bound lives

    url, ca, mode = silent_tls
    mode["tls"] = tls
    monkeypatch.setattr(gke, "TIMEOUT", (0.5, 1.5))  # small bounds for the test
    api, where = api_client_from_kubeconfig(str(write_kubeconfig(tmp_path / "kc", url, ca)),
                                            None)
    with api:
        with pytest.raises(ApiTimeout) as err:
            GKEBackend(api, "default", where).list()
    assert err.value.message == (f"timed out listing workloads: the Kubernetes API server {says}"
                                 f" (context fake ({url}))")


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
