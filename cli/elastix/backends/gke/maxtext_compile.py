"""Run inside the MaxText environment's Python: MaxText's own ``train_compile.py``, then one line.

``python maxtext_compile.py <MaxText's argv: config.yml key=value ...>`` runs
``maxtext.trainers.pre_train.train_compile.main`` exactly as ``python -m
maxtext.trainers.pre_train.train_compile`` would (it compiles MaxText's train step for
``compile_topology`` without a chip and prints ``Memory analysis: CompiledMemoryStats(...)``),
then prints one line, :data:`MARK` followed by JSON: the settings MaxText resolved (its config
after every override) and MaxText's own TFLOPs a step a device
(``maxtext_utils.calculate_tflops_training_per_device``, the figure its trainer logs). A compile
that runs out of HBM is a result, not a failure: ``{"fits": false, "error": <the compiler's
line>}``, exit 0. Anything else fails as MaxText fails (its traceback, exit 1).

Standard library at module level: the launcher reads :data:`MARK` from here without MaxText, and
this file runs in an environment that has no elastix installed (it is run by path).
"""

from __future__ import annotations

import json
import sys

MARK = "ELASTIX-MAXTEXT-FIT"
SETTINGS = ("model_name", "per_device_batch_size", "max_target_length",
            "global_batch_size_to_train_on", "remat_policy", "num_vocab_tiling", "attention",
            "scan_layers", "elastic_enabled", "elastic_min_slice_count", "compile_topology",
            "compile_topology_num_slices", "weight_dtype", "dtype")
_OOM = ("resource_exhausted", "ran out of memory", "exceeded hbm capacity")


def _value(v):
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return str(getattr(v, "value", v))


def _oom_line(message: str) -> str:
    """The compiler's line that says how far over the chip's memory the step is."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for key in ("exceeded hbm capacity", "ran out of memory", "resource_exhausted"):
        for ln in lines:
            if key in ln.lower():
                return ln[:400]
    return (lines or ["RESOURCE_EXHAUSTED"])[0][:400]


def main(argv: list[str]) -> None:
    from maxtext.configs import pyconfig
    from maxtext.trainers.pre_train import train_compile
    from maxtext.utils import maxtext_utils

    out: dict = {}
    config = pyconfig.initialize(argv)  # the run's own settings, its elastic ones included
    compile_argv = list(argv)
    if config.elastic_enabled:
        # MaxText 0.2.5's create_device_mesh (maxtext_utils.py) takes the live devices when
        # elastic_enabled, in place of the topology's: it would compile for this machine's CPU.
        # The step is the same program; elastic training only chooses the slices it runs on.
        compile_argv.append("elastic_enabled=false")
        out["elastic_compiled_off"] = True
    try:
        train_compile.main(compile_argv)
        out["fits"] = True
    except Exception as e:  # noqa: BLE001 - MaxText's own OOM test (train_compile.is_oom)
        message = str(e)
        if not any(k in message.lower() for k in _OOM):
            raise
        out.update(fits=False, error=_oom_line(message))
    out["settings"] = {k: _value(getattr(config, k, None)) for k in SETTINGS}
    try:
        total, _, _ = maxtext_utils.calculate_tflops_training_per_device(config, log=False)
        out["tflops_per_device"] = float(total)
    except Exception:  # noqa: BLE001 - a model family MaxText cannot count: no figure
        out["tflops_per_device"] = None
    print(MARK + " " + json.dumps(out), flush=True)


if __name__ == "__main__":
    from absl import app

    app.run(main, argv=[sys.argv[0], *sys.argv[1:]])
