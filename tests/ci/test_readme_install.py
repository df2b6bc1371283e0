"""README.md's second install line, then its In-CI lines (issue 60): in a fresh virtualenv,
``pip install '.[trainer,plot]'`` from a fresh copy of the repository, and ``bash
docs/ci/smoke.sh all`` with that elastix passes; with ``.[trainer]`` alone it once exited 2
(``--plot needs matplotlib``) and blamed "a step before chaos run".

Offline with ``ELASTIX_WHEELHOUSE`` (``.ci/run`` fetches the wheels first, ``.[trainer,plot]``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from process_tags import TAG_ENV, reap

ROOT = Path(__file__).resolve().parents[2]
SLOW = os.environ.get("ELASTIX_SLOW_TESTS") == "1"
sys.path.insert(0, str(ROOT / "tests"))
from test_readme_walk import fresh_copy, readme_lines  # noqa: E402


def _install_line() -> str:
    lines = [line for _, line in readme_lines((ROOT / "README.md").read_text(encoding="utf-8"))
             if line.startswith("pip install '.[")]
    assert len(lines) == 1, lines
    return lines[0].split("#")[0].strip()


def test_the_readmes_own_install_line_brings_what_its_ci_lines_need():
    # smoke.sh asks for --plot and --timeline (matplotlib: the plot extra) unless PLOTS=0
    extras = re.search(r"'\.\[([\w,]+)\]'", _install_line()).group(1).split(",")
    assert {"trainer", "plot"} <= set(extras)


@pytest.mark.skipif(not SLOW, reason="a fresh virtualenv's install of the trainer and a smoke "
                                     "run: ELASTIX_SLOW_TESTS=1 (ELASTIX_WHEELHOUSE: offline)")
def test_after_the_readmes_install_line_its_ci_line_passes(tmp_path, slow_run):
    clone = fresh_copy(tmp_path / "elastix")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR")}
    env.update(HOME=str(tmp_path / "home"), PIP_CACHE_DIR=str(tmp_path / "pip-cache"),
               NO_COLOR="1", **{TAG_ENV: uuid.uuid4().hex})
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    source = []
    if os.environ.get("ELASTIX_WHEELHOUSE"):
        source = ["--no-index", "--find-links", os.environ["ELASTIX_WHEELHOUSE"]]
    # --no-compile: byte-compiling every installed module was half the install's CPU; what
    # the smoke run imports is compiled when imported. The line is otherwise the README's.
    line = _install_line().replace("pip install", f"pip install -q --no-compile {' '.join(source)}",
                                   1)
    subprocess.run(["bash", "-c", line], cwd=clone, env=env, check=True, timeout=1500)
    try:
        p = subprocess.run(["bash", "docs/ci/smoke.sh", "all"], cwd=clone, env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        out = clone / "elastix-smoke"
        assert (out / "goodput.png").read_bytes()[:4] == b"\x89PNG"
        assert "no chaos report" not in p.stdout
    finally:
        left = reap(env[TAG_ENV])
    assert not left, left
