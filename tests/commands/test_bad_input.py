"""Every command fails well: the bad-input table.

One row per bad input: the argv, the files it needs, the exit code and a fragment of the one
line it must print. Bad input is exit 2 with one ``error:`` line and a ``hint:``; never a
traceback, never the catch-all "unexpected" error (exit 1). Rows run the real entry point
in-process; rows that used to hang run as a subprocess, so a regression fails on its timeout
instead of hanging the suite.
"""

from __future__ import annotations

import io
import os

import pytest

from elastix.main import main

GKE_DRY_RUN = ["--dry-run", "--backend", "gke", "--tpu-type", "v5litepod-16",
               "--docker-image", "img:1", "--command", "true"]
CREATE = ["workload", "create", "x", *GKE_DRY_RUN]
CLUSTER = ["--project", "pppppp", "--location", "us-central1-a"]
KUBE = ["--backend", "gke", "--kubeconfig", "kc"]
NESTED = b"[" * 5000 + b"]" * 5000
NOWHERE = ('{"apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [{"name": '
           '"k", "cluster": {"server": "https://127.0.0.1:9"}}], "users": [{"name": "u", "user": '
           '{"token": "t"}}], "contexts": [{"name": "c", "context": {"cluster": "k", "user": '
           '"u"}}]}')


def _local_workloads(tmp):
    """Two local workloads as submit leaves them (a plan.json), and one whose state.json is
    damaged. No processes: nothing here needs one to run."""
    from elastix.backends.local.plan import make_plan
    from elastix.backends.local.state import write_json_atomic
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    for name in ("good", "bad"):
        spec = build_spec(None, {"name": name, "tpu_type": "v5litepod-16", "num_slices": 2,
                                 "docker_image": "img:1", "command": "true"})
        d = tmp / "state" / name
        d.mkdir(parents=True)
        write_json_atomic(d / "plan.json", make_plan(render(spec), d, {}, str(tmp)).to_json())
    (tmp / "state" / "bad" / "state.json").write_text('{"state": "Runn')  # cut mid-write


def _fifo(tmp):
    """``p``: a FIFO no one writes to."""
    os.mkfifo(tmp / "p")


