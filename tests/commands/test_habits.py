"""Habits users bring from gcloud, kubectl and xpk, met by the real CLI."""

from __future__ import annotations

import json

import pytest

from elastix.clients.gcloud_config import read_defaults


def _gcloud_config(root, name="default", **sections):
    (root / "configurations").mkdir(parents=True)
    (root / "active_config").write_text(name + "\n")
    text = "".join(f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in vals.items())
                   for sec, vals in sections.items())
    (root / "configurations" / f"config_{name}").write_text(text)
    return root


def test_gcloud_defaults_follow_the_active_configuration_and_the_environment(tmp_path):
    root = _gcloud_config(tmp_path / "g", "work", core={"project": "proj-a"},
                          compute={"zone": "us-east5-b", "region": "us-east5"})
    env = {"CLOUDSDK_CONFIG": str(root)}
    got = read_defaults(env)
    assert (got.project, got.zone, got.region, got.location) == (
        "proj-a", "us-east5-b", "us-east5", "us-east5-b")
    assert read_defaults({**env, "CLOUDSDK_CORE_PROJECT": "proj-b"}).project == "proj-b"
    assert read_defaults({**env, "CLOUDSDK_ACTIVE_CONFIG_NAME": "other"}).project is None
    assert read_defaults({"CLOUDSDK_CONFIG": str(tmp_path / "none")}).project is None
    (root / "configurations" / "config_work").write_bytes(b"\xff[not ini")
    assert read_defaults(env).project is None  # unreadable: no configuration, no traceback


def test_cluster_create_takes_project_and_zone_from_gcloud(cli, tmp_path):
    root = _gcloud_config(tmp_path / "g", core={"project": "from-gcloud"},
                          compute={"zone": "us-central1-a"})
    r = cli("cluster", "create", "c1", "--tpu-type", "v5litepod-16", "--dry-run",
            env={"CLOUDSDK_CONFIG": str(root)})
    assert r.returncode == 0, r.stderr
    assert "projects/from-gcloud/locations/us-central1-a" in r.stdout
    r = cli("cluster", "create", "c1", "--tpu-type", "v5litepod-16", "--dry-run",
            "--project", "flag-wins", env={"CLOUDSDK_CONFIG": str(root)})
    assert "projects/flag-wins/locations/us-central1-a" in r.stdout


