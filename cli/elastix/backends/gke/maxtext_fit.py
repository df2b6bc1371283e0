"""The fit check of a MaxText command: MaxText's own ``train_compile.py``, for every mesh.

A head that runs MaxText's trainer (``python -m maxtext.trainers.pre_train.train <config.yml>
key=value ...``) is compiled as MaxText compiles it for slices that are not there: its
``train_compile.py``, with the command's own config and overrides (and its ``M_*``
environment), ``compile_topology`` set to the workload's TPU type (``v5e-16`` for
``v5litepod-16``: MaxText's names) and ``compile_topology_num_slices`` to each slice count the
run can train on. That runs in the MaxText environment (``workload.maxtext_env``: MaxText needs
Python 3.12 and a stack of its own), through ``maxtext_compile.py`` (run there by path), which
adds one line of MaxText's resolved settings and its own TFLOPs a step.

Meshes: MaxText's elastic training (``elastic_enabled=true``, pathwaysutils' ``elastic_retry``)
trains on the slices it has, down to ``elastic_min_slice_count`` (-1, the default, waits for
every slice). The first compile's resolved settings say which, so a config file that sets them
counts too.

Judged as the trainer's own check judges: the compiled step's arguments, outputs less the
donated state, temporaries and code, against the chip's memory for programs
(``protocol.chips``). libtpu refuses only temporaries larger than the chip
(``CompileTimeHbmOom``): qwen3-1.7b at batch 8 on v5e-4 compiled, at 17.75 GiB a chip.

The report has the trainer check's shape (``views.fitcheck`` draws both) with
``"trainer": "maxtext"``; no TFLOP/s is predicted (the prediction is fitted to elastix's step).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastix.errors import UsageError
from elastix.protocol import chips, entrypoints
from elastix.workload import maxtext_env
from elastix.workload.trainer_command import MAXTEXT_ENV_PREFIX, TrainerCommand

TRAIN_MODULES = ("maxtext.trainers.pre_train.train",)
"""The modules whose step ``train_compile.py`` compiles (MaxText's pre-training trainer)."""
DRIVER = Path(__file__).with_name("maxtext_compile.py")
MARK = "ELASTIX-MAXTEXT-FIT"
"""The driver's result line (``maxtext_compile.MARK``)."""
SET_HERE = ("compile_topology", "compile_topology_num_slices")
"""MaxText keys the check sets itself, dropped from the command's."""
ENV_NAMES = ("LIBTPU_INIT_ARGS", "XLA_FLAGS")
TICK = 15.0
"""Seconds between the lines that say a long compile is still running."""
VERSIONS_TIMEOUT = 120.0
_SHELL_STOPS = {"&&", "||", ";", "|", "&"}
_STATS = re.compile(r"(\w+_size_in_bytes)=(\d+)")


@dataclasses.dataclass(frozen=True)
class MaxTextPlan:
    """What the check compiles for a MaxText head: its argv, env and the TPU target."""

    python: str
    argv: tuple[str, ...]  # MaxText's: the config file, then key=value
    env: tuple[tuple[str, str], ...]
    tpu_type: str
    compile_topology: str  # MaxText's name: v5e-16
    generation: str
    chips_per_slice: int
    slices: int
    versions: tuple[tuple[str, str], ...]

    @property
    def config_file(self) -> str | None:
        """The config file when it is a file here (hashed into the key)."""
        first = self.argv[0] if self.argv else ""
        return first if first.endswith((".yml", ".yaml")) and os.path.isfile(first) else None

    def key(self) -> str:
        """The cache key: everything the report depends on."""
        parts = {"trainer": "maxtext", "argv": self.argv, "env": self.env,
                 "topology": self.compile_topology, "slices": self.slices,
                 "versions": self.versions,
                 "driver": hashlib.sha256(DRIVER.read_bytes()).hexdigest()}
        if self.config_file:
            parts["config"] = hashlib.sha256(Path(self.config_file).read_bytes()).hexdigest()
        text = json.dumps(parts, sort_keys=True, default=list)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def maxtext_argv(words: list[str]) -> tuple[str, list[str]] | None:
    """(the module, MaxText's argv after it, up to a shell operator) of ``python -m <module>``;
    None when no MaxText module is run with ``-m``."""
    for i, w in enumerate(words[:-1]):
        if w == "-m" and re.match(r"^(?:maxtext|MaxText)(?:\.|$)", words[i + 1]):
            rest = words[i + 2:]
            end = next((j for j, x in enumerate(rest) if x in _SHELL_STOPS), len(rest))
            return words[i + 1], rest[:end]
    return None


def env_versions(python: str) -> dict[str, str] | None:
    """maxtext, JAX, jaxlib and libtpu in the MaxText environment (read without importing
    them); None when its Python does not run."""
    code = ("import importlib.metadata as m, json\n"
            "def v(d):\n"
            "    try: return m.version(d)\n"
            "    except m.PackageNotFoundError: return ''\n"
            "print(json.dumps({d: v(d) for d in ('maxtext', 'jax', 'jaxlib', 'libtpu')}))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True,
                             timeout=VERSIONS_TIMEOUT, stdin=subprocess.DEVNULL)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def plan(spec, cmd: TrainerCommand) -> MaxTextPlan | tuple[str, str | None]:
    """What to compile for a MaxText head, or (why nothing can be, what would change that)."""
    found = maxtext_argv(cmd.words())
    if found is None or found[0] not in TRAIN_MODULES:
        what = f"MaxText's {found[0]}" if found else "MaxText in a way elastix cannot read"
        return (f"the command runs {what}, not its pre-training trainer "
                f"({TRAIN_MODULES[0]})", "compile it with MaxText's own train_compile.py "
                "(docs/maxtext.md, \"Before you pay\")")
    _, argv = found
    argv = [a for a in argv if a.split("=", 1)[0] not in SET_HERE]
    python = maxtext_env.python(os.environ)
    if not os.access(python, os.X_OK):
        return (f"no MaxText environment here ({python})", maxtext_env.SETUP_HINT)
    versions = env_versions(python)
    if versions is None:
        return (f"the MaxText environment's Python {python} did not run",
                maxtext_env.SETUP_HINT)
    if not versions.get("maxtext"):
        return (f"{python} has no maxtext installed", maxtext_env.SETUP_HINT)
    if not versions.get("libtpu"):
        return (f"the MaxText environment ({python}) has no libtpu, JAX's TPU compiler",
                f"{python} -m pip install 'jax[tpu]=={versions.get('jax')}'; no chip needed")
    tpu = spec.tpu
    size = tpu.name.rsplit("-", 1)[1]
    env = tuple(sorted((k, v) for k, v in cmd.env.items()
                       if k.startswith(MAXTEXT_ENV_PREFIX) or k in ENV_NAMES))
    return MaxTextPlan(python=python, argv=tuple(argv), env=env, tpu_type=tpu.name,
                       compile_topology=f"{tpu.generation}-{size}", generation=tpu.generation,
                       chips_per_slice=tpu.chips, slices=spec.num_slices,
                       versions=tuple(sorted(versions.items())))


def peak(memory: dict[str, int]) -> int:
    """Arguments + outputs - aliased (the donated state) + temporaries + code: what the
    trainer's own check (``fit.peak_bytes``) holds against the chip."""
    return (memory["arguments"] + memory["outputs"] - memory["aliased"]
            + memory["temporaries"] + memory["code"])


def read_stats(text: str) -> dict[str, int] | None:
    """``Memory analysis: CompiledMemoryStats(...)`` as train_compile.py prints it."""
    line = next((ln for ln in text.splitlines() if ln.startswith("Memory analysis:")), None)
    if line is None:
        return None
    got = {k: int(v) for k, v in _STATS.findall(line)}
    names = {"arguments": "argument_size_in_bytes", "outputs": "output_size_in_bytes",
             "aliased": "alias_size_in_bytes", "temporaries": "temp_size_in_bytes",
             "code": "generated_code_size_in_bytes"}
    if not all(v in got for v in names.values()):
        return None
    return {k: got[v] for k, v in names.items()}


def _failure(stderr: str) -> str:
    """The line that says why MaxText failed: a traceback's last line, else the last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception|Exit)\b.*:", ln):
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def compile_mesh(p: MaxTextPlan, slices: int, chip: chips.Chip,
                 progress: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compile MaxText's step for ``slices`` slices: (the mesh's row, the driver's result:
    MaxText's settings and how it compiled)."""
    n_chips = slices * p.chips_per_slice
    what = f"{slices} slice{'s' if slices > 1 else ''} ({n_chips} chips)"
    progress(f"{what}: compiling MaxText's step (train_compile.py)")
    cmd = [p.python, str(DRIVER), *p.argv, f"compile_topology={p.compile_topology}",
           f"compile_topology_num_slices={slices}"]
    # JAX's CPU client for all but the compile; no GCE metadata server; libtpu without its
    # machine-wide lock file; MaxText's Google Cloud parts stubbed (no credentials here); the
    # MaxText environment's own libtpu, never one a TPU_LIBRARY_PATH names (importing libtpu
    # sets it: a JAX 0.10 process's libtpu made JAX 0.12's compile fail on a proto field)
    env = {**os.environ, **dict(p.env), "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1",
           "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "DECOUPLE_GCLOUD": "TRUE",
           "PYTHONUNBUFFERED": "1"}
    env.pop("TPU_LIBRARY_PATH", None)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="elastix-maxtext-fit-") as tmp:
        out_path, err_path = Path(tmp) / "out", Path(tmp) / "err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=tmp,
                                    stdin=subprocess.DEVNULL)
            try:
                while True:
                    try:
                        code = proc.wait(timeout=TICK)
                        break
                    except subprocess.TimeoutExpired:
                        progress(f"{what}: still compiling ({time.monotonic() - t0:.0f} s)")
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
    seconds = round(time.monotonic() - t0, 1)
    result = next((json.loads(ln[len(MARK):]) for ln in stdout.splitlines()
                   if ln.startswith(MARK + " ")), None)
    if code != 0 or result is None:
        raise UsageError(f"fit check: MaxText's train_compile.py failed for {what} of "
                         f"{p.tpu_type}: {_failure(stderr)}",
                         hint="the same command with MaxText's own train_compile.py shows "
                              "the whole error; --no-fit-check skips the check")
    settings = result.get("settings") or {}
    row: dict[str, Any] = {"slices": slices, "chips": n_chips, "seconds": seconds,
                           "global_batch": settings.get("global_batch_size_to_train_on")}
    row.update(remat_policy=settings.get("remat_policy"),
               loss_tiles=settings.get("num_vocab_tiling"),
               attention=settings.get("attention"),
               scan_layers=bool(settings.get("scan_layers", True)))
    tflops = result.get("tflops_per_device")
    if tflops:
        row["flops_per_step"] = tflops * 1e12 * n_chips
    if not result.get("fits"):
        row.update(fits=False, error=result.get("error") or "out of memory",
                   hint="lower per_device_batch_size, or set remat_policy=full")
        progress(f"{what}: does not fit ({seconds:.0f} s)")
        return row, result
    memory = read_stats(stdout)
    if memory is None:
        raise UsageError(f"fit check: MaxText's train_compile.py printed no memory analysis "
                         f"for {what}", hint="--no-fit-check skips the check")
    need = peak(memory)
    row.update(hbm=need, limit=chip.limit, memory=memory, fits=need <= chip.limit)
    if not row["fits"]:
        gib = 1 << 30
        row.update(error=f"the step needs {need / gib:.2f} GiB a chip, the chip has "
                         f"{chip.limit / gib:.2f} GiB",
                   hint="lower per_device_batch_size, or set remat_policy=full")
        progress(f"{what}: does not fit ({seconds:.0f} s)")
    else:
        progress(f"{what}: compiled in {seconds:.0f} s: {need / (1 << 30):.2f} of "
                 f"{chip.limit / (1 << 30):.2f} GiB a chip")
    return row, result


