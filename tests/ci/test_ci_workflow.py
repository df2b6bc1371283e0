"""The copyable CI example runs: docs/ci/github-actions-local.yml's steps, in order, for real.

Its YAML is parsed and each ``run:`` block is run with bash as GitHub Actions runs it
(``bash -e -o pipefail``), in a temporary checkout holding ``docs/ci/``, with fake
``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY`` files, the job's ``env`` and GitHub's ``if:``
semantics (after a failed step only ``always()`` steps run). ``uses:`` steps are skipped (the
checkout is the temp dir, Python is this interpreter, artefacts stay where the steps wrote them)
and the install step is stood in by this virtualenv, whose ``elastix`` is first on ``PATH``.
``${{ }}`` expressions are evaluated for the few contexts the file uses; any other fails the
test, so the file cannot grow something this runner does not understand.

Real parts throughout: the CLI, the local backend's processes, the real trainer (the
``--smoke`` job), a real SIGKILL. Slow (two smoke runs, a few minutes on 2 cores): run when
``ELASTIX_SLOW_TESTS=1``, as ``.ci/run`` sets it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from process_tags import local_env, reap

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "github-actions-local.yml"
XSD = ROOT / "tests" / "fixtures" / "junit" / "junit-10.xsd"
SLOW = os.environ.get("ELASTIX_SLOW_TESTS") == "1"
_EXPR = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def _evaluate(text: str, ctx: dict) -> str:
    """``${{ x.y.z }}`` replaced from ``ctx`` (nested dicts); unknown contexts fail."""
    def one(m: re.Match) -> str:
        node = ctx
        for part in m.group(1).split("."):
            assert isinstance(node, dict) and part in node, f"unknown expression {m.group(0)}"
            node = node[part]
        return str(node)
    return _EXPR.sub(one, text)


def run_workflow(tmp: Path, env: dict[str, str], overrides: dict[str, str] | None = None
                 ) -> tuple[list[dict], Path, Path]:
    """Run the workflow's job; returns (each step's record, the checkout, the step summary)."""
    wf = yaml.safe_load(WORKFLOW.read_text())
    (job,) = wf["jobs"].values()
    work = tmp / "checkout"
    shutil.copytree(ROOT / "docs" / "ci", work / "docs" / "ci")
    summary = tmp / "step-summary.md"
    summary.touch()
    ctx: dict = {"runner": {"temp": str(tmp / "runner-temp")}, "github": {"run_id": "4242"},
                 "steps": {}}
    job_env = {k: _evaluate(str(v), ctx) for k, v in job.get("env", {}).items()}
    job_env.update(overrides or {})
    ctx["env"] = job_env
    steps, failed = [], False
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses")
        cond = step.get("if", "success()")
        assert cond in ("success()", "always()", "failure()"), f"{name}: if: {cond}"
        if "uses" in step or step.get("id") == "install":
            steps.append({"name": name, "skipped": "stood in"})
            continue
        if (failed and cond == "success()") or (not failed and cond == "failure()"):
            steps.append({"name": name, "skipped": "if"})
            continue
        out = tmp / f"github-output-{i}"
        out.touch()
        p = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                            _evaluate(step["run"], ctx)], cwd=work, capture_output=True,
                           text=True, timeout=1200,
                           env={**env, **job_env, "GITHUB_OUTPUT": str(out),
                                "GITHUB_STEP_SUMMARY": str(summary)})
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
        if step.get("id"):
            ctx["steps"][step["id"]] = {"outputs": outputs}
        steps.append({"name": name, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
        failed = failed or p.returncode != 0
    return steps, work, summary


@pytest.fixture
def ci_env(tmp_path):
    """The runner's environment: this venv's elastix first on PATH, processes tagged."""
    tag = uuid.uuid4().hex
    env = {**os.environ, **local_env(tag, tmp_path / "unused", tmp_path)}
    for k in ("ELASTIX_STATE_DIR", "ELASTIX_BACKEND"):  # the workflow sets its own
        env.pop(k)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["CI"] = "true"
    yield env
    left = reap(tag)
    assert not left, f"processes left running after the workflow: {left}"


def _by_name(steps: list[dict]) -> dict[str, dict]:
    return {s["name"]: s for s in steps}


def _junit(work: Path):
    from lxml import etree

    doc = etree.parse(str(work / "elastix-smoke" / "junit.xml"))
    etree.XMLSchema(etree.parse(str(XSD))).assertValid(doc)
    return doc.getroot().find("testsuite")


def _gone(tmp: Path) -> None:
    state = tmp / "runner-temp" / "elastix-state"
    assert not (state / "smoke-4242").exists() and not (state / ".data" / "smoke-4242").exists()


@pytest.mark.skipif(not SLOW, reason="two smoke runs of the real trainer: ELASTIX_SLOW_TESTS=1")
def test_the_local_workflow_passes_with_one_testcase_per_kill(tmp_path, ci_env, slow_run):
    steps, work, summary = run_workflow(tmp_path, ci_env)
    ran = [s for s in steps if "rc" in s]
    assert [s["name"] for s in ran][:3] == ["Create the smoke workload", "Wait until it trains",
                                            "Kill a worker and measure the recovery"]
    for s in ran:
        assert s["rc"] == 0, f"{s['name']} exited {s['rc']}\n{s['stdout']}\n{s['stderr']}"
    suite = _junit(work)
    (case,) = suite.findall("testcase")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")
    assert "detection" in case.findtext("system-out")
    d = json.loads((work / "elastix-smoke" / "chaos.json").read_text())
    (kill,) = d["kills"]
    r = kill["recovery"]
    # the first kill of a fresh workload restores a save, never init; every phase is measured
    assert r["restore_source"] in ("snapshot", "checkpoint") and r["restored_step"] > 0, r
    assert all(v is not None for v in r["phases"].values()), r["phases"]
    assert d["ok"] and kill["in_process"] and d["stopped"] == "the one kill done"
    assert (work / "elastix-smoke" / "goodput.png").read_bytes()[:4] == b"\x89PNG"
    assert "elastix: run start" in (work / "elastix-smoke" / "head.log").read_text()
    assert "elastix chaos `smoke-4242`: passed" in summary.read_text()
    assert "chaos exit code 0" in _by_name(steps)["Report"]["stdout"]
    _gone(tmp_path)


@pytest.mark.skipif(not SLOW, reason="two smoke runs of the real trainer: ELASTIX_SLOW_TESTS=1")
def test_an_impossible_bound_fails_the_job_with_exit_3_and_a_junit_failure(tmp_path, ci_env,
                                                                          slow_run):
    # and the smoke job names a fault and a moment (issue 35)
    steps, work, summary = run_workflow(tmp_path, ci_env, {"MAX_DOWNTIME": "1ms",
                                                           "FAULT": "term", "DURING": "save"})
    by = _by_name(steps)
    chaos = by["Kill a worker and measure the recovery"]
    assert chaos["rc"] == 3, f"{chaos['stdout']}\n{chaos['stderr']}"
    for name in ("Collect the head log and status", "Report", "Clean up"):  # if: always()
        assert by[name]["rc"] == 0, by[name]
    suite = _junit(work)
    (case,) = suite.findall("testcase")
    (failure,) = case.findall("failure")
    assert failure.get("type") == "max_downtime" and "> 0.001 s" in failure.get("message")
    assert case.get("name").startswith("kill 1 (term, during save): smoke-4242-worker-")
    assert suite.get("failures") == "1"
    assert "failed (exit 3)" in summary.read_text()
    assert "chaos exit code 3" in by["Report"]["stdout"]
    _gone(tmp_path)


def test_the_workflow_steps_are_the_ones_this_runner_understands():
    """Fast, always run: every step is a `uses:`, the install step or a smoke.sh call; the GKE
    workflow calls the same script steps with Workload Identity Federation auth first."""
    local = yaml.safe_load(WORKFLOW.read_text())
    gke = yaml.safe_load((ROOT / "docs" / "ci" / "github-actions-gke.yml").read_text())

    def calls(wf):
        (job,) = wf["jobs"].values()
        return [s["run"].split()[-1] for s in job["steps"] if "run" in s
                and "smoke.sh" in s["run"]]

    assert calls(local) == calls(gke) == ["create", "wait", "chaos", "collect", "cleanup"]
    (job,) = gke["jobs"].values()
    uses = [s.get("uses", "") for s in job["steps"]]
    auth = next(i for i, u in enumerate(uses) if u.startswith("google-github-actions/auth@"))
    assert uses.index("actions/checkout@v4") < auth  # the action needs the checkout first
    assert set(job["steps"][auth]["with"]) == {"workload_identity_provider", "service_account"}
    assert gke["permissions"]["id-token"] == "write"
    for wf in (local, gke):
        (job,) = wf["jobs"].values()
        cleanup = [s for s in job["steps"] if "smoke.sh cleanup" in s.get("run", "")]
        assert cleanup and cleanup[0].get("if") == "always()"
    bad = subprocess.run(["bash", str(ROOT / "docs" / "ci" / "smoke.sh"), "bogus"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage:")
