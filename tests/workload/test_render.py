"""Rendering: golden manifests, CRD validation, value round-trips and user templates."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from bad_templates import template_error

from elastix.workload import crd, render
from elastix.workload.spec import build_spec

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("ELASTIX_REGEN_GOLDEN") == "1"

PRESETS = ["v5litepod-16", "v5p-16", "v6e-8", "v4-32"]
MODES = {
    "single": {"num_slices": 1},
    "multi": {"num_slices": 3},
    "elastic": {"num_slices": 3, "elastic_slices": 3, "max_slice_restarts": 10,
                "max_restarts": 2},
    "headless": {"num_slices": 2, "headless": True, "command": None, "docker_image": None},
}


def make_spec(tpu_type="v5litepod-16", **kw):
    base = {"name": "demo", "tpu_type": tpu_type, "docker_image": "us-docker.pkg.dev/p/r/t:1",
            "command": "python3 train.py", "project": "p", "cluster": "c",
            "location": "us-central1"}
    base.update(kw)
    return build_spec(None, {k: v for k, v in base.items() if v is not None})


def workers(m):
    return next(j for j in m["spec"]["replicatedJobs"] if j["name"] == "worker")


def head(m):
    return next(j for j in m["spec"]["replicatedJobs"] if j["name"] == "pathways-head")


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("preset", PRESETS)
def test_golden(preset, mode):
    manifest = render.render(make_spec(preset, **MODES[mode]))
    text = render.dump(manifest)
    path = GOLDEN / f"{preset}-{mode}.yaml"
    if REGEN or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"regenerate with ELASTIX_REGEN_GOLDEN=1 ({path.name})"
    assert crd.problems(yaml.safe_load(path.read_text())) == []


def test_golden_files_all_used():
    expected = {f"{p}-{m}.yaml" for p in PRESETS for m in MODES}
    assert {p.name for p in GOLDEN.glob("*.yaml")} == expected


def test_elastic_settings():
    m = render.render(make_spec("v5litepod-16", **MODES["elastic"]))
    w = workers(m)
    assert w["replicas"] == 3
    assert w["template"]["spec"]["backoffLimit"] == 10 * 4
    assert w["template"]["spec"]["completions"] == w["template"]["spec"]["parallelism"] == 4
    assert m["spec"]["failurePolicy"]["maxRestarts"] == 2  # xpk drops this
    proxy = head(m)["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert "--num_elastic_slices=3" in proxy["args"]
    rm = head(m)["template"]["spec"]["template"]["spec"]["initContainers"][1]
    assert "--instance_type=tpuv5e:4x4" in rm["args"] and "--instance_count=3" in rm["args"]
    pod = w["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4"


def _main_env(m) -> dict:
    pod = head(m)["template"]["spec"]["template"]["spec"]
    return {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}


def test_the_trainer_gets_the_workloads_slice_loss_budget():
    """Issue 34: the trainer allowed 10 losses in all, the JobSet 10 restarts per slice, so the
    trainer gave up at kill 11 of 20. The head's budget is the JobSet's: restarts x slices."""
    m = render.render(make_spec("v5litepod-16", **MODES["elastic"]))
    assert _main_env(m)["ELASTIX_MAX_SLICE_LOSSES"] == str(10 * 3)
    m = render.render(make_spec("v5litepod-16", num_slices=2, elastic_slices=2,
                                max_slice_restarts=4))
    assert _main_env(m)["ELASTIX_MAX_SLICE_LOSSES"] == "8"
    assert "ELASTIX_MAX_SLICE_LOSSES" not in _main_env(
        render.render(make_spec("v5litepod-16", num_slices=2)))


def test_not_elastic_has_no_slice_restarts():
    m = render.render(make_spec("v5litepod-16", num_slices=2))
    # pathways-job's and xpk's 4 x hosts, so a suspend-resume or one pod loss does not fail
    # the JobSet (it was 0).
    assert workers(m)["template"]["spec"]["backoffLimit"] == 4 * 4
    proxy = head(m)["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert not any(a.startswith("--num_elastic_slices") for a in proxy["args"])


@pytest.mark.parametrize(("tpu_type", "kw", "limit"), [
    ("v5litepod-16", {"elastic_slices": 2, "num_slices": 2, "max_slice_restarts": 0}, 4 * 4),
    ("v5litepod-16", {"elastic_slices": 2, "num_slices": 2, "max_slice_restarts": 3}, 3 * 4),
    ("v5litepod-16", {"elastic_slices": 2, "num_slices": 2}, 10 * 4),
    ("v4-8", {}, 4 * 1),
    ("v6e-8", {"max_slice_restarts": 0}, 4 * 2),
])
def test_worker_backoff_follows_pathways_job(tpu_type, kw, limit):
    # pathwaysjob_controller.go L692, L712-715: restarts x hosts only when elastic slices > 0 and
    # max slice restarts > 0; otherwise 4 x hosts.
    m = render.render(make_spec(tpu_type, **kw))
    assert workers(m)["template"]["spec"]["backoffLimit"] == limit


@pytest.mark.parametrize("mode", list(MODES))
def test_only_the_head_pod_mounts_a_service_account_token(mode):
    """Workers never call the Kubernetes API: a token mounted in them is one more credential to
    steal from a TPU host (issue 34). The head keeps the token its pod watch needs (it names
    its own account, ``rbac.service_account``); headless, it names none and keeps the default."""
    m = render.render(make_spec("v5litepod-16", **MODES[mode]))
    worker_pod = workers(m)["template"]["spec"]["template"]["spec"]
    assert worker_pod["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in worker_pod
    head_pod = head(m)["template"]["spec"]["template"]["spec"]
    assert "automountServiceAccountToken" not in head_pod
    assert crd.problems(m) == []


def test_headless_has_no_restart_policy_on_regular_containers():
    m = render.render(make_spec("v6e-8", **MODES["headless"]))
    pod = head(m)["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["pathways-proxy", "pathways-rm"]
    assert all("restartPolicy" not in c for c in pod["containers"])
    assert "initContainers" not in pod


def test_optional_features():
    m = render.render(make_spec(priority="high", queue="multislice-queue", pathways_persistence=True,
                                colocated_python_image="img/colo:1", labels={"team": "ml"},
                                worker_args=["--x=1"], proxy_args=["--y=2"],
                                events_path="gs://b/run/events.jsonl"))
    assert m["metadata"]["annotations"]["elastix.dev/events-path"] == "gs://b/run/events.jsonl"
    assert m["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "multislice-queue"
    assert m["metadata"]["labels"]["team"] == "ml"
    pod = workers(m)["template"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "high"
    assert pod["initContainers"][0]["name"] == "colocated-python-sidecar"
    assert pod["initContainers"][0]["restartPolicy"] == "Always"
    assert pod["containers"][0]["args"][-1] == "--x=1"
    main = head(m)["template"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "ENABLE_PATHWAYS_PERSISTENCE", "value": "1"} in main["env"]
    assert {"name": "ELASTIX_EVENTS_FILE", "value": "gs://b/run/events.jsonl"} in main["env"]
    proxy = head(m)["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert proxy["args"][-1] == "--y=2"


NASTY = [
    'say "hi"; echo \'quoted\' && exit 0',
    "line one\nline two\n  indented: yes\n- not a list",
    "key: value # not a comment",
    "{{ spec.name }} {% if true %}x{% endif %} ${HOME} $(PATHWAYS_HEAD)",
    "unicode: héllo wörld 日本語 🚀 \u2028 sep \u2029 nel \x85 bom \ufeff del \x7f",
    "tabs\tand\rcarriage\x00null? no: \x01\x1f",
    "]: [ { } & * ! | > % @ ` ,",
    "yes", "no", "null", "~", "0x1F", "1e3", "- ", "---", "...",
]


@pytest.mark.parametrize("value", NASTY)
def test_values_round_trip_exactly(value):
    value = value.replace("\x00", "")  # NUL cannot appear in YAML or a process's argv
    spec = make_spec(command=value, env={"NASTY": value}, worker_args=[value],
                     labels={"team": "ml"})
    m = render.render(spec)
    for fmt in ("yaml", "json"):
        back = yaml.safe_load(render.dump(m, fmt)) if fmt == "yaml" else json.loads(
            render.dump(m, fmt))
        main = head(back)["template"]["spec"]["template"]["spec"]["containers"][0]
        assert main["command"] == ["bash", "-c", value]
        assert {"name": "NASTY", "value": value} in main["env"]
        assert workers(back)["template"]["spec"]["template"]["spec"]["containers"][0]["args"][
            -1] == value


def test_command_list_is_used_verbatim():
    m = render.render(make_spec(command=["python3", "-c", "print('a: b')"]))
    main = head(m)["template"]["spec"]["template"]["spec"]["containers"][0]
    assert main["command"] == ["python3", "-c", "print('a: b')"]


def test_user_template_goes_through_the_same_safe_path(tmp_path):
    t = tmp_path / "mine.yaml.j2"
    src = (GOLDEN.parent.parent.parent / "templates" / "pathways-jobset.yaml.j2").read_text()
    t.write_text(src.replace("suspend: false", "suspend: {{ true }}"))
    m = render.render(make_spec(command="echo '}}: x'"), t)
    assert m["spec"]["suspend"] is True
    main = head(m)["template"]["spec"]["template"]["spec"]["containers"][0]
    assert main["command"][-1] == "echo '}}: x'"


@pytest.mark.parametrize(("body", "message"), [
    ("apiVersion: v1\nkind: {{ nope }}\n", "undefined value"),
    ("apiVersion: v1\nkind: {{ spec }}\n", "not plain data"),
    ("apiVersion: v1\nkind: {% if %}\n", "line 2: syntax error"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ("a: [1\n", "not valid YAML"),
    ("a: 1\n---\nb: 2\n", "exactly one YAML document"),
    ("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nspec: {replicatedJobz: []}\n",
     "unknown field (did you mean 'replicatedJobs'?)"),
])
def test_bad_user_templates(tmp_path, body, message):
    assert message in template_error(render.render, make_spec(), tmp_path / "bad.j2", body).message


def test_missing_template_file(tmp_path):
    from elastix.errors import UsageError

    with pytest.raises(UsageError) as e:
        render.render(make_spec(), tmp_path / "none.j2")
    assert "cannot read template" in e.value.message


def _mutations(m):
    """(description, mutated manifest) pairs that the CRD must reject."""
    def pod(x):
        return workers(x)["template"]["spec"]["template"]["spec"]

    cases = []
    for desc, fn in [
        ("unknown field", lambda x: pod(x).update(nodeSelectr={})),
        ("wrong type", lambda x: workers(x).update(replicas="3")),
        ("bad quantity", lambda x: pod(x)["containers"][0]["resources"]["limits"].update(
            {"google.com/tpu": "four"})),
        ("missing required", lambda x: pod(x)["containers"][0].pop("name")),
        ("bad enum", lambda x: x["spec"]["successPolicy"].update(operator="Most")),
        ("int32 overflow", lambda x: workers(x)["template"]["spec"].update(backoffLimit=2**31)),
        ("duplicate container", lambda x: pod(x)["containers"].append(
            copy.deepcopy(pod(x)["containers"][0]))),
    ]:
        x = copy.deepcopy(m)
        fn(x)
        cases.append((desc, x))
    return cases


def test_crd_rejects_mutations():
    m = render.render(make_spec(**MODES["elastic"]))
    for desc, bad in _mutations(m):
        assert crd.problems(bad), desc


def closed_jsonschema() -> dict:
    """The same rules as a JSON Schema (for cross-checking with the ``jsonschema`` package).

    Objects with ``properties`` get ``additionalProperties: false``; int-or-string becomes an
    ``anyOf``. Formats and list uniqueness are not expressed here.
    """
    def close(s):
        if isinstance(s, dict):
            s = {k: ({pk: close(pv) for pk, pv in v.items()} if k == "properties"
                     else v if k in ("enum", "required", "default") else close(v))
                 for k, v in s.items()}
            if s.get("x-kubernetes-int-or-string"):
                s.pop("anyOf", None)
                pattern = s.pop("pattern", None)
                s["anyOf"] = [{"type": "integer"},
                              {"type": "string", **({"pattern": pattern} if pattern else {})}]
            if "properties" in s and "additionalProperties" not in s and not s.get(
                    "x-kubernetes-preserve-unknown-fields"):
                s["additionalProperties"] = False
            return s
        if isinstance(s, list):
            return [close(v) for v in s]
        return s

    return close(copy.deepcopy(crd.schema()))


def test_crd_validator_agrees_with_jsonschema():
    """Cross-check the fast walker against the jsonschema package on the same inputs."""
    import jsonschema

    validator = jsonschema.Draft7Validator(closed_jsonschema())
    m = render.render(make_spec(**MODES["elastic"]))
    assert not list(validator.iter_errors(m))
    for desc, bad in _mutations(m):
        if desc in ("int32 overflow", "duplicate container"):
            continue  # formats and list-map keys are not in plain JSON Schema
        assert list(validator.iter_errors(bad)), desc
    for path in GOLDEN.glob("*.yaml"):
        assert not list(validator.iter_errors(yaml.safe_load(path.read_text()))), path.name


def test_crd_problem_paths_are_precise():
    m = render.render(make_spec())
    workers(m)["template"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    found = crd.problems(m)
    assert found == ["spec.replicatedJobs[1].template.spec.template.spec.containers[0]"
                     ".imagePullPolicy: expected a string, got int 3"]


def test_vendored_crd_is_unchanged():
    assert hashlib.sha256(crd.crd_text().encode()).hexdigest() == crd.CRD_SHA256


def test_schema_extract_matches_the_crd():
    """The JSON extract the validator loads is exactly the CRD's v1alpha2 schema.

    Regenerate it with: python -c "import json; from elastix.workload import crd; open('templates/
    jobset-v1alpha2-schema.json','w').write(json.dumps(crd.schema_from_crd(), sort_keys=True,
    separators=(',',':')) + '\\n')"
    """
    assert crd.schema() == crd.schema_from_crd()


def test_non_utf8_template_is_a_usage_error(tmp_path):
    from elastix.errors import UsageError

    t = tmp_path / "latin1.j2"
    t.write_bytes("kind: JobSet # caf\xe9\n".encode("latin-1"))
    with pytest.raises(UsageError) as e:
        render.render(make_spec(), t)
    assert "is not UTF-8 text" in e.value.message

