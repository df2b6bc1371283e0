"""README.md's command blocks, run in order as written on a fresh copy of the repository, the
way a new user would (issue 60): every line of the local backend's blocks exits as the README
says, each one timed. The lines for GKE, and the ones that set up or run this suite, are left
out, each with why.

The environment is what the README's first install line leaves: this suite's ``.venv`` first on
PATH (``bash .ci/setup && . .venv/bin/activate``), a home of its own (no kubeconfig, no state),
nothing else set. ``tests/ci/test_readme_install.py`` walks the In-CI lines after the second
install line, ``pip install '.[trainer,plot]'``, in a fresh virtualenv.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from process_tags import TAG_ENV, reap

ROOT = Path(__file__).resolve().parents[1]
SLOW = os.environ.get("ELASTIX_SLOW_TESTS") == "1"
LINE_TIMEOUT = 420.0
"""Seconds one line may take (the chaos block's longest, a run and its reference, takes about
a minute on 2 quiet cores)."""

SKIP = {
    # a word of the line -> why it is not run here
    "pip install": "an install line: this suite's .venv is the first one's result",
    "bash .ci/setup": "an install line: this suite's .venv is its result",
    "bash .ci/run": "the suite itself",
    "workload fit-check": "the seed's compile for 48 and 32 chips (two minutes): "
                          "tests/commands/test_fit_check.py runs the same check",
    "PROJECT": "GKE: a cluster and a Google Cloud project",
    "my-xpk-run": "GKE: a workload xpk made",
}
ACTIVATE = "bash .ci/setup && . .venv/bin/activate && "
"""The quickstart's first line begins with the install: already done here."""


def readme_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) of every line of README.md's ``bash`` blocks, continuation lines
    joined, in order."""
    out, block, pending, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            block, pending = line.strip() == "```bash", ""
            continue
        if not block or not line.strip():
            continue
        if not pending:
            start = n
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def _why_not(line: str) -> str | None:
    if line.startswith(ACTIVATE):
        return None
    return next((why for word, why in SKIP.items() if word in line), None)


def fresh_copy(dest: Path) -> Path:
    """The repository's files as a clone has them (tracked and new, not ignored ones)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(src.read_bytes())
            (dest / name).chmod(src.stat().st_mode)
    return dest


def test_the_walk_reads_every_block_and_leaves_out_only_what_it_says():
    lines = readme_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    run = [line for _, line in lines if _why_not(line) is None]
    left = [line for _, line in lines if _why_not(line) is not None]
    assert any(line.startswith(ACTIVATE) for line in run)
    assert any("chaos run demo --plan p.yaml" in line for line in run)
    assert any("smoke.sh all" in line for line in run)
    assert all(_why_not(line) for line in left) and len(left) <= 9, left


def _env(home: Path, tag: str) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), NO_COLOR="1", COLUMNS="160", **{TAG_ENV: tag})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _follow_then_ctrl_c(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``logs -f``: read until it has shown a step, then Ctrl-C, as the README says."""
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    for out in proc.stdout:  # blocks on the next line: the trainer logs every step
        seen.append(out)
        if "completed step" in out or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(line, proc.returncode, "".join(seen) + rest, err)


@pytest.mark.skipif(not SLOW, reason="README.md's blocks on the real trainer (about 6 minutes): "
                                     "ELASTIX_SLOW_TESTS=1")
def test_the_readme_runs_in_order_as_written(tmp_path, slow_run, capsys):
    clone = fresh_copy(tmp_path / "elastix")
    home = tmp_path / "home"
    home.mkdir()
    tag = uuid.uuid4().hex
    env = _env(home, tag)
    said: list[str] = []
    started = time.monotonic()
    try:
        for n, line in readme_lines((clone / "README.md").read_text(encoding="utf-8")):
            why = _why_not(line)
            if why is not None:
                said.append(f"L{n} left out ({why}): {line}")
                continue
            cmd = line.removeprefix(ACTIVATE)
            t0 = time.monotonic()
            if re.search(r"\blogs \S+ -f\b", cmd):
                p = _follow_then_ctrl_c(cmd.split("#")[0].strip(), clone, env)
                ok = p.returncode in (0, 130, -signal.SIGINT) and "completed step" in p.stdout
            else:
                p = subprocess.run(["bash", "-c", cmd], cwd=clone, env=env, capture_output=True,
                                   text=True, timeout=LINE_TIMEOUT)
                ok = p.returncode == 0
                if "echo $?" in cmd:  # the line says the code it prints
                    code = re.search(r"#\s*(\d+)", cmd).group(1)
                    ok = ok and p.stdout.strip().splitlines()[-1] == code
            said.append(f"L{n} {time.monotonic() - t0:6.1f} s  rc {p.returncode}  {cmd}")
            assert ok, (f"README.md L{n}: {cmd}\nrc {p.returncode}\n--- stdout\n"
                        f"{p.stdout[-3000:]}\n--- stderr\n{p.stderr[-3000:]}")
            assert "Traceback" not in p.stderr, p.stderr
    finally:
        for name in ("demo", "elastix-smoke"):
            subprocess.run(["elastix", "workload", "delete", name, "--ignore-not-found",
                            "--delete-data", "--wait"], cwd=clone, env=env, capture_output=True,
                           timeout=120)
        left = reap(tag)
        with capsys.disabled():
            print("\n" + "\n".join(said) + f"\nREADME walk: {time.monotonic() - started:.0f} s")
    assert not left, f"processes left running after the walk: {left}"
    assert (clone / "p.yaml").is_file()  # the files the README's lines wrote are there
    assert (clone / "report.json").stat().st_size > 0