ROWS = [
    # --- user templates (sandboxed, bounded, one line naming the file and line)
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": "a: {{ 1/0 }}\n"}, 2,
                 "template t.j2 line 1: ZeroDivisionError: division by zero",
                 id="template-divides-by-zero"),
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": 'a: 1\n{% include "/etc/passwd" %}'},
                 2, "template t.j2 line 2: include is not allowed", id="template-includes-a-file"),
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": "a: {{ ''.__class__.__mro__ }}"}, 2,
                 "template t.j2 line 1: not allowed in a template", id="template-python-internals"),
    pytest.param(CREATE + ["--template", "t.j2"],
                 {"t.j2": "{% for i in range(10**9) %}x{% endfor %}"}, 2,
                 "template t.j2 line 1: range() is given 1000000000", id="template-huge-loop"),
    pytest.param(CREATE + ["--template", "t.j2"],
                 {"t.j2": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}"
                          "{% endfor %}"}, 2,
                 "template t.j2 line 1: loops ran over 1000000 iterations",
                 id="template-nested-loops"),
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": "a: {{ 'x' * 10**9 }}"}, 2,
                 "repeating 1 items 1000000000 times", id="template-huge-string"),
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": "a: 1\nb: {% if %}\n"}, 2,
                 "template t.j2 line 2: syntax error", id="template-syntax-error"),
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": "a: {{ nope }}\n"}, 2,
                 "template t.j2 line 1: uses an undefined value", id="template-undefined"),
    pytest.param(CREATE + ["--template", "t.j2"], {"t.j2": b"a: caf\xe9\n"}, 2,
                 "template 't.j2' is not UTF-8 text (byte 6)", id="template-not-utf8"),
    # --- spec and env files
    pytest.param(CREATE + ["--spec", "deep.json"], {"deep.json": NESTED}, 2,
                 "spec file 'deep.json' is nested too deeply", id="spec-deeply-nested"),
    pytest.param(CREATE + ["--spec", "s.yaml"], {"s.yaml": b"\xff\xfename: x\n"}, 2,
                 "spec file 's.yaml' is not UTF-8 text (byte 0)", id="spec-not-utf8"),
    pytest.param(CREATE + ["--spec", "."], {}, 2, "cannot read spec file '.': Is a directory",
                 id="spec-is-a-directory"),
    pytest.param(CREATE + ["--env-file", "e.env"], {"e.env": b"A=\xff\n"}, 2,
                 "env file 'e.env' is not UTF-8 text (byte 2)", id="env-file-not-utf8"),
    pytest.param(["workload", "goodput", "--events", "e.jsonl"], {"e.jsonl": b"{}\n\xff\n"}, 2,
                 "events file 'e.jsonl' is not UTF-8 text (byte 3)", id="events-file-not-utf8"),
    pytest.param(["workload", "goodput", "--log", "."], {}, 2,
                 "cannot read log file '.': Is a directory", id="log-file-is-a-directory"),
    pytest.param(["workload", "goodput", "--events", "e", "--log", "l"], {}, 2,
                 "give --events or --log, not both", id="goodput-events-and-log"),
    # --- image build
    pytest.param(["image", "build", "-t", "a:b", "--dry-run", "--requirements-file", "r.txt"],
                 {"r.txt": b"numpy\xff\n"}, 2,
                 "requirements file 'r.txt' is not UTF-8 text (byte 5)",
                 id="requirements-file-not-utf8"),
    pytest.param(["image", "build", "-t", "a:b", "--dry-run", "--requirements-file", "."], {}, 2,
                 "cannot read requirements file '.': Is a directory",
                 id="requirements-file-is-a-directory"),
    pytest.param(["image", "build", "-t", "a:b", "--dry-run", "--context-dir", "f"],
                 {"f": "a file\n"}, 2, "--context-dir f is not a directory",
                 id="context-dir-is-a-file"),
    # --- kubeconfig
    pytest.param(["workload", "list", *KUBE], {"kc": "a: [b\n::: {\n"}, 2,
                 "kubeconfig 'kc' is not valid YAML at line 2: expected ',' or ']', but got ':'",
                 id="kubeconfig-garbage"),
    pytest.param(["workload", "list", *KUBE], {"kc": "- a\n- b\n"}, 2,
                 "kubeconfig 'kc' is not a kubeconfig: a list, not a mapping",
                 id="kubeconfig-a-list"),
    pytest.param(["workload", "list", *KUBE], {"kc": b"\xff\xfe: x\n"}, 2,
                 "kubeconfig 'kc' is not UTF-8 text (byte 0)", id="kubeconfig-not-utf8"),
    pytest.param(["workload", "list", *KUBE], {"kc": "clusters: 5\n"}, 2,
                 "kubeconfig 'kc' is not a kubeconfig: 'clusters' must be a list",
                 id="kubeconfig-wrong-shape"),
    # --- chaos run --verify on GKE makes no second JobSet: refused before any request (the
    # kubeconfig's server does not exist)
    pytest.param(["chaos", "run", "w", "--verify", *KUBE], {"kc": NOWHERE}, 2,
                 "--verify without --reference: the gke backend does not copy workload w",
                 id="chaos-verify-on-gke"),
    # --- durations: one grammar, no spinning
    pytest.param(["workload", "list", "-w", "--interval", "0"], {}, 2,
                 "--interval '0' is below the minimum of 0.1 s", id="list-watch-interval-0"),
    pytest.param(["workload", "status", "x", "-w", "--interval", "nan"], {}, 2,
                 "--interval 'nan' is not a duration", id="status-interval-nan"),
    pytest.param(["workload", "delete", "x", "--wait", "--timeout", "inf"], {}, 2,
                 "--timeout 'inf' is not a duration", id="delete-timeout-inf"),
    pytest.param(["workload", "goodput", "--events", "e.jsonl", "--window", "0"], {}, 2,
                 "--window '0' is below the minimum of 1 s", id="goodput-window-0"),
    pytest.param(["chaos", "run", "x", "--window", "-1"], {}, 2,
                 "--window '-1' is not a duration", id="chaos-window-negative"),
    pytest.param(["chaos", "run", "x", "--max-steps-lost", "-1"], {}, 2,
                 "--max-steps-lost -1 is out of range: 0 or more", id="max-steps-lost-negative"),
    # --- local workloads: damaged state, out-of-range slice and host
    pytest.param(["workload", "status", "bad"], _local_workloads, 2,
                 "local workload 'bad' is damaged: ", id="local-state-file-damaged"),
    pytest.param(["workload", "list"], _local_workloads, 0, "bad   Broken",
                 id="local-list-shows-damaged"),
    pytest.param(["chaos", "kill-worker", "good", "--slice", "5"], _local_workloads, 2,
                 "--slice 5 is out of range: good has 2 slices (0-1)", id="kill-worker-slice"),
    pytest.param(["chaos", "kill-worker", "good", "--slice", "0", "--host", "9"],
                 _local_workloads, 2, "--host 9 is out of range: good has 4 hosts per slice (0-3)",
                 id="kill-worker-host"),
    # --- clusters
    pytest.param(["cluster", "create", "c", *CLUSTER, "--tpu-type", "v5litepod-16", "--dry-run",
                  "--jobset-manifest", "m.yaml"], {"m.yaml": "a: [b\n"}, 2,
                 "--jobset-manifest m.yaml is not valid YAML at line 2", id="jobset-manifest-yaml"),
    pytest.param(["cluster", "create", "c", *CLUSTER, "--tpu-type", "v5litepod-16", "--dry-run",
                  "--jobset-manifest", "m.yaml"], {"m.yaml": "- 1\n- 2\n"}, 2,
                 "m.yaml: a document is a list, not a Kubernetes object",
                 id="jobset-manifest-a-list"),
    pytest.param(["cluster", "delete", "c", *CLUSTER], {"<stdin>": "n\n"}, 1,
                 "cluster c was not deleted: the confirmation was declined",
                 id="cluster-delete-declined"),
    # --- a FIFO named as a file: open() waited for a writer forever (issue 48)
    pytest.param(CREATE + ["--spec", "p"], _fifo, 2, "spec file 'p' is not a regular file",
                 id="spec-fifo"),
    pytest.param(CREATE + ["--env-file", "p"], _fifo, 2, "env file 'p' is not a regular file",
                 id="env-file-fifo"),
    pytest.param(["chaos", "run", "x", "--schedule", "p"], _fifo, 2,
                 "schedule 'p' is not a regular file", id="schedule-fifo"),
]

