"""Which source gives each field of a workload spec, called directly (no command line).

Flags > env file (env only) > spec file > backend defaults > the spec's own defaults.
"""

from __future__ import annotations

import json

import pytest

from elastix.errors import ExitCode, SpecError, UsageError
from elastix.workload.resolve import resolve_spec

DEFAULTS = {"docker_image": "backend:img", "command": "backend-job"}
BASE = {"name": "demo", "tpu_type": "v5litepod-16"}


def spec_file(tmp_path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_flags_beat_the_spec_file_which_beats_backend_defaults(tmp_path):
    f = spec_file(tmp_path, "name: from-file\ntpu_type: v6e-8\nnum_slices: 2\n"
                            "max_restarts: 3\ndocker_image: file:img\n")
    s = resolve_spec({"num_slices": 4, "max_restarts": None}, spec_file=f,
                     backend_defaults=DEFAULTS)
    assert s.num_slices == 4  # flag over file
    assert s.max_restarts == 3  # a flag left out (None) leaves the file's value
    assert s.docker_image == "file:img"  # file over backend default
    assert s.command == "backend-job"  # backend default where nothing else gives it
    assert (s.name, s.tpu.name) == ("from-file", "v6e-8")
    assert s.termination_grace_period == 30  # the spec's own default, last


def test_a_flag_beats_a_backend_default(tmp_path):
    s = resolve_spec({**BASE, "command": "mine"}, backend_defaults=DEFAULTS)
    assert (s.command, s.docker_image) == ("mine", "backend:img")


def test_spec_file_keys_spelled_with_hyphens_beat_backend_defaults(tmp_path):
    """A spec file may write docker-image: the backend's default must not replace it."""
    f = spec_file(tmp_path, "name: d\ntpu-type: v5litepod-16\ndocker-image: file:img\n"
                            "command: [python3, train.py]\n")
    s = resolve_spec({}, spec_file=f, backend_defaults=DEFAULTS)
    assert s.docker_image == "file:img"
    assert s.argv == ["python3", "train.py"]


def test_env_merges_key_by_key_flag_then_env_file_then_spec_file(tmp_path):
    f = spec_file(tmp_path, "env: {A: file, B: file, C: file}\n")
    env_file = tmp_path / ".env"
    env_file.write_text("B=env-file\nC=env-file\n", encoding="utf-8")
    s = resolve_spec({**BASE, "env": ["C=flag"]}, spec_file=f, env_file=env_file,
                     backend_defaults=DEFAULTS)
    assert s.env == {"A": "file", "B": "env-file", "C": "flag"}


def test_an_empty_env_file_or_repeatable_flag_leaves_the_spec_files_values(tmp_path):
    f = spec_file(tmp_path, "env: {A: file}\nlabels: {team: ml}\n"
                            "proxy_args: ['--x=1']\n")
    empty = tmp_path / ".env"
    empty.write_text("# nothing here\n", encoding="utf-8")
    s = resolve_spec({**BASE, "env": [], "labels": [], "proxy_args": []}, spec_file=f,
                     env_file=empty, backend_defaults=DEFAULTS)
    assert (s.env, s.labels, s.proxy_args) == ({"A": "file"}, {"team": "ml"}, ["--x=1"])


def test_labels_merge_over_the_spec_files(tmp_path):
    f = spec_file(tmp_path, "labels: {team: ml, tier: gold}\n")
    s = resolve_spec({**BASE, "labels": ["tier=silver", "x=y"]}, spec_file=f,
                     backend_defaults=DEFAULTS)
    assert s.labels == {"team": "ml", "tier": "silver", "x": "y"}


@pytest.mark.parametrize(("flags", "text"), [
    ({"headless": True}, ""),
    ({}, "headless: true\n"),
])
def test_a_headless_workload_takes_no_backend_defaults(tmp_path, flags, text):
    f = spec_file(tmp_path, text)
    s = resolve_spec({**BASE, **flags}, spec_file=f, backend_defaults=DEFAULTS)
    assert s.headless and (s.command, s.docker_image) == (None, None)


def test_the_namespace_flag_beats_the_spec_files_and_none_leaves_it(tmp_path):
    f = spec_file(tmp_path, "namespace: team-a\n")
    left = resolve_spec({**BASE, "namespace": None}, spec_file=f, backend_defaults=DEFAULTS)
    given = resolve_spec({**BASE, "namespace": "team-b"}, spec_file=f, backend_defaults=DEFAULTS)
    assert (left.namespace, given.namespace) == ("team-a", "team-b")


@pytest.mark.parametrize(("flags", "message", "hint"), [
    ({"env": ["NOEQ"]}, "--env 'NOEQ' is not KEY=VALUE", "write --env NAME=value"),
    ({"labels": ["team"]}, "--label 'team' is not KEY=VALUE", "write --label key=value"),
])
def test_a_key_value_flag_without_equals_is_a_usage_error(flags, message, hint):
    with pytest.raises(UsageError) as e:
        resolve_spec({**BASE, **flags}, backend_defaults=DEFAULTS)
    assert (e.value.message, e.value.exit_code) == (message, ExitCode.USAGE)
    assert hint in e.value.hint


def test_files_that_cannot_be_read_are_usage_errors(tmp_path):
    with pytest.raises(UsageError) as e:
        resolve_spec(BASE, spec_file=tmp_path / "nope.yaml")
    assert "cannot read spec file" in e.value.message and "--spec" in e.value.hint
    assert e.value.exit_code == 2
    with pytest.raises(UsageError) as e:
        resolve_spec(BASE, env_file=tmp_path / "nope.env")
    assert "cannot read env file" in e.value.message and "--env-file" in e.value.hint
    bad = tmp_path / "bad.env"
    bad.write_text("A=1\njust words\n", encoding="utf-8")
    with pytest.raises(UsageError) as e:
        resolve_spec(BASE, env_file=bad)
    # The line is named, never quoted: an env file may be a file of secrets (issue 34).
    assert e.value.message.endswith(":2: expected KEY=VALUE (the line has no '=')")
    assert "just words" not in e.value.message


def test_every_problem_of_the_merged_spec_at_once(tmp_path):
    f = spec_file(tmp_path, "num_slice: 2\nnum_slices: '3'\n")
    with pytest.raises(SpecError) as e:
        resolve_spec({"name": "Bad_Name", "tpu_type": "v9"}, spec_file=f,
                     backend_defaults=DEFAULTS)
    fields = {p[0]: p for p in e.value.problems}
    assert set(fields) >= {"num_slice", "num_slices", "name", "tpu_type"}
    assert fields["num_slice"][2] == "did you mean num_slices?"
    assert e.value.exit_code == ExitCode.USAGE == 2


def test_create_resolves_a_hyphenated_spec_file_over_the_local_default(tmp_path, monkeypatch,
                                                                         capsys):
    """The command end to end: the local backend's default image yields to the spec file's."""
    from elastix.main import main

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config: the local backend
    f = spec_file(tmp_path, "name: d\ntpu-type: v5litepod-8\ndocker-image: mine:1\n")
    assert main(["workload", "create", "--spec", str(f), "--dry-run", "-o", "json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    head = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [c["image"] for c in head["containers"]] == ["mine:1"]
