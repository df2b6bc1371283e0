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
