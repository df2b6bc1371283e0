"""The trainer's configuration: one dataclass, filled from a YAML/JSON file and flags.

Precedence: flags > ``--config FILE`` > defaults. Environment: ``ELASTIX_EVENTS_FILE`` overrides
the events path (the local backend sets it). Every problem is reported at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import math
import os
import re
from typing import Any

from elastix.errors import ProblemsError, UsageError
from elastix.protocol import entrypoints, envvars
from elastix_trainer.kernels import ATTENTIONS, REMAT_POLICIES

MODES = ("pause-resume", "replica-resize")
COPY_MODES = ("auto", "sync", "staged", "overlap")
"""``--snapshot-copy``: how the host copies of the state are taken."""


class ConfigError(ProblemsError):
    """Bad trainer configuration; ``problems`` lists every bad field."""

    subject = "in the trainer config"

    def __init__(self, problems: list[tuple[str, str, str | None]]) -> None:
        super().__init__(problems)
        if len(problems) > 1:
            # The trainer's boundary prints one line (no list under it): the problems go in it.
            self.message = f"{self.message}: " + "; ".join(self.lines())


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run needs (each field is also a ``--flag``)."""

    preset: str = "tiny"
    """Model preset (the choices are listed in --help)."""
    model_config: str | None = None
    """A Hugging Face ``config.json`` of a dense Qwen3 or Llama model (local path or ``gs://``):
    the model's shape, instead of ``--preset``'s; a field the trainer does not implement
    (experts, sliding windows, biases, another RoPE scaling) is refused by name."""
    steps: int = 100
    """Optimizer steps to run (the final step count, including resumed steps)."""
    batch_per_device: int = 2
    """Sequences per device per step; global batch = this x devices in the mesh."""
    seq_len: int = 64
    """Tokens per sequence."""
    lr: float = 3e-3
    """Peak learning rate."""
    warmup_steps: int = 10
    """Linear warm-up steps."""
    lr_schedule: str = "cosine"
    """``cosine`` or ``constant`` after warm-up."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    seed: int = 0
    """Seeds the parameters and the data order."""
    data: str = "synthetic"
    """``synthetic`` or an ArrayRecord directory/glob, local or ``gs://`` (see ``prepare-data``)."""
    dtype: str = "auto"
    """Activations: ``auto`` (bf16 on TPU, f32 elsewhere), ``float32`` or ``bfloat16``."""
    attention: str = "autoselected"
    """Attention kernel, as MaxText names it: ``flash`` (the Pallas TPU splash kernel, which
    never holds the [seq, seq] scores; TPU only), ``dot_product`` (plain, the scores in
    float32), or ``autoselected`` (flash on TPU where the shape allows, else dot_product)."""
    remat_policy: str = "auto"
    """What the layers keep for the backward pass, MaxText's names: none (everything),
    minimal_with_context (every matmul's output and the attention's), minimal,
    save_dot_except_mlpwi, save_dot_except_mlp, save_qkv_proj, save_out_proj, full (only each
    layer's input); ``auto``: none off TPU, on TPU the first of minimal_with_context, minimal,
    save_dot_except_mlp, save_qkv_proj, full whose compiled step fits the chip's memory.
    Recomputed work is not counted in the printed TFLOP/s."""
    num_vocab_tiling: int = 0
    """Compute the loss's [tokens, vocab] float32 logits in this many tiles of the vocabulary,
    each computed again in the backward pass instead of kept (MaxText's name); 1: whole; 0:
    auto: on TPU whole where the step still fits the chip's memory (faster: nothing computed
    again), else, and off TPU, tiles of at most 256 MiB of logits per device."""
    sa_block: int = 0
    """The splash attention kernel's block size, every one of its blocks alike (MaxText sets
    each with its ``sa_block_*``), a multiple of 128, clipped to ``--seq-len``; 0: 1024, the
    fastest measured on a v5e chip (docs/benchmarks.md)."""
    sa_use_fused_bwd_kernel: bool = True
    """The splash kernel's backward as one kernel for dq, dk and dv (MaxText's name): 4 % faster
    on a v5e chip, with less memory."""
    scan_layers: bool = True
    """Run the layers as one ``lax.scan`` over a compiled layer (MaxText's ``scan_layers``, True
    in its ``src/maxtext/configs/base.yml``), or unrolled, one after another: on a v5e chip
    10-18 % faster (bench-1g batch 16 85.5 -> 94.6 TFLOP/s; qwen3-0.6b batch 8 90.1 -> 106.1),
    but the compile grows with depth (qwen3-0.6b 7 -> 77 s, paid again by every new mesh a
    resize compiles) and more stays alive at once (qwen3-0.6b batch 16 no longer fits)."""
    num_slices: int | None = None
    """CPU only: slices to group the devices into (``ELASTIX_NUM_SLICES`` wins)."""
    checkpoint_dir: str | None = None
    """Local path or gs:// URL; no checkpoints when unset."""
    checkpoint_period: int = 50
    """Save every N steps (0: only the final step)."""
    continuous_checkpointing: bool = False
    """Start a new save as soon as the previous one committed."""
    async_checkpoint: bool = True
    """Write checkpoints in the background."""
    max_to_keep: int = 3
    """Intact committed checkpoints to keep; damaged ones are kept too, uncounted."""
    term_save_timeout: float = 20.0
    """On SIGTERM: seconds to spend committing a last checkpoint before exiting 143. Keep it
    under the head pod's grace period (Kubernetes' default terminationGracePeriodSeconds is
    30 s; the kubelet SIGKILLs after that)."""
    watchdog_timeout: float | None = None
    """Seconds without any event (step, checkpoint, recovery phase) before the run fails with
    every thread's stack logged (exit 3); default: the longer of --slice-wait-timeout and
    --checkpoint-timeout plus 10 minutes; 0 turns it off. Start-up (until the first step is
    compiled and the state restored) is bounded by at least that default."""
    checkpoint_timeout: float = 1200.0
    """Seconds a background checkpoint write may take before it counts as failed (Orbax's own
    default); a hung write then fails the run instead of stalling it silently."""
    steps_in_flight: int = 0
    """Steps dispatched and not yet read by the loop (0, the default: 1 on CPU; on an
    accelerator as many as about 1.5 s of steps, at most 16). A step's failure still
    surfaces at once (the loop waits on the oldest); more in flight keep the chip busy while
    the loop's Python thread waits, e.g. for the GIL that a checkpoint's background write held
    for up to a second on a v5e chip; a stop or a drain then waits for them all."""
    snapshot_period: int = 0
    """Copy the state to host memory every K steps (0: off); recovery uses the newest copy."""
    snapshot_copy: str = "auto"
    """How a host copy of the state (a snapshot, a checkpoint's) is taken: ``sync``, at the
    step boundary, the loop waiting for it; ``staged``, copied on the devices at the boundary
    (milliseconds) and read to host memory in the background while the next steps run (the
    copy counts once it is whole); ``overlap``, by the next step while it computes (into
    pinned host memory); ``auto`` (the default), ``staged`` where a second state fits in
    device memory beside the compiled step, else ``sync`` (always ``sync`` on CPU, where the
    boundary copy is a memcpy). On a v5e chip ``overlap`` was slower (docs/benchmarks.md)."""
    events_file: str | None = None
    """JSONL event log; default ``<checkpoint-dir>/events.jsonl`` (env ELASTIX_EVENTS_FILE wins)."""
    tensorboard_dir: str | None = None
    """Write TensorBoard scalars here (a directory or gs:// URL): loss, step time, TFLOP/s, live
    slices, checkpoint stalls and every recovery phase, at the step each belongs to."""
    ml_goodput_logger: str | None = None
    """Also write ml-goodput-measurement's records (the goodput MaxText records) to this Cloud
    Logging log, for the library's calculator and dashboards (needs elastix[goodput]; locally
    they always go to ``<events>.ml-goodput.jsonl``)."""
    elastic_mode: str = entrypoints.ELASTIC_MODE
    """``pause-resume`` (wait for every slice) or ``replica-resize`` (go on with survivors)."""
    min_slices: int | None = None
    """replica-resize: fewest slices to train on (default: all slices - 1, at least 1)."""
    max_slice_losses: int = entrypoints.MAX_SLICE_LOSSES
    """Slice-loss recoveries allowed before giving up (MaxText's elastic_max_retries); under
    ``elastix workload create`` the workload's budget, ``ELASTIX_MAX_SLICE_LOSSES`` (its
    ``--max-slice-restarts`` x slices), unless given."""
    max_other_errors: int = 0
    """Retries (from the last checkpoint) for errors that are not slice loss."""
    slice_wait_timeout: float = entrypoints.SLICE_WAIT_TIMEOUT
    """Seconds to wait for enough slices after a loss before failing."""
    step_delay: float = 0.0
    """Extra sleep per step in seconds (slow local demos down so a worker can be killed)."""
    compilation_cache_dir: str | None = None
    """JAX's persistent compilation cache (local path or gs://; ``off``: none), so a restarted
    run loads its compiled step instead of compiling it; default: ``$JAX_COMPILATION_CACHE_DIR``
    if set, else on the local backend the one its workloads share
    (``$ELASTIX_LOCAL_COMPILATION_CACHE``, ``<state-dir>/.cache/jax``), else
    ``<checkpoint-dir>/jax-cache`` for a gs:// checkpoint dir, else off."""

    @property
    def model_name(self) -> str:
        """The model as a log line names it: the preset, or the config file's path."""
        return self.model_config or self.preset

    def resolved_events_file(self) -> str | None:
        """Where events go: env ELASTIX_EVENTS_FILE, else --events-file, else under checkpoints."""
        env = os.environ.get(envvars.EVENTS_FILE)
        if env:
            return env
        if self.events_file:
            return self.events_file
        if self.checkpoint_dir:
            return self.checkpoint_dir.rstrip("/") + "/events.jsonl"
        return None

    def validate(self) -> None:
        """Raise ConfigError listing every bad field."""
        from elastix_trainer.model import PRESETS  # JAX: not for --help

        p: list[tuple[str, str, str | None]] = []
        if self.model_config is not None:
            from elastix_trainer.model import from_file

            try:
                from_file(self.model_config)
            except UsageError as e:
                p.append(("model_config", e.message.removeprefix("--model-config "), e.hint))
        elif self.preset not in PRESETS:
            near = difflib.get_close_matches(self.preset, PRESETS, n=1)
            p.append(("preset", f"unknown preset {self.preset!r}",
                      f"did you mean {near[0]}?" if near else f"one of {', '.join(PRESETS)}"))
        for name in ("steps", "batch_per_device", "seq_len", "max_to_keep"):
            if getattr(self, name) < 1:
                p.append((name, f"must be at least 1, got {getattr(self, name)}", None))
        for name in ("checkpoint_period", "snapshot_period", "warmup_steps", "max_slice_losses",
                     "max_other_errors"):
            if getattr(self, name) < 0:
                p.append((name, f"must be 0 or more, got {getattr(self, name)}", None))
        if not 0 < self.lr < math.inf:
            p.append(("lr", f"must be a positive, finite number, got {self.lr}", "e.g. 3e-4"))
        if not 0 <= self.weight_decay < math.inf:
            p.append(("weight_decay", f"must be a finite number, 0 or more, got "
                                      f"{self.weight_decay}", "e.g. 0.01"))
        for name in ("slice_wait_timeout", "step_delay"):
            if not 0 <= getattr(self, name) < math.inf:
                p.append((name, f"must be a finite number of seconds, 0 or more, got "
                                f"{getattr(self, name)}", None))
        if not 0 <= self.term_save_timeout < math.inf:
            p.append(("term_save_timeout", f"must be a finite number of seconds, 0 or more, got "
                                           f"{self.term_save_timeout}", "e.g. 20"))
        if self.watchdog_timeout is not None and not 0 <= self.watchdog_timeout < math.inf:
            p.append(("watchdog_timeout", f"must be a finite number of seconds, 0 or more, got "
                                          f"{self.watchdog_timeout}", "e.g. 1800, or 0 for off"))
        if not 0 < self.checkpoint_timeout < math.inf:
            p.append(("checkpoint_timeout", f"must be a positive, finite number of seconds, got "
                                            f"{self.checkpoint_timeout}", "e.g. 1200"))
        if self.lr_schedule not in ("cosine", "constant"):
            p.append(("lr_schedule", f"unknown schedule {self.lr_schedule!r}", "cosine or constant"))
        for name, choices in (("attention", ATTENTIONS), ("remat_policy", REMAT_POLICIES)):
            value = getattr(self, name)
            if value not in choices:
                near = difflib.get_close_matches(str(value), choices, n=1)
                p.append((name, f"unknown {name.replace('_', ' ')} {value!r}",
                          (f"did you mean {near[0]}? " if near else "") + "one of "
                          + ", ".join(choices)))
        if self.num_vocab_tiling < 0:
            p.append(("num_vocab_tiling", f"must be 0 (auto) or more, got {self.num_vocab_tiling}",
                      None))
        if self.sa_block < 0 or self.sa_block % 128:
            p.append(("sa_block", f"must be 0 (auto) or a multiple of 128, got {self.sa_block}",
                      "e.g. 512 or 1024"))
        if not 0 <= self.steps_in_flight <= 64:
            p.append(("steps_in_flight", f"must be 0 (auto) to 64, got {self.steps_in_flight}",
                      "e.g. 0, or 1 for one step in flight"))
        if self.snapshot_copy not in COPY_MODES:
            p.append(("snapshot_copy", f"unknown snapshot copy {self.snapshot_copy!r}",
                      "one of " + ", ".join(COPY_MODES)))
        if self.dtype not in ("auto", "float32", "bfloat16"):
            p.append(("dtype", f"unknown dtype {self.dtype!r}", "auto, float32 or bfloat16"))
        if self.elastic_mode not in MODES:
            p.append(("elastic_mode", f"unknown mode {self.elastic_mode!r}", " or ".join(MODES)))
        if self.num_slices is not None and self.num_slices < 1:
            p.append(("num_slices", f"must be at least 1, got {self.num_slices}", None))
        if self.min_slices is not None and self.min_slices < 1:
            p.append(("min_slices", f"must be at least 1, got {self.min_slices}", None))
        if self.min_slices is not None and self.elastic_mode == "pause-resume":
            p.append(("min_slices", "only applies to --elastic-mode replica-resize",
                      "drop --min-slices or add --elastic-mode replica-resize"))
        ck = self.checkpoint_dir
        if ck and not ck.startswith("gs://") and os.path.exists(ck) and not os.path.isdir(ck):
            p.append(("checkpoint_dir", f"{ck} is a file, not a directory",
                      "point --checkpoint-dir at a directory (it is created if missing)"))
        if self.continuous_checkpointing and not self.checkpoint_dir:
            p.append(("continuous_checkpointing", "needs --checkpoint-dir", None))
        if p:
            raise ConfigError(p)


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
_METAVARS = {"steps_in_flight": "N", "model_config": "FILE"}
"""A flag's value name where its field's last word would mislead (``--steps-in-flight FLIGHT``)."""
_BOOLS = {name for name, f in _FIELDS.items() if f.type == "bool"}


