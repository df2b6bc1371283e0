"""WorkloadSpec validation: every error at once, each with its field, message and fix."""

import pytest

from elastix.errors import SpecError, UsageError
from elastix.workload.resolve import load_env_file, load_spec_file, parse_kv
from elastix.workload.spec import build_spec

BASE = {"name": "demo", "tpu_type": "v5litepod-16", "docker_image": "img:1",
        "command": "python3 train.py"}


def problems(**flags):
    with pytest.raises(SpecError) as e:
        build_spec(None, {**BASE, **flags})
    return e.value.problems


def test_valid_spec_defaults():
    s = build_spec(None, BASE)
    assert (s.num_slices, s.elastic_slices, s.slice_restarts, s.max_restarts) == (1, 0, 0, 0)
    assert s.argv == ["bash", "-c", "python3 train.py"]
    s = build_spec(None, {**BASE, "num_slices": 3, "elastic_slices": 2})
    assert s.slice_restarts == 10  # elastic default


@pytest.mark.parametrize(("flags", "field", "message", "hint"), [
    ({"name": "Demo_1"}, "name", "'Demo_1' is not a DNS label", "try 'demo-1'"),
    ({"name": "1abc"}, "name", "is not a DNS label", None),
    ({"name": ""}, "name", "a workload name is required", "pass NAME"),
    ({"tpu_type": "v5lite-16"}, "tpu_type", "unknown TPU type 'v5lite-16'", "v5litepod-16"),
    ({"num_slices": 0}, "num_slices", "must be at least 1, got 0", "--num-slices"),
    ({"num_slices": 2, "elastic_slices": 3}, "elastic_slices",
     "must be between 0 and --num-slices (2), got 3", "--elastic-slices 2"),
    ({"elastic_slices": -1}, "elastic_slices", "must be between 0 and --num-slices", None),
    ({"elastic_slices": 1, "max_slice_restarts": -2}, "max_slice_restarts",
     "must be 0 or more, got -2", None),
    ({"env": {"ENABLE_PATHWAYS_PERSISTENCE": "true"}}, "env",
     "ENABLE_PATHWAYS_PERSISTENCE='true': pathwaysutils accepts only 1, 0 or unset",
     "--pathways-persistence"),
    ({"max_restarts": -1}, "max_restarts", "must be 0 or more, got -1", None),
    ({"env": {"1BAD": "x"}}, "env", "'1BAD' is not a valid environment variable name", None),
    ({"env": {"A-B": "x"}}, "env", "not a valid environment variable name", None),
    ({"command": None}, "command", "a command is required (or --headless)", "elastix-train"),
    ({"docker_image": None}, "docker_image", "a docker image is required", None),
    ({"headless": True}, "command", "--headless runs no main container", "drop --command"),
    ({"head_memory": "lots"}, "head_memory", "'lots' is not a resource quantity", "32G"),
    ({"gcs_scratch": "/tmp/x"}, "gcs_scratch", "is not a gs:// location", None),
    ({"labels": {"bad key!": "x"}}, "labels", "is not a valid label key", None),
    ({"labels": {"team": "-x-"}}, "labels", "value must be 63 characters", None),
    ({"labels": {"elastix.dev/workload": "other"}}, "labels",
     "'elastix.dev/workload' is set by elastix or JobSet, not by --label", "a key of your own"),
    ({"labels": {"jobset.sigs.k8s.io/jobset-name": "x"}}, "labels", "set by elastix or JobSet",
     None),
    ({"labels": {"batch.kubernetes.io/job-completion-index": "0"}}, "labels",
     "set by elastix or JobSet", None),
    ({"labels": {"app.kubernetes.io/managed-by": "me"}}, "labels", "set by elastix or JobSet",
     None),
    ({"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "labels", "set by elastix or JobSet",
     "--queue sets the Kueue queue"),
    ({"priority": "Very High"}, "priority", "is not a valid Kubernetes name", None),
    ({"num_slices": "3"}, "num_slices", "must be a whole number, got '3'", None),
    ({"events_path": "gs://bucket/"}, "events_path", "is not a gs:// object URI", None),
    ({"termination_grace_period": -5}, "termination_grace_period", "must be 0 or more", None),
])
def test_validation_table(flags, field, message, hint):
    found = [p for p in problems(**flags) if p[0] == field]
    assert found, problems(**flags)
    f, msg, h = found[0]
    assert message in msg
    if hint:
        assert hint in (h or "")


@pytest.mark.parametrize("value", ["1", "0"])
def test_pathways_persistence_takes_what_pathwaysutils_takes(value):
    # pathwaysutils 0.1.13 _initialize.py L57-66: "1" on, "0" (or unset) off.
    spec = build_spec(None, {**BASE, "env": {"ENABLE_PATHWAYS_PERSISTENCE": value}})
    assert spec.env["ENABLE_PATHWAYS_PERSISTENCE"] == value


def test_slice_restarts_without_elastic_slices_is_a_note_not_a_refusal():
    # xpk and gcluster accept --max-slice-restarts on a non-elastic workload and ignore it.
    from elastix.workload.validate import notes

    spec = build_spec(None, {**BASE, "max_slice_restarts": 3})
    assert spec.slice_restarts == 0
    (field, msg, hint), = notes(spec)
    assert field == "max_slice_restarts" and "no effect without --elastic-slices" in msg
    assert notes(build_spec(None, {**BASE, "num_slices": 2, "elastic_slices": 1,
                                   "max_slice_restarts": 3})) == []


def test_all_errors_reported_at_once():
    with pytest.raises(SpecError) as e:
        build_spec(None, {"name": "Bad Name", "tpu_type": "v9-1", "num_slices": 0,
                          "elastic_slices": 2, "max_restarts": -1})
    fields = [p[0] for p in e.value.problems]
    for f in ("name", "tpu_type", "num_slices", "elastic_slices", "max_restarts", "command",
              "docker_image"):
        assert f in fields
    assert e.value.message == f"{len(fields)} problems in the workload spec"
    assert all(":" in line for line in e.value.lines())


def test_headless_needs_no_command_or_image():
    s = build_spec(None, {"name": "h", "tpu_type": "v6e-8", "headless": True})
    assert s.argv == [] and s.docker_image is None


def test_spec_file_and_flags_merge(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("name: from-file\ntpu-type: v5litepod-16\nnum_slices: 2\ndocker_image: img:1\n"
                 "command: [python3, train.py]\nenv: {A: '1', B: 2}\nlabels: {team: ml}\n")
    s = build_spec(load_spec_file(f), {"num_slices": 4, "env": {"B": "flag"}})
    assert (s.name, s.tpu.name, s.num_slices) == ("from-file", "v5litepod-16", 4)
    assert s.env == {"A": "1", "B": "flag"}  # flags merge over the file key by key
    assert s.argv == ["python3", "train.py"]


def test_unknown_spec_file_key_suggests(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("name: x\nnum_slice: 2\n")
    with pytest.raises(SpecError) as e:
        build_spec(load_spec_file(f), {})
    assert ("num_slice", "unknown field in the spec file", "did you mean num_slices?") in \
        e.value.problems


@pytest.mark.parametrize(("text", "message"), [
    ("name: [unclosed\n", "is not valid YAML at line"),
    ("- a\n- b\n", "must be a mapping of fields"),
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ("env: " + "{a: " * 5000 + "1" + "}" * 5000, "nested too deeply"),
])
def test_bad_spec_files(tmp_path, text, message):
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    with pytest.raises(UsageError) as e:
        load_spec_file(f)
    assert message in e.value.message


@pytest.mark.parametrize("loader", [load_spec_file, load_env_file])
def test_spec_and_env_files_not_utf8(tmp_path, loader):
    f = tmp_path / "file"
    f.write_bytes(b"\xff\xfename: x\n")
    with pytest.raises(UsageError) as e:
        loader(f)
    assert "is not UTF-8 text" in e.value.message


@pytest.mark.parametrize("value", [[1], {"x": 1}])
def test_env_and_label_values_must_be_scalars(value):
    # a nested value used to become its Python repr ("[1]", "{'x': 1}") in the manifest
    for field in ("env", "labels"):
        found = [p for p in problems(**{field: {"A": value}}) if p[0] == field]
        assert found and "'A'" in found[0][1] and "must be a string" in found[0][1]


@pytest.mark.parametrize("name", ["1abc", "9-Demo", "-x_y", "A" * 41, "9" + "a" * 45])
def test_suggested_name_is_valid(name):
    hint = [p for p in problems(name=name) if p[0] == "name"][0][2]
    suggested = hint.split("'")[1] if hint else None
    assert suggested, hint
    build_spec(None, {**BASE, "name": suggested})  # raises SpecError if the suggestion is invalid


def test_missing_spec_file(tmp_path):
    with pytest.raises(UsageError) as e:
        load_spec_file(tmp_path / "nope.yaml")
    assert "cannot read spec file" in e.value.message


def test_env_file_and_flags(tmp_path):
    f = tmp_path / ".env"
    f.write_text("# comment\nexport A=1\nB='two words'\nC=x=y\n\n")
    assert load_env_file(f) == {"A": "1", "B": "two words", "C": "x=y"}
    assert parse_kv(["X=1=2", "EMPTY="], "--env") == {"X": "1=2", "EMPTY": ""}
    with pytest.raises(UsageError):
        parse_kv(["NOEQUALS"], "--env")
    f.write_text("garbage line\n")
    with pytest.raises(UsageError) as e:
        load_env_file(f)
    assert ":1: expected KEY=VALUE" in e.value.message


def test_head_pod_sizes_are_the_platform_catalogues_each_with_its_own_help():
    from elastix.workload import platform
    from elastix.workload.spec import FIELDS, WorkloadSpec

    spec, helps = WorkloadSpec(), set()
    for prefix, key in (("head", "main"), ("proxy", "proxy"), ("rm", "rm")):
        for resource, default in zip(("cpu", "memory"), platform.HEAD_SIZES[key], strict=True):
            field = f"{prefix}_{resource}"
            meta = FIELDS[field].metadata
            assert getattr(spec, field) == default
            assert meta["flags"] == (f"--{prefix}-{resource}",) and meta["quantity"]
            assert meta["help"].startswith("CPU" if resource == "cpu" else "Memory")
            assert meta["help"].endswith(f"[{default}].")
            helps.add(meta["help"])
    assert len(helps) == 6
