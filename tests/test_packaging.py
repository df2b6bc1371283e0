"""The built wheel ships every module and template: one namespace, nothing left behind."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"cli/elastix": "elastix", "trainer/elastix_trainer": "elastix_trainer",
           "templates": "elastix/templates"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "elastix"
    # Build from a copy so setuptools' build/ and egg-info land in the temp dir, not the repo.
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".ruff_cache", ".pytest_cache"))
    try:
        import setuptools  # noqa: F401
    except ImportError:
        pytest.fail("setuptools is needed to build the wheel (it is the build backend)")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "--no-index", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("elastix-*.whl")
    return zipfile.ZipFile(whl)


def test_every_source_file_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    missing = []
    for src, dest in MAPPING.items():
        for f in (ROOT / src).rglob("*"):
            if f.is_dir() or "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            rel = f.relative_to(ROOT / src).as_posix()
            if f"{dest}/{rel}" not in names:
                missing.append(f"{src}/{rel}")
    assert missing == [], "add these to [tool.setuptools] packages / package-data in pyproject"


def test_no_generic_top_level_names(wheel):
    tops = {n.split("/")[0] for n in wheel.namelist() if not n.startswith("elastix-")}
    assert tops == {"elastix", "elastix_trainer"}


def test_console_scripts(wheel):
    (ep,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    text = wheel.read(ep).decode()
    assert "elastix = elastix.main:main" in text
    assert "elastix-train = elastix_trainer.__main__:main" in text