def _coerce(name: str, value: Any) -> Any:
    typ = _FIELDS[name].type
    if value is None:
        return None
    try:
        if name in _BOOLS:
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    return True
                if value.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            return bool(value)
        if "int" in typ:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if "float" in typ:
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError([(name, f"{value!r} is not a valid {typ.split(' |')[0]}", None)]) from None


def _read_file(path: str) -> dict:
    if os.path.isdir(path):
        raise ConfigError([("config", f"{path} is a directory, not a file",
                            "give --config a YAML or JSON file")])
    if not os.path.isfile(path):
        raise ConfigError([("config", f"file not found: {path}", None)])
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise ConfigError([("config", f"cannot parse {path}: not UTF-8 text (byte {e.start})",
                            None)]) from None
    try:
        if path.endswith(".json"):
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as e:  # yaml and json both: one line is enough
        raise ConfigError([("config", f"cannot parse {path}: {str(e).splitlines()[0]}", None)]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([("config", f"{path} must hold a mapping of option: value", None)])
    return data


def from_mapping(values: dict) -> TrainConfig:
    """A validated config from a mapping (keys with dashes or underscores)."""
    cfg = TrainConfig()
    problems = []
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in _FIELDS:
            near = difflib.get_close_matches(name, _FIELDS, n=1)
            problems.append((str(key), "unknown option",
                             f"did you mean {near[0].replace('_', '-')}?" if near else None))
            continue
        try:
            setattr(cfg, name, _coerce(name, value))
        except ConfigError as e:
            problems.extend(e.problems)
    if problems:
        raise ConfigError(problems)
    cfg.validate()
    return cfg


@functools.cache
def _field_docs() -> dict[str, str]:
    """The attribute docstrings of TrainConfig, for --help (parsed once a process: the flags are
    built for every parse)."""
    import ast
    import inspect

    body = ast.parse(inspect.getsource(TrainConfig)).body[0].body
    docs = {}
    for prev, node in zip(body, body[1:], strict=False):
        if (isinstance(prev, ast.AnnAssign) and isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)):
            text = " ".join(str(node.value.value).split())  # one paragraph, as argparse
            docs[prev.target.id] = re.sub(r"``(.+?)``", r"\1", text).replace("%", "%%")
    return docs


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing its usage block and exiting: a bad command
    line is one ``error:`` line with a did-you-mean, like every other input error."""

    def error(self, message: str):  # type: ignore[override]
        hint = "see elastix-train --help"
        unknown = [a for a in message.split(": ", 1)[-1].split() if a.startswith("--")]
        if message.startswith("unrecognized arguments") and unknown:
            flags = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            near = difflib.get_close_matches(unknown[0].split("=")[0], flags, n=1)
            if near:
                hint = f"did you mean {near[0]}?"
        raise ConfigError([("flags", message, hint)])


def preset_names() -> list[str]:
    """The model presets' names, read from ``model.py``'s source: importing it imports JAX,
    seconds that ``--help`` should not cost (``tests/trainer`` checks the two agree)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("elastix_trainer.model")
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())  # type: ignore[union-attr]
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "PRESETS" and \
                isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    return []


