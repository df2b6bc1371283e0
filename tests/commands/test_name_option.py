"""xpk habits: ``--workload NAME`` (and ``--cluster NAME`` for a cluster) wherever
NAME is positional, with the same effect; both, or neither where NAME is needed, is exit 2."""

from __future__ import annotations

import json

import click
import pytest

from elastix.main import command, main

# Every command with a positional NAME, and the option that stands for it.
NAMED = {
    ("workload", "create"): "--workload", ("workload", "goodput"): "--workload",
    ("workload", "fit-check"): "--workload",
    ("workload", "advise"): "--workload", ("workload", "forecast"): "--workload",
    ("workload", "status"): "--workload", ("workload", "delete"): "--workload",
    ("workload", "wait"): "--workload", ("workload", "inspect"): "--workload",
    ("logs",): "--workload", ("chaos", "kill-worker"): "--workload",
    ("chaos", "run"): "--workload",
    ("cluster", "create"): "--cluster", ("cluster", "describe"): "--cluster",
    ("cluster", "delete"): "--cluster",
}
NEEDED = [p for p in NAMED if p not in {("workload", "create"), ("workload", "fit-check"),
                                        ("workload", "goodput"),
                                        ("workload", "advise"), ("workload", "forecast")}]
CLUSTER = ["--project", "pppppp", "--zone", "us-central1-a"]


def _walk(cmd: click.Command, path: tuple[str, ...] = ()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _walk(sub, (*path, name))


def test_every_positional_name_has_its_option():
    """A new command with a NAME must take the xpk spelling too (add it to NAMED)."""
    found = {}
    for path, cmd in _walk(command()):
        if any(isinstance(p, click.Argument) and p.name in ("name", "names")
               for p in cmd.params):
            found[path] = next((o for o in ("--workload", "--cluster")
                                for p in cmd.params if o in getattr(p, "opts", ())), None)
    assert found == NAMED


def _local_workload(state, name="alpha"):
    """A local workload as submit leaves it (a plan.json); no processes."""
    from elastix.backends.local.plan import make_plan
    from elastix.backends.local.state import write_json_atomic
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    spec = build_spec(None, {"name": name, "tpu_type": "v5litepod-16", "num_slices": 2,
                             "docker_image": "img:1", "command": "true"})
    d = state / name
    d.mkdir(parents=True)
    write_json_atomic(d / "plan.json", make_plan(render(spec), d, {}, str(state)).to_json())


def _run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("argv", [
    ["workload", "status", "-o", "json"],
    ["workload", "delete"],
    ["workload", "goodput"],
    ["chaos", "kill-worker", "--dry-run"],
    ["logs"],
], ids=lambda a: " ".join(a[:2]))
def test_workload_option_does_what_the_positional_does(argv, tmp_path, capsys):
    results = []
    for i, name_args in enumerate((["alpha"], ["--workload", "alpha"])):
        state = tmp_path / str(i)  # each run its own state: delete removes the workload
        _local_workload(state)
        rc, out, err = _run([*argv, *name_args, "--backend", "local", "--state-dir",
                             str(state)], capsys)
        if argv[-1] == "json":  # the clock moves between the two runs
            out = {k: v for k, v in json.loads(out).items() if k not in ("created", "age_seconds")}
        else:
            out = out.replace(str(state), "STATE")
        results.append((rc, out, err.replace(str(state), "STATE")))
    assert results[0] == results[1]
    assert "missing workload NAME" not in results[0][2]


@pytest.mark.parametrize("argv", [
    ["workload", "create", "--tpu-type", "v5litepod-16", "--docker-image", "i", "--command",
     "true", "--dry-run"],
    ["cluster", "create", *CLUSTER, "--tpu-type", "v5litepod-16", "--dry-run"],
    ["cluster", "delete", *CLUSTER, "--dry-run"],
], ids=lambda a: " ".join(a[:2]))
def test_dry_runs_take_either_spelling(argv, capsys):
    flag = NAMED[tuple(argv[:2])]
    positional = _run([*argv[:2], "demo", *argv[2:]], capsys)
    option = _run([*argv, flag, "demo"], capsys)
    assert positional == option
    assert positional[0] == 0 and "demo" in positional[1]


@pytest.mark.parametrize("path", list(NAMED), ids=" ".join)
def test_both_spellings_at_once_is_bad_input(path, capsys):
    flag = NAMED[path]
    extra = ["--tpu-type", "v5litepod-16"] if path == ("cluster", "create") else []
    rc, out, err = _run([*path, "a", flag, "b", *extra], capsys)
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert lines[0] == f"error: NAME 'a' and {flag} 'b' both given"
    assert lines[1].startswith("hint: give the name once: ")


@pytest.mark.parametrize("path", NEEDED, ids=" ".join)
def test_no_name_at_all_is_bad_input(path, capsys):
    flag = NAMED[path]
    extra = CLUSTER + (["--tpu-type", "v5litepod-16"] if path == ("cluster", "create") else [])
    rc, out, err = _run([*path, *(extra if path[0] == "cluster" else [])], capsys)
    assert (rc, out) == (2, "")
    what = flag.lstrip("-")
    assert err.strip().splitlines() == [
        f"error: missing {what} NAME",
        f"hint: elastix {' '.join(path)} NAME, or elastix {' '.join(path)} {flag} NAME"]