def slice_counts(settings: dict[str, Any], total: int) -> list[int]:
    """The meshes MaxText's elastic training can meet, largest first (module docstring)."""
    least = settings.get("elastic_min_slice_count")
    if not settings.get("elastic_enabled") or not isinstance(least, int) or least < 1:
        return [total]
    return list(range(total, min(least, total) - 1, -1))


def elastic_mode(settings: dict[str, Any], total: int) -> str:
    if not settings.get("elastic_enabled"):
        return "MaxText, not elastic"
    counts = slice_counts(settings, total)
    if len(counts) == 1:
        return "MaxText elastic, waits for every slice"
    return f"MaxText elastic, down to {counts[-1]} slice{'s' if counts[-1] > 1 else ''}"


def run(p: MaxTextPlan, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Compile ``p`` for each mesh and return the report (module docstring).

    Raises:
        UsageError: MaxText refused its config or the compile failed (its line).
    """
    chip = chips.BY_GENERATION.get(p.generation)
    if chip is None:
        raise UsageError(f"fit check: no chip facts for {p.generation}",
                         hint="the fit check knows v5e, v6e, v5p and v4")
    t0 = time.monotonic()
    first, result = compile_mesh(p, p.slices, chip, progress)
    settings = result.get("settings") or {}
    meshes = [first]
    for n in slice_counts(settings, p.slices)[1:]:
        meshes.append(compile_mesh(p, n, chip, progress)[0])
    versions = dict(p.versions)
    return {
        "version": entrypoints.FIT_CHECK_VERSION,
        "trainer": "maxtext",
        "model": settings.get("model_name") or "MaxText's model",
        "batch_per_device": settings.get("per_device_batch_size"),
        "seq_len": settings.get("max_target_length"),
        "elastic_mode": elastic_mode(settings, p.slices),
        "topology": p.compile_topology,
        "slices": p.slices,
        "chips_per_slice": p.chips_per_slice,
        "chip": {"generation": chip.generation, "kind": chip.device_kind, "limit": chip.limit,
                 "limit_source": chip.limit_source, "peak_flops": chip.peak_flops},
        "meshes": meshes,
        "versions": versions,
        "seconds": round(time.monotonic() - t0, 1),
        "tpu_type": p.tpu_type,
        "elastic_compiled_off": bool(result.get("elastic_compiled_off")),
    }