def _default_text(name: str, doc: str) -> str:
    """A field's default as ``--help`` shows it (``(default: 50)``; unset ones say so, unless
    their doc already says what unset means: ``default: the longer of ...``)."""
    value = _FIELDS[name].default
    if value is None and "default" in doc:
        return ""
    if name in _BOOLS:
        shown = "--" + ("" if value else "no-") + name.replace("_", "-")
    elif value is None:
        shown = "unset"
    elif isinstance(value, float):
        shown = f"{value:g}"
    else:
        shown = str(value)
    return f" (default: {shown})"


def build_parser() -> argparse.ArgumentParser:
    """``elastix-train`` flags; every default is SUPPRESS so only given flags override, and
    each flag's help ends with the default it leaves (argparse's own ``%(default)s`` would
    show SUPPRESS)."""
    ap = _Parser(
        prog="elastix-train", argument_default=argparse.SUPPRESS,
        description="Train a Qwen3-style LM on a slice mesh with elastic recovery. "
                    "`elastix-train prepare-data --help` turns text into ArrayRecord shards.")
    ap.add_argument("--config", help="YAML or JSON file of options (flags override it)")
    docs = _field_docs()
    for name in _FIELDS:
        flag = "--" + name.replace("_", "-")
        doc = docs.get(name, "")
        if name == "preset":
            doc = f"Model preset: {', '.join(preset_names())}."
        doc += _default_text(name, doc).replace("%", "%%")
        if name in _BOOLS:
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, help=doc)
        else:
            metavar = _METAVARS.get(name, name.split("_")[-1].upper())
            ap.add_argument(flag, dest=name, metavar=metavar, help=doc)
    return ap


def parse_args(argv: list[str]) -> TrainConfig:
    """Flags (and ``--config``) -> validated TrainConfig."""
    ap = build_parser()
    ns = ap.parse_args(argv)  # --help exits 0; a bad command line raises ConfigError
    values = vars(ns)
    merged = _read_file(values.pop("config")) if "config" in values else {}
    merged.update(values)
    budget = os.environ.get(envvars.MAX_SLICE_LOSSES)
    if budget and not ({"max_slice_losses", "max-slice-losses"} & set(merged)):
        # The workload's own budget (its slice restarts x slices, set by the launcher): the
        # trainer never gives up on a loss the JobSet would still replace.
        merged["max_slice_losses"] = budget
    return from_mapping(merged)
