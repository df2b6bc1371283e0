"""A YAML alias bomb in a user's file (issue 59, item 5): a 1.3 KB plan, schedule or spec
whose aliases expand to a billion values took 50 s of a core and 2 GB, then ended in
``unexpected MemoryError``. Now the reader of user YAML (``elastix.errors.load_user_yaml``)
refuses aliases that expand a file by more than a few thousand values, in one line (exit 2)
and at once; and a message quotes a value in a bounded form (``elastix.errors.shown``).

The CLI runs as a subprocess under a 1 GiB address-space limit and a timeout, so the old
behaviour fails the test instead of taking the machine's memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from elastix.errors import MAX_ALIAS_NODES, UsageError, load_user_yaml, shown


def _bomb(levels: int = 9) -> str:
    """A flow list of ``levels`` anchored lists, each nine aliases of the one before: about
    9**levels values once expanded, in under 1.3 KB."""
    parts = ['&a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


BOMB = _bomb()
FILES = [
    pytest.param(["chaos", "run", "w", "--plan", "f.yaml", "--dry-run"],
                 f"version: 1\nrounds:\n- fault: kill\n  count: {BOMB}\n", "plan 'f.yaml'",
                 id="plan"),
    pytest.param(["chaos", "run", "w", "--schedule", "f.yaml", "--dry-run"],
                 f"- at: 30s\n  slice: {BOMB}\n", "schedule 'f.yaml'", id="schedule"),
    pytest.param(["workload", "create", "w", "--spec", "f.yaml", "--dry-run"],
                 f"tpu_type: v5litepod-8\nlabels: {BOMB}\n", "spec file 'f.yaml'", id="spec"),
]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize(("argv", "text", "subject"), FILES)
def test_an_alias_bomb_in_a_user_file_is_one_line_at_once(tmp_path, argv, text, subject):
    assert len(text) < 1400
    (tmp_path / "f.yaml").write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(ELASTIX_STATE_DIR=str(tmp_path / "state"), HOME=str(tmp_path), NO_COLOR="1",
               COLUMNS="200")
    p = subprocess.run([sys.executable, "-m", "elastix", *argv], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=30,
                       preexec_fn=_limited)  # noqa: PLW1509 - no threads in the child yet
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr[-500:]
    assert lines[0] == (f"error: {subject} has aliases (*name) that expand it by more than "
                        f"{MAX_ALIAS_NODES:,} values"), lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines


def test_aliases_within_the_bound_are_read_and_one_within_itself_is_refused():
    env = "base: &env {A: '1', B: '2'}\n" + "".join(f"j{i}: *env\n" for i in range(100))
    data = load_user_yaml(env, "spec", "fix it")
    assert data["j99"] == {"A": "1", "B": "2"}
    with pytest.raises(UsageError, match="^spec has an alias within itself$"):
        load_user_yaml("a: &a [1, *a]\n", "spec", "fix it")
    with pytest.raises(UsageError, match="expand it by more than"):
        load_user_yaml(_bomb(6), "spec", "fix it", documents=True)


def test_a_quoted_value_is_bounded_whatever_its_size():
    assert shown("fault") == "'fault'"
    assert len(shown("x" * 10**6)) < 80
    assert shown(10**5000) == "an integer of 5001 digits"
    nested: list = ["lol"] * 9
    for _ in range(30):  # 9**30 values once written out: repr would never end
        nested = [nested] * 9
    assert len(shown(nested)) < 80
    assert shown(True) == "True" and shown(None) == "None"
