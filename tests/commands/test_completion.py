"""Shell completion (workload names from the backend, option values from their choices) and
``elastix --version``.

Completion runs through the shell protocol of the real entry point (``_ELASTIX_COMPLETE``), as
bash and zsh call it; the name callback is also called directly to show it never raises.
"""

from __future__ import annotations

import socket

import click
import pytest
from fake_cluster import write_kubeconfig

from elastix import __version__
from elastix.commands import options
from elastix.main import command


def _local_workloads(state, *names):
    """Local workloads as submit leaves them (a plan.json); no processes."""
    from elastix.backends.local.plan import make_plan
    from elastix.backends.local.state import write_json_atomic
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    for name in names:
        spec = build_spec(None, {"name": name, "tpu_type": "v5litepod-16", "num_slices": 2,
                                 "docker_image": "img:1", "command": "true"})
        d = state / name
        d.mkdir(parents=True)
        write_json_atomic(d / "plan.json", make_plan(render(spec), d, {}, str(state)).to_json())


def _complete(cli, words: str, timeout: float = 60):
    """What bash offers for the last word of ``words`` (``elastix ...``)."""
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    return cli(env={"_ELASTIX_COMPLETE": "complete_bash", "COMP_WORDS": words,
                    "COMP_CWORD": str(cword)}, timeout=timeout)


@pytest.mark.parametrize("cmd", ["workload status", "workload delete", "logs", "chaos run",
                                 "chaos kill-worker"])
def test_workload_names_complete_from_the_local_backend(cli, tmp_path, cmd):
    _local_workloads(tmp_path / "state", "alpha", "beta", "apple")
    r = _complete(cli, f"elastix {cmd} --backend local --state-dir {tmp_path / 'state'} a")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["alpha", "apple"]


def test_an_unreachable_cluster_completes_nothing_without_hanging(cli, tmp_path):
    """A cluster that accepts the connection and never answers: no names, and no wait for the
    client's own read bound (the subprocess timeout is below it)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # connections queue up; none is ever answered
        kubeconfig = write_kubeconfig(tmp_path / "kc",
                                      f"http://127.0.0.1:{server.getsockname()[1]}")
        r = _complete(cli, f"elastix workload status --backend gke --kubeconfig {kubeconfig} ",
                      timeout=15)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


@pytest.mark.parametrize("params", [
    {"backend": "nope"},  # an unknown backend: a UsageError inside
    {"backend": "gke", "kubeconfig": "/nonexistent/kubeconfig"},
    {},  # nothing parsed yet
], ids=["unknown-backend", "missing-kubeconfig", "no-params"])
def test_the_name_callback_never_raises(params, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config: the local backend
    monkeypatch.setenv("ELASTIX_STATE_DIR", str(tmp_path / "none"))
    ctx = click.Context(command())
    ctx.params = dict(params)
    assert options.complete_workload_name(ctx, "") == []


def test_completion_can_be_shown_and_installed(cli):
    # Typer's own switch: take the shell named here, not one found among this process's
    # ancestors (a test run started outside any shell has none, and said "Shell  not supported").
    r = cli("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert r.returncode == 0, r.stderr
    assert "_ELASTIX_COMPLETE=complete_bash" in r.stdout
    assert "--install-completion" in cli("--help").stdout


def test_version_flag(cli):
    r = cli("--version")
    assert (r.returncode, r.stdout) == (0, f"elastix {__version__}\n")


def _offered(line: str) -> list[str]:
    """What click's completion machinery offers for the last word of ``elastix LINE``."""
    from click.shell_completion import ShellComplete

    words = line.split()
    args, incomplete = (words, "") if line.endswith(" ") else (words[:-1], words[-1])
    comp = ShellComplete(command(), {}, "elastix", "_ELASTIX_COMPLETE")
    return [c.value for c in comp.get_completions(args, incomplete)]


@pytest.mark.parametrize(("line", "want"), [
    ("workload list -o ", ["table", "wide", "json", "yaml", "name"]),
    ("workload list --output w", ["wide"]),
    ("workload status demo -o ", ["table", "json", "yaml"]),
    ("workload create demo -o ", ["yaml", "json"]),
    ("workload goodput demo -o ", ["table", "json"]),
    ("chaos kill-worker demo -o ", ["text", "json", "table"]),  # table: with --measure
    ("chaos run demo -o ", ["table", "json", "yaml"]),
    ("chaos run demo --mode ", ["random", "slice", "host"]),
    ("chaos run demo --mode s", ["slice"]),
    ("workload list --backend ", ["gke", "local"]),
    ("logs demo --backend l", ["local"]),
])
def test_option_values_complete_their_choices(line, want):
    assert _offered(line) == want


@pytest.mark.parametrize("cmd", ["workload create demo", "cluster create"])
def test_tpu_types_complete_from_the_catalogue(cmd):
    from elastix.workload import tpu

    got = _offered(f"{cmd} --tpu-type v5litepod-1")
    assert "v5litepod-16" in got and "v5litepod-128" in got
    assert all(n in tpu.catalogue() and n.startswith("v5litepod-1") for n in got)
    assert _offered(f"{cmd} --tpu-type v6e-") and not _offered(f"{cmd} --tpu-type zz")


def test_value_completion_through_the_shell_protocol(cli):
    """The bash protocol end to end (the real entry point, as bash calls it)."""
    r = _complete(cli, "elastix workload list -o ")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["table", "wide", "json", "yaml", "name"]
    r = _complete(cli, "elastix workload create demo --tpu-type v5litepod-6")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["v5litepod-64"]
