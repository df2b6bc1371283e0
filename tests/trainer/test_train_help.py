"""``elastix-train --help``: every option shows its default, and printing it imports no JAX
(importing JAX costs seconds; the help's speed is measured in docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

from elastix_trainer.config import TrainConfig, build_parser

HEAVY = ("jax", "jaxlib", "orbax", "flax", "optax", "tensorstore", "grain")

PROBE = f"""
import contextlib, io, json, sys
from elastix_trainer.__main__ import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["--help"])
    except SystemExit as e:
        code = e.code
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps({{"code": code, "help": out.getvalue(), "heavy": heavy}}))
"""


def test_help_imports_no_jax_and_lists_every_default():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                       timeout=120, env={"COLUMNS": "100", "PATH": ""})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["code"] == 0 and got["heavy"] == []
    text = " ".join(got["help"].split())
    # argparse's entries: each starts on a line indented two spaces with its flags
    entries = {e.split()[0].rstrip(","): " ".join(e.split())
               for e in re.split(r"\n(?=  -)", got["help"].split("\noptions:\n", 1)[1])}
    for f in dataclasses.fields(TrainConfig):
        entry = entries["--" + f.name.replace("_", "-")]
        assert "default" in entry, entry  # its default, or what unset means
    assert "--steps STEPS Optimizer steps to run" in text and "(default: 100)" in text
    assert "(default: 0.003)" in text  # --lr as typed, not 0.0030000
    assert "(default: --async-checkpoint)" in text and "(default: unset)" in text


def test_each_flags_default_is_the_configs():
    defaults = TrainConfig()
    for action in build_parser()._actions:
        if not action.option_strings or action.dest in ("help", "config"):
            continue
        value = getattr(defaults, action.dest)
        if isinstance(value, bool):
            want = ("--" if value else "--no-") + action.dest.replace("_", "-")
        elif value is None:
            want = "unset"
        else:
            want = f"{value:g}" if isinstance(value, float) else str(value)
        if value is None and not action.help.endswith("(default: unset)"):
            assert "default" in action.help, action.dest  # its doc says what unset means
            continue
        assert action.help.endswith(f" (default: {want})"), (action.dest, action.help)
        if not isinstance(value, bool) and value is not None:
            assert type(value)(want) == value


def test_the_presets_help_lists_are_the_models():
    from elastix_trainer.config import preset_names
    from elastix_trainer.model import PRESETS

    assert preset_names() == list(PRESETS)
    text = " ".join(build_parser().format_help().split())
    assert f"Model preset: {', '.join(PRESETS)}. (default: tiny)" in text
