"""Backend-owned policy in `workload create` and `workload list`: defaults and where."""

from __future__ import annotations

from elastix.backends.local.backend import LocalBackend


def test_list_says_where_the_local_backend_looked(cli, tmp_path):
    r = cli("workload", "list", "--backend", "local", "--state-dir", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"no local workloads in {tmp_path / 's'}"


def test_local_defaults_fill_only_what_is_missing():
    d = LocalBackend.defaults()
    assert set(d) == {"docker_image", "command"}
    assert d["command"].startswith("elastix-train --preset tiny")


def test_a_headless_spec_file_gets_no_local_defaults(cli, tmp_path):
    """The spec file's ``headless: true`` counts like --headless (before, only the flag did,
    and the injected image and command were then blamed on the user)."""
    f = tmp_path / "spec.yaml"
    f.write_text("name: hl\ntpu_type: v5litepod-4\nheadless: true\n")
    r = cli("workload", "create", "--spec", str(f), "--backend", "local", "--state-dir",
            str(tmp_path / "s"), "--dry-run=server")
    assert "runs no main container" not in r.stderr, r.stderr
