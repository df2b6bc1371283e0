"""kubectl's habits on workloads: ``-l/--selector`` on ``list`` and ``delete``, and ``delete``
of several names at once (all checked first: one unknown name deletes nothing).

The local backend keeps each workload's labels (``workload create --label``) in its plan; the
workloads here are as submit leaves them (a plan.json, no processes), so deleting is quick. The
GKE side sends the selector to the fake API server as ``labelSelector``.
"""

from __future__ import annotations

import json

import fake_cluster as gke
import pytest

from elastix.main import main

LABELS = {"a": {"team": "ml"}, "b": {"team": "ml", "env": "dev"}, "c": {"team": "web"}}


@pytest.fixture
def local(tmp_path, monkeypatch):
    from local_records import submitted_workloads

    state = submitted_workloads(tmp_path / "state", LABELS, num_slices=1)
    monkeypatch.setenv("ELASTIX_STATE_DIR", str(state))
    monkeypatch.setenv("ELASTIX_BACKEND", "local")
    monkeypatch.setenv("COLUMNS", "200")
    return state


def _names(capsys, *selector: str) -> list[str]:
    capsys.readouterr()
    assert main(["workload", "list", "-o", "json", *selector]) == 0
    return [w["name"] for w in json.loads(capsys.readouterr().out)]


@pytest.mark.parametrize(("selector", "want"), [
    ("team=ml", ["a", "b"]),
    ("team==ml,env!=dev", ["a"]),
    ("team in (web, data)", ["c"]),
    ("team notin (web)", ["a", "b"]),
    ("!env", ["a", "c"]),
    ("env", ["b"]),
    ("team=nobody", []),
])
def test_list_selects_by_label_on_the_local_backend(local, capsys, selector, want):
    assert sorted(_names(capsys, "-l", selector)) == want
    assert sorted(_names(capsys, "--selector", selector)) == want


def test_list_says_when_a_selector_matches_nothing(local, capsys):
    assert main(["workload", "list", "-l", "team=nobody"]) == 0
    out = capsys.readouterr().out
    assert "no local workloads" in out and "match -l team=nobody" in out


@pytest.mark.parametrize("selector", ["Team Name=x", "team in ()", "team=a b", "team=-x", ""])
def test_a_bad_selector_is_one_line_and_exit_2(local, capsys, selector):
    capsys.readouterr()
    assert main(["workload", "list", "-l", selector]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: --selector") and err[1].startswith("hint: e.g. -l team=ml")
    assert len(err) == 2


def test_delete_several_names_checks_them_all_first(local, capsys):
    capsys.readouterr()
    assert main(["workload", "delete", "a", "nope", "c", "zilch"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: workloads not found in ")
    assert err[0].endswith(": nope, zilch; nothing was deleted") and len(err) == 2
    assert sorted(_names(capsys)) == ["a", "b", "c"]  # nothing deleted
    assert main(["workload", "delete", "a", "c", "a"]) == 0
    err = capsys.readouterr().err
    assert "workload a: deletion requested" in err and "workload c: deletion requested" in err
    assert _names(capsys) == ["b"]


def test_delete_by_selector_and_its_mistakes(local, capsys):
    capsys.readouterr()
    assert main(["workload", "delete", "-l", "env=dev"]) == 0
    assert "workload b: deletion requested" in capsys.readouterr().err
    assert sorted(_names(capsys)) == ["a", "c"]
    assert main(["workload", "delete", "-l", "env=dev"]) == 0  # kubectl: nothing found is 0
    assert "match -l env=dev" in capsys.readouterr().err
    assert main(["workload", "delete", "a", "-l", "team=ml"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["workload", "delete"]) == 2
    assert "missing workload NAME" in capsys.readouterr().err
    assert sorted(_names(capsys)) == ["a", "c"]
    assert main(["workload", "delete", "a", "nope", "--ignore-not-found"]) == 0
    assert "workload nope: not found, nothing to delete" in capsys.readouterr().err
    assert _names(capsys) == ["c"]


def test_gke_labels_are_the_jobsets_and_the_selector_goes_to_the_api(tmp_path, monkeypatch,
                                                                       capsys):
    with gke.serving(tmp_path, monkeypatch, gke.QUIET) as fake:
        for name, labels in LABELS.items():
            flags = [f"--label={k}={v}" for k, v in labels.items()]
            assert main(["workload", "create", name, *gke.CREATE[3:], *flags]) == 0
        js = fake.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/b")
        assert js["metadata"]["labels"]["env"] == "dev"
        fake.requests(clear=True)
        assert sorted(_names(capsys, "-l", "team=ml,env!=dev")) == ["a"]
        [jobsets] = [r["query"] for r in fake.requests() if r["path"].endswith("/jobsets")]
        assert jobsets["labelSelector"] == "elastix.dev/workload,team=ml,env!=dev"
        assert main(["workload", "delete", "a", "nope"]) == 2
        assert "nope; nothing was deleted" in capsys.readouterr().err
        assert main(["workload", "delete", "-l", "team=ml"]) == 0
        gke.wait_for(lambda: sorted(_names(capsys)) == ["c"], what="a and b deleted")


def test_delete_several_takes_a_workload_with_a_damaged_state_file(local, capsys):
    """A damaged state file is a workload to delete (alone it is), among several too."""
    (local / "b" / "state.json").write_text("{not json")
    capsys.readouterr()
    assert main(["workload", "delete", "a", "b"]) == 0, capsys.readouterr().err
    assert not (local / "a").exists() and not (local / "b").exists()