# Rows that hung before their fix: a subprocess with a timeout fails instead of hanging.
HUNG = {"template-huge-loop", "template-nested-loops", "list-watch-interval-0", "spec-fifo",
        "env-file-fifo", "schedule-fifo"}


def _setup(tmp_path, setup) -> str | None:
    """Lay out a row's files; returns what the row types on stdin."""
    if callable(setup):
        setup(tmp_path)
        return None
    stdin = None
    for name, content in setup.items():
        if name == "<stdin>":
            stdin = content
            continue
        data = content.encode() if isinstance(content, str) else content
        (tmp_path / name).write_bytes(data)
    return stdin


def _check(rc: int, out: str, err: str, code: int, message: str) -> None:
    text = out + err
    assert rc == code, text
    assert message in text
    assert "unexpected" not in text and "Traceback" not in text
    if code != 0:
        lines = [ln for ln in err.splitlines() if ln.startswith(("error:", "hint:"))]
        assert [ln.split(":")[0] for ln in lines] == ["error", "hint"], err
        assert message in lines[0]


@pytest.mark.parametrize(("argv", "setup", "code", "message"),
                         [r for r in ROWS if r.id not in HUNG])
def test_bad_input(tmp_path, home, capsys, monkeypatch, argv, setup, code, message):
    stdin = _setup(tmp_path, setup)
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = main(argv)
    out, err = capsys.readouterr()
    _check(rc, out, err, code, message)


@pytest.mark.parametrize(("argv", "setup", "code", "message"),
                         [r for r in ROWS if r.id in HUNG])
def test_bad_input_that_could_hang(tmp_path, home, cli, argv, setup, code, message):
    """Rows that would hang the test if elastix got them wrong run the CLI as a subprocess,
    under a timeout."""
    _setup(tmp_path, setup)
    r = cli(*argv, cwd=tmp_path, env=home, timeout=30)
    _check(r.returncode, r.stdout, r.stderr, code, message)


def test_the_table_covers_every_bad_input_of_the_issue():
    """The issue's list, by row id: a row removed is a case forgotten."""
    ids = {row.id for row in ROWS}
    assert {"template-divides-by-zero", "template-includes-a-file", "spec-deeply-nested",
            "requirements-file-not-utf8", "context-dir-is-a-file", "local-state-file-damaged",
            "local-list-shows-damaged", "kubeconfig-garbage", "kill-worker-slice",
            "kill-worker-host", "jobset-manifest-yaml", "max-steps-lost-negative",
            "list-watch-interval-0", "template-huge-loop", "cluster-delete-declined",
            "template-python-internals"} <= ids
    assert HUNG <= ids
