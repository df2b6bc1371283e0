"""The MaxText environment's rules, without starting MaxText: one pinned set, installed by the
project's own script, and real-MaxText tests that skip visibly here but fail in CI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import mtrun

REPO = mtrun.REPO
REQS = REPO / ".ci" / "maxtext-requirements.txt"
HERE = Path(__file__).parent


def _pins() -> dict[str, str]:
    out = {}
    for line in REQS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, eq, version = line.partition("==")
            assert eq and re.fullmatch(r"[\w.+-]+", version), f"not an exact pin: {line!r}"
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def test_one_pinned_set_holds_what_maxtexts_imports_need():
    pins = _pins()
    need = ("maxtext pathwaysutils jax jaxlib orbax-checkpoint flax optax grain tensorboardx "
            "omegaconf ml-collections jaxtyping chex sentencepiece tiktoken jinja2 aqtp qwix "
            "tokamax huggingface-hub transformers drjax pillow sympy").split()
    assert [n for n in need if n not in pins] == []
    # The fixtures were recorded with these: a pin that moves must re-record them.
    provenance = (REPO / "tests" / "fixtures" / "maxtext" / "PROVENANCE.md").read_text()
    for name in ("maxtext", "pathwaysutils", "orbax-checkpoint", "jax"):
        assert f"{name} {pins[name]}" in provenance, name


def test_setup_makes_it_in_ci_or_when_asked():
    setup = (REPO / ".ci" / "setup").read_text()
    assert re.search(r'"\$\{CI:-\}" = "true" \] \|\| \[ "\$\{ELASTIX_MAXTEXT:-\}" = "1" \]',
                     setup)
    assert "bash .ci/setup-maxtext" in setup
    script = (REPO / ".ci" / "setup-maxtext").read_text()
    assert "maxtext-requirements.txt" in script and ".venv-maxtext" in script
    assert ".venv-maxtext/" in (REPO / ".gitignore").read_text().splitlines()


def _run_without_maxtext(tmp_path: Path, ci: bool) -> dict:
    """The real-MaxText tests in a pytest of their own, pointed at no environment."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env[mtrun.ENV_VAR] = str(tmp_path / "no-such-env" / "bin" / "python")
    if ci:
        env["CI"] = "true"
    report = tmp_path / f"report-{ci}.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider",
         str(HERE / "test_real_maxtext.py")], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=300)
    report.write_text(proc.stdout + proc.stderr)
    return {"code": proc.returncode, "out": proc.stdout}


def test_without_the_environment_the_tests_skip_saying_how_to_make_it(tmp_path):
    got = _run_without_maxtext(tmp_path, ci=False)
    assert got["code"] == 0, got["out"]
    assert re.search(r"\b4 skipped\b", got["out"]), got["out"]
    assert "bash .ci/setup-maxtext" in got["out"] and "no MaxText environment" in got["out"]


def test_in_ci_a_missing_environment_fails_instead(tmp_path):
    got = _run_without_maxtext(tmp_path, ci=True)
    assert got["code"] == 1, got["out"]
    counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (failed|errors?|skipped|passed)",
                                                     got["out"].splitlines()[-1]))
    assert counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0) == 4, \
        got["out"]
    assert "skipped" not in counts and "passed" not in counts
    assert "CI must run real MaxText" in got["out"] and "bash .ci/setup-maxtext" in got["out"]