def test_the_local_backend_says_which_cloud_flags_it_ignores(cli, tmp_path):
    env = {"ELASTIX_STATE_DIR": str(tmp_path), "HOME": str(tmp_path)}
    r = cli("workload", "list", "-n", "team-a", "--zone", "us-central1-a", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
    (note,) = [ln for ln in r.stderr.splitlines() if ln.startswith("elastix: note:")]
    assert "--namespace team-a" in note and "--location us-central1-a" in note
    r = cli("workload", "list", "-o", "json", env=env)
    assert r.stderr == ""  # nothing given, nothing said


@pytest.mark.parametrize(("args", "says"), [
    (["workload", "create-pathways", "w"], "elastix workload create"),
    (["cluster", "create-pathways", "c"], "elastix cluster create"),
    (["inspector"], "elastix workload status"),
])
def test_xpk_commands_get_the_elastix_command(cli, args, says):
    r = cli(*args)
    assert r.returncode == 2
    assert says in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 2  # one error line, one hint


def test_logs_tail_minus_one_means_every_line(cli, tmp_path):
    r = cli("logs", "nosuch", "--tail", "-1", env={"ELASTIX_STATE_DIR": str(tmp_path),
                                                   "HOME": str(tmp_path)})
    assert "--tail" not in r.stderr  # accepted; the missing workload is the only complaint
    assert "nosuch" in r.stderr


# -- kubectl's habits: answered through the same path as xpk's flags ------------------------------

def _local(state, **labels_by_name):
    """Local workloads as submit leaves them (a plan.json); no processes."""
    from local_records import submitted_workloads

    return submitted_workloads(state, labels_by_name, num_slices=3)


def _run(capsys, *args):
    from elastix.main import main

    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_kubectl_wait_spellings_mean_the_elastix_condition(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELASTIX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ELASTIX_BACKEND", "local")
    code, _, err = _run(capsys, "workload", "wait", "gone", "--for=delete", "--timeout", "5s")
    assert (code, err.strip()) == (0, "workload gone: deleted")  # kubectl's own spelling
    code, _, err = _run(capsys, "workload", "wait", "gone", "--for=condition=Complete")
    assert code != 2 and "not found" in err  # taken as completed; the workload is the complaint
    code, _, err = _run(capsys, "workload", "wait", "w", "--for=condition=Ready")
    assert code == 2 and "nearest elastix condition is --for running" in err
    assert len(err.strip().splitlines()) == 2
    code, _, err = _run(capsys, "workload", "wait", "w", "--for=condition=Progressing")
    assert code == 2 and "running, stepping, completed or deleted" in err


def test_wait_conditions_are_the_measurements(capsys):
    from elastix.commands import wait
    from elastix.measure import wait as measure_wait

    assert wait.CONDITIONS == measure_wait.CONDITIONS


def test_list_o_name_prints_workload_slash_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ELASTIX_STATE_DIR", str(_local(tmp_path / "s", a={}, b={})))
    monkeypatch.setenv("ELASTIX_BACKEND", "local")
    code, out, _ = _run(capsys, "workload", "list", "-o", "name")
    assert (code, sorted(out.splitlines())) == (0, ["workload/a", "workload/b"])


@pytest.mark.parametrize(("args", "says"), [
    (["workload", "list", "-A"], "-A is kubectl's; elastix workload list says -n NAMESPACE"),
    (["workload", "list", "--all-namespaces"], "elastix workload list says -n NAMESPACE"),
    (["get"], "elastix says 'elastix workload list'"),
    (["describe", "w"], "elastix says 'elastix workload status NAME'"),
    (["workload", "get"], "elastix says 'elastix workload list'"),
    (["workload", "describe", "w"], "elastix says 'elastix workload status NAME'"),
])
def test_kubectl_habits_get_the_elastix_spelling(capsys, args, says):
    code, _, err = _run(capsys, *args)
    assert code == 2 and says in err and "kubectl's" in err
    assert len(err.strip().splitlines()) == 2  # one error line, one hint


# -- value completion: --for, --slice, -l, from the local backend ----------------------------------

def _complete(cli, words: str):
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    r = cli(env={"_ELASTIX_COMPLETE": "complete_bash", "COMP_WORDS": words,
                 "COMP_CWORD": str(cword)})
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_for_slice_and_selector_values_complete(cli, tmp_path):
    state = _local(tmp_path / "s", alpha={"team": "ml"}, beta={"team": "web", "env": "dev"})
    at = f"--backend local --state-dir {state}"
    assert _complete(cli, "elastix workload wait alpha --for ") == [
        "running", "stepping", "completed", "deleted"]
    assert _complete(cli, "elastix workload wait alpha --for s") == ["stepping"]
    # no status yet (a plan only): the slice count of its plan, 0..N-1
    assert _complete(cli, f"elastix logs alpha {at} --slice ") == ["0", "1", "2"]
    assert _complete(cli, f"elastix chaos kill-worker {at} --workload beta --slice 2") == ["2"]
    assert _complete(cli, f"elastix logs nosuch {at} --slice ") == []
    offered = _complete(cli, f"elastix workload list {at} -l ")
    assert {"env=dev", "team=ml", "team=web"} <= set(offered)  # and elastix's own labels
    assert _complete(cli, f"elastix workload delete {at} --selector team=w") == ["team=web"]
    assert _complete(cli, f"elastix workload list {at} -l env=dev,t") == [
        "env=dev,team=ml", "env=dev,team=web"]
