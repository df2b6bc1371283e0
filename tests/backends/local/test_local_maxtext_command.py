"""A MaxText head command on the local backend, without running MaxText: which Python runs
it, and every refusal at submit (one line, exit 2, nothing created) and in the head."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from elastix.backends.local import maxtext

MT = "python -u -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml steps=5"
# MaxText refuses elastic without a single controller, and so does the elastic lint first.
ELASTIC = " elastic_enabled=true enable_single_controller=true"


@pytest.mark.parametrize(("command", "found"), [
    (["bash", "-c", MT], (0, False)),
    (["bash", "-c", MT + " elastic_enabled=true enable_single_controller=true"], (0, True)),
    (["bash", "-c", "A=1 python3 -m MaxText.train x.yml elastic_enabled=True"], (1, True)),
    (["python3.12", "-m", "maxtext.trainers.pre_train.train", "elastic_enabled=false"],
     (0, False)),
    (["bash", "-c", "elastix-train --preset tiny"], None),
    (["bash", "-c", "python train.py"], None),
    (["bash", "-c", "python -m other.maxtext"], None),
    (["bash", "-c", "python -c 'unclosed"], None),
])
def test_a_maxtext_command_is_recognised(command, found):
    assert maxtext.parse(command) == found


def test_only_the_leading_python_is_replaced_and_nothing_else_is_requoted():
    line = 'V=1 python -m maxtext.trainers.pre_train.train out="$ELASTIX_LOCAL_DATA_DIR/o" x'
    got = maxtext._rewrite(["bash", "-c", line], 1, "/opt/my env/bin/python")
    assert got == ["bash", "-c", "V=1 '/opt/my env/bin/python' -m maxtext.trainers.pre_train."
                                 'train out="$ELASTIX_LOCAL_DATA_DIR/o" x']
    argv = ["/usr/bin/python3", "-m", "maxtext.x"]
    assert maxtext._rewrite(argv, 0, "/other/python") == argv  # a Python named by path stays


def _fake_dists(root, versions: dict[str, str]):
    """Distributions that importlib.metadata finds on PYTHONPATH, at chosen versions."""
    for name, version in versions.items():
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


def _create(cli, *extra, command=MT, env=None):
    return cli("workload", "create", "mt", "--tpu-type", "v5litepod-8", *extra,
               "--command", command, check=False, env=env)


def _nothing_created(state_dir):
    return not any(p.name != ".data" for p in state_dir.iterdir())


def test_a_missing_maxtext_environment_is_one_line_and_the_setup_command(cli, state_dir,
                                                                         tmp_path):
    proc = _create(cli, env={"ELASTIX_MAXTEXT_PYTHON": str(tmp_path / "none" / "python")})
    assert proc.returncode == 2, proc.stderr
    err = [line for line in proc.stderr.splitlines() if line.startswith(("error", "hint"))]
    assert len(err) == 2 and "MaxText environment" in err[0] and "Traceback" not in proc.stderr
    assert "bash .ci/setup-maxtext" in err[1]
    assert _nothing_created(state_dir)


def test_a_python_without_maxtext_is_refused(cli, state_dir):
    proc = _create(cli, env={"ELASTIX_MAXTEXT_PYTHON": sys.executable})
    assert proc.returncode == 2 and "has no maxtext installed" in proc.stderr, proc.stderr
    assert _nothing_created(state_dir)


def test_elastic_on_versions_the_stand_in_does_not_know_is_refused(cli, state_dir, tmp_path):
    fake = _fake_dists(tmp_path / "site", {**maxtext_versions(), "pathwaysutils": "0.1.14"})
    proc = _create(cli, "--num-slices", "1", command=MT + ELASTIC,
                   env={"ELASTIX_MAXTEXT_PYTHON": sys.executable, "PYTHONPATH": str(fake)})
    assert proc.returncode == 2, proc.stderr
    assert "pathwaysutils 0.1.14" in proc.stderr and "Traceback" not in proc.stderr
    assert _nothing_created(state_dir)
    # Elastic off: the same environment runs, without the stand-in (said when the head starts).
    env = {**os.environ, "ELASTIX_MAXTEXT_PYTHON": sys.executable, "PYTHONPATH": str(fake)}
    head = maxtext.resolve(["bash", "-c", MT], env, 2)
    assert head.standin == "" and "no local Pathways stand-in" in head.note
    assert head.command == ["bash", "-c", MT.replace("python", sys.executable, 1)]


def test_elastic_on_more_than_one_slice_is_refused(cli, state_dir, tmp_path):
    fake = _fake_dists(tmp_path / "site", maxtext_versions())
    proc = _create(cli, "--num-slices", "2", command=MT + ELASTIC,
                   env={"ELASTIX_MAXTEXT_PYTHON": sys.executable, "PYTHONPATH": str(fake)})
    assert proc.returncode == 2 and "--num-slices 1" in proc.stderr, proc.stderr
    assert _nothing_created(state_dir)


def test_the_head_refuses_unknown_versions_before_maxtext_runs(tmp_path):
    """The stand-in checks again in the head (an environment changed after submit)."""
    shim = maxtext.link_shim(tmp_path / "shim")
    fake = _fake_dists(tmp_path / "site", {**maxtext_versions(), "maxtext": "0.3.0"})
    env = {**os.environ, "PYTHONPATH": f"{shim}{os.pathsep}{fake}",
           "ELASTIX_MAXTEXT_STANDIN": "elastic"}
    proc = subprocess.run([sys.executable, "-c", "print('maxtext ran')"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "maxtext ran" not in proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("elastix: ") and "maxtext 0.3.0" in line
    # Without the variable the sitecustomize is inert.
    env.pop("ELASTIX_MAXTEXT_STANDIN")
    proc = subprocess.run([sys.executable, "-c", "print('maxtext ran')"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "maxtext ran"


def maxtext_versions() -> dict[str, str]:
    """The versions the stand-in knows (read from its module's source: no JAX import here)."""
    from elastix_trainer.elastic.local.maxtext import SUPPORTED

    return dict(SUPPORTED)


FAKE_TRAIN = '''"""Stands in for maxtext.trainers.pre_train.train in this test: a step loop in MaxText's
shape (jax's step annotation around each step, MaxText's completed-step line after it)."""
import time

import jax

print("fake maxtext starting", flush=True)
for step in range(1000000):
    with jax.profiler.StepTraceAnnotation("train", step_num=step):
        pass
    print(f"I1201 00:00:00.000000 1 metric_logger.py:265] completed step: {step}, seconds: 0.001",
          flush=True)
    time.sleep(0.05)
'''


def test_a_killed_slice_host_fails_the_maxtext_step_and_the_workload_restarts_it(
        cli, backend, tmp_path):
    """The local mechanics around a MaxText head, with a module in MaxText's place (the real
    one takes minutes: tests/backends/local/test_local_maxtext.py): the stand-in's DATA_LOSS
    ends the step, the workload restarts the head, and the supervisor's per-line times let
    ``logs --timestamps`` read across both attempts while ``logs`` shows the lines as written."""
    from local_helpers import wait_until

    from elastix.backends.base import LogOptions

    pkg = tmp_path / "fakemt" / "maxtext" / "trainers" / "pre_train"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "train.py").write_text(FAKE_TRAIN)
    fake = _fake_dists(tmp_path / "site", {**maxtext_versions()})
    env = {"ELASTIX_MAXTEXT_PYTHON": sys.executable,
           "PYTHONPATH": f"{fake}{os.pathsep}{tmp_path / 'fakemt'}"}
    cli.env.update(env)
    cli("workload", "create", "mt", "--tpu-type", "v5litepod-8", "--num-slices", "1",
        "--max-restarts", "1", "--command", "python -u -m maxtext.trainers.pre_train.train")

    def lines(**kw):
        return [e for e in backend.logs("mt", LogOptions(**kw))]

    wait_until(lambda: any("completed step: 3," in e.text for e in lines()), 300, "steps")
    cli("chaos", "kill-worker", "mt", "--slice", "0")
    wait_until(lambda: backend.status("mt").jobset_restarts == 1
               and any("completed step: 1," in e.text
                       for e in lines(timestamps=True)[-5:]), 300, "the restarted head's steps")
    plain = [e.text for e in lines() if not e.notice]
    assert plain[0].startswith("elastix: local Pathways stand-in active (fault;"), plain[:2]
    assert plain[1] == "fake maxtext starting"  # as written: no time before it
    stamped = lines(timestamps=True)
    assert [e.text for e in stamped if e.notice] == ["head attempt 0", "head attempt 1"]
    text = [e.text for e in stamped if not e.notice]
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ", t) for t in text)
    joined = "\n".join(text)
    assert "JaxRuntimeError: DATA_LOSS: slice(s) [0] lost a host" in joined
    assert joined.count("fake maxtext starting") == 2
    sup = (backend.root / "mt" / "supervisor.log").read_text()
    assert f"{sys.executable} -u -m maxtext.trainers.pre_train.train" in sup
    cli("workload", "delete", "mt")
