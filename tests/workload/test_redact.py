"""The bundle's scrubber (``elastix.workload.redact``, issue 59 item 2): every form a program
prints a value in is hidden, by value and by name, and nothing else is rewritten."""

from __future__ import annotations

import json

import pytest

from elastix.workload.redact import (
    HIDDEN,
    MIN_SCRUBBED,
    Scrubber,
    env_names,
    env_values,
    forms,
    hide_env,
)

PEM = ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
       "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----")
SECRETS = {
    "HF_TOKEN": "hf_s3cr3tTokenValue",
    "DB_PASSWORD": 'pa"ss\\wo\'rd-Ünïcødé-42',
    "PRIVATE_KEY": PEM,
    "ELASTIX_MY_TOKEN": "elastix-user-value-9f8e",  # a user's, whatever its prefix
    "MODE": "train",  # shorter than MIN_SCRUBBED: hidden by name only
}


def _manifest(env: dict[str, str]) -> dict:
    entries = [{"name": k, "value": v} for k, v in env.items()]
    entries += [{"name": "JAX_PLATFORMS", "value": "proxy"},
                {"name": "ELASTIX_WORKLOAD", "value": "peek"},
                {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    return {"metadata": {"name": "peek"}, "spec": {"replicatedJobs": [{"name": "pathways-head",
            "template": {"spec": {"template": {"spec": {"containers": [
                {"name": "jax-tpu", "env": entries}]}}}}}]}}


def _printed(env: dict[str, str]) -> list[str]:
    """What a head prints of its environment, each way a program may."""
    out = []
    for name, v in env.items():
        out += [v, f"value: {v}", json.dumps(v), json.dumps(v, ensure_ascii=False), repr(v),
                repr(v.encode()), f"{name}={v}", f'declare -x {name}="' + v.replace(
                    "\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"']
        out += v.splitlines()
    out += [json.dumps(env), repr(env), "environ(" + repr(env) + ")"]
    out += [f"{k}={v}" for k, v in env.items()]  # `env`, a line a variable
    return out


def test_every_printed_form_is_hidden():
    m = _manifest(SECRETS)
    s = Scrubber(env_values(m), env_names(m))
    for line in _printed(SECRETS):
        got = s.text(line)
        for v in SECRETS.values():
            for f in forms(v):
                assert f not in got, (line, f, got)
        assert "hf_s3cr3t" not in got and "MIIEvQIBADAN" not in got
    # a short value is hidden where it is named, not where the word appears
    assert s.text("MODE=train") == f"MODE={HIDDEN}"
    assert s.text('{"MODE": "train"}') == f'{{"MODE": "{HIDDEN}"}}'
    assert s.text("'MODE': 'train'") == f"'MODE': '{HIDDEN}'"
    assert s.text("we train the model") == "we train the model"


def test_the_heartbeat_key_is_hidden_where_it_is_named():
    s = Scrubber([], env_names(_manifest({})))
    key = "ab" * 32
    assert s.text(f"ELASTIX_HEARTBEAT_KEY={key}") == f"ELASTIX_HEARTBEAT_KEY={HIDDEN}"
    assert key not in s.text(json.dumps({"ELASTIX_HEARTBEAT_KEY": key, "PATH": "/bin"}))
    assert s.text("ELASTIX_WORKLOAD=peek") == "ELASTIX_WORKLOAD=peek"  # elastix's own: shown


@pytest.mark.parametrize("text", [
    '{"last_step": 120, "last_restore": "snapshot"}',
    "restored step 10 from snapshot; checkpoint_committed step 20",
    "the passwd field is empty", "proxy", "elastix-user-value",
])
def test_text_that_is_no_secret_is_never_rewritten(text):
    env = {"A": "step", "B": "restore", "C": "snapshot1", "D": "passwd", "E": "last"}
    m = _manifest(env)
    assert Scrubber(env_values(m), env_names(m)).text(text) == text


def test_a_value_is_hidden_as_a_whole_token_only():
    s = Scrubber(["snapshot1"], [])
    assert s.text("snapshot1") == HIDDEN
    assert s.text("x=snapshot1;") == f"x={HIDDEN};"
    assert s.text("snapshot12 presnapshot1 snapshot1_") == "snapshot12 presnapshot1 snapshot1_"
    assert all(len(f) >= MIN_SCRUBBED for f in forms("a\nbcdefghij\nk"))


def test_the_manifest_hides_user_values_and_keeps_the_platform_s():
    m = _manifest(SECRETS)
    applied = json.loads(json.dumps(m))
    m["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied)}
    out = hide_env(m)
    env = {e["name"]: e.get("value") for e in out["spec"]["replicatedJobs"][0]["template"][
        "spec"]["template"]["spec"]["containers"][0]["env"]}
    assert all(env[k] == HIDDEN for k in SECRETS)
    assert env["JAX_PLATFORMS"] == "proxy" and env["ELASTIX_WORKLOAD"] == "peek"
    assert env["FROM_SECRET"] is None
    text = out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert "hf_s3cr3t" not in text and json.loads(text)["metadata"]["name"] == "peek"
    # and a value only the annotation holds is found there (an edited JobSet)
    assert "hf_s3cr3tTokenValue" in env_values({"metadata": m["metadata"]})
