"""``elastix workload inspect`` on the local backend: the supervisor's view of a real workload
(its state, its log, each process alive or not) beside the status and the head's last lines,
in one file of the user's alone, and never a value of the workload's own environment, even
where its head printed it."""

from __future__ import annotations

import json
import os
import stat

from local_helpers import STANDIN, wait_until

SECRET = "s3cr3t-token-4f9a"


def test_a_bundle_holds_the_supervisor_s_view_and_no_secret(cli, backend, tmp_path):
    cli("workload", "create", "peek", "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--env", f"HF_TOKEN={SECRET}",
        "--command", f'echo "token $HF_TOKEN"; exec python {STANDIN} --step-delay 0.05')
    try:
        wait_until(lambda: "token" in "".join(
            e.text for e in backend.logs("peek", _opts())), 60, "the head's first line")
        out = tmp_path / "peek.json"
        cli("workload", "inspect", "peek", "--output-file", str(out))
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
        text = out.read_text()
        assert SECRET not in text
        b = json.loads(text)
        assert b["elastix"]["backend"] == "local" and b["unreadable"] == []
        assert b["workload"]["name"] == "peek" and b["workload"]["made_by"] == "elastix"
        assert "token <hidden by elastix>" in b["head_log"]
        env = {e["name"]: e["value"] for rj in b["manifest"]["spec"]["replicatedJobs"]
               for c in rj["template"]["spec"]["template"]["spec"]["containers"]
               for e in c.get("env") or [] if "value" in e}
        assert env["HF_TOKEN"] == "<hidden by elastix>" and env["ELASTIX_WORKLOAD"] == "peek"
        roles = sorted(p["role"] for p in b["processes"])
        assert roles == ["guard", "head", "supervisor"] + ["worker"] * 4  # 2 slices x 2 hosts
        assert all(p["alive"] for p in b["processes"])
        assert any("started head" in x for x in b["supervisor_log"])
        assert b["supervisor_state"]["state"] in ("Running", "Starting")
    finally:
        cli("workload", "delete", "peek", "--wait")


def test_a_name_that_matches_nothing_is_one_line(cli):
    p = cli("workload", "inspect", "nothing-here", check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[0].startswith("error: workload 'nothing-here' not found")


def _opts():
    from elastix.backends.base import LogOptions

    return LogOptions()


PEM = ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
       "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----")
FORMS_ENV = {
    "HF_TOKEN": "hf_s3cr3tTokenValue",
    "DB_PASSWORD": 'pa"ss\\wo\'rd-Ünïcødé-42',
    "PRIVATE_KEY": PEM,
    "ELASTIX_MY_TOKEN": "elastix-user-value-9f8e",
    "MODE": "train",
}
PRINTER = r'''
import json, os, sys
names = sys.argv[1:]
env = {n: os.environ[n] for n in names}
for n, v in env.items():
    print(v)                                   # verbatim (a PEM: line by line)
    print(json.dumps(v))                       # JSON-escaped
    print(json.dumps(v, ensure_ascii=False))
    print(repr(v))                             # Python's repr
    print(repr(v.encode()))
print(json.dumps(env))
print(os.environ)                              # environ({...}), every variable
print(json.dumps(dict(os.environ)))
print("last_step restore snapshot: ordinary words stay")
sys.stdout.flush()
os.execvp("env", ["env"])                      # NAME=value, the heartbeat key included
'''


def test_a_bundle_hides_every_form_a_head_prints(cli, backend, tmp_path):
    """Issue 59, item 2: the head prints each secret verbatim, JSON-escaped, through repr
    (with quotes, backslashes and non-ASCII), a PEM key line by line, the environment as
    ``os.environ`` and JSON, then runs ``env`` (the heartbeat key with it): none of it is in
    the bundle, and ordinary words are left as they are."""
    import yaml

    printer = tmp_path / "printer.py"
    printer.write_text(PRINTER)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"env": FORMS_ENV}))
    names = " ".join(FORMS_ENV)
    cli("workload", "create", "forms", "--tpu-type", "v5litepod-8", "--num-slices", "1",
        "--spec", str(spec), "--max-restarts", "0",
        "--command", f"python {printer} {names}")
    try:
        wait_until(lambda: any("ELASTIX_HEARTBEAT_KEY=" in e.text
                               for e in backend.logs("forms", _opts())), 60, "the env lines")
        out = tmp_path / "forms.json"
        cli("workload", "inspect", "forms", "--output-file", str(out))
        text = out.read_text()
        b = json.loads(text)
        log = "\n".join(b["head_log"])
        for name, value in FORMS_ENV.items():
            for printed in (value, json.dumps(value)[1:-1], repr(value)[1:-1],
                            repr(value.encode())[2:-1], *value.splitlines()):
                if len(printed) >= 8:
                    assert printed not in text, (name, printed)
                    assert printed not in log, (name, printed)
            assert f"{name}=<hidden by elastix>" in log
        key = [ln for ln in b["head_log"] if ln.startswith("ELASTIX_HEARTBEAT_KEY=")]
        assert key == ["ELASTIX_HEARTBEAT_KEY=<hidden by elastix>"]
        assert "last_step restore snapshot: ordinary words stay" in log
        assert "ELASTIX_WORKLOAD=forms" in log  # elastix's own: shown
    finally:
        cli("workload", "delete", "forms", "--wait")
