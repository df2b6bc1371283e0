"""The cluster CA handed to the ``kubernetes`` client: one private file per certificate, reused,
so a command (even one SIGKILLed) leaves no file of its own behind."""

from __future__ import annotations

import base64
import os
import stat

from elastix.clients.gke import _ca_file

PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def test_the_ca_is_one_private_file_per_certificate_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = _ca_file(base64.b64encode(PEM).decode())
    d = tmp_path / "cache" / "elastix" / "ca"
    assert os.path.dirname(first) == str(d)
    assert open(first, "rb").read() == PEM
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(first).st_mode) & 0o077 == 0
    assert _ca_file(base64.b64encode(PEM).decode()) == first
    other = b"-----BEGIN CERTIFICATE-----\nMIIBother\n-----END CERTIFICATE-----\n"
    second = _ca_file(base64.b64encode(other).decode())
    assert second != first and open(second, "rb").read() == other
    assert sorted(os.listdir(d)) == sorted([os.path.basename(first), os.path.basename(second)])


def test_a_changed_file_is_written_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = _ca_file(base64.b64encode(PEM).decode())
    with open(path, "wb") as f:
        f.write(b"not the certificate")
    assert _ca_file(base64.b64encode(PEM).decode()) == path
    assert open(path, "rb").read() == PEM
    assert len(os.listdir(os.path.dirname(path))) == 1  # no temporary file left


def test_a_cache_open_to_others_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = tmp_path / "cache" / "elastix" / "ca"
    d.mkdir(parents=True)
    d.chmod(0o755)
    path = _ca_file(base64.b64encode(PEM).decode())
    assert os.path.dirname(path) != str(d) and not os.listdir(d)
    assert open(path, "rb").read() == PEM
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    os.remove(path)


def test_no_ca_no_file():
    assert _ca_file("") is None
