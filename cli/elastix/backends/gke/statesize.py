"""Preflight: will a restore fit through the head pod's memory? (The seed's own failure.)

Without Pathways persistence a restore is read by Orbax on the controller (the head's main
container) and pushed to the TPUs through the ``pathways-proxy`` container: with Qwen3-4B the
proxy (100 G limit) was OOM-killed on every restore, and the fix was
``ENABLE_PATHWAYS_PERSISTENCE=1``, where each TPU host reads and writes its own shards
(the published elastic run's notes, docs/gke.md "State size"; MaxText 0.2.5 registers Orbax's
persistence handler when it is set, ``training_engine/checkpointing.py`` L46-80, maxtext#5234:
"avoid host RAM materialization and OOMs"; pathwaysutils 0.1.13 ``_initialize.py`` L45-67).

What a restore moves, sized before anything is submitted:

1. the newest committed step under the trainer's checkpoint directory on Cloud Storage (a
   listing of its objects' sizes, nothing downloaded): elastix-train's ``--checkpoint-dir``,
   MaxText's ``<base_output_directory>/<run_name>/checkpoints`` (``maxtext/configs/types.py``
   L5917 of 0.2.5); a step is committed when it holds ``commit_success.txt`` (Orbax on GCS,
   ``elastix_trainer.state.store``);
2. else, for a first run, the state its flags imply: elastix-train's preset
   (:func:`elastix.protocol.presets.state_bytes`), MaxText's ``model_name`` where it names a model
   of :data:`MAXTEXT_PARAMS` (parameters and AdamW's two moments in float32, MaxText's
   ``weight_dtype`` default: 12 bytes a parameter);
3. else it cannot be sized, which is said once (a notice), never refused.

Each slice holds a replica of the state, and without persistence the controller reads it for
every slice and pushes each through the proxy (elastix's own restore on Pathways reads
replicated state once per slice: the 2026-12-01 audit's B2, "about 3x restore time and proxy
traffic on 3 slices"); so what moves is the state times the
slices. Qwen3-4B's state is about 45 GiB (4.0 B parameters x 12 bytes), and three slices make
the seed's 135 GiB. That is compared with the proxy's memory limit, and one copy of the state
with the main container's (the controller holds what it reads): where the larger share is above
the limit (:data:`REFUSE_FRACTION`) the workload is refused (exit 2) with the numbers and both fixes; above
:data:`WARN_FRACTION` a notice warns. With persistence on nothing goes through them, and the
check passes.

Persistence stays off by default, deliberately: xpk 1.16 and pathways-job never set it, the
MaxText elastic guide's run goes without it, and elastix-train saves with Orbax's default
OCDBT format, which MaxText says to turn off for Pathways persistence
(``docs/guides/checkpointing_solutions/gcs_checkpointing.md``; the audit's B3): turning
it on for every ``gs://`` run would move every run onto an I/O path no anchor runs by default,
for a benefit only a large state needs. This check is what makes the large state safe: it
names ``--pathways-persistence`` exactly when it is needed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from elastix.protocol import modelconfig
from elastix.protocol.modelconfig import param_count
from elastix.protocol.presets import state_bytes
from elastix.workload import labels, platform
from elastix.workload.lint import PATHWAYS_CHECKPOINT_KEYS
from elastix.workload.manifest import replicated_job
from elastix.workload.trainer_command import (
    TrainerCommand,
    flag,
    head_containers,
    key,
    trainer_command,
)

REFUSE_FRACTION = 1.0
"""Refuse only above the limit itself: a restore larger than the container's memory is what
OOM-killed the seed's proxy on every restore. Below it the run may fit (the proxy is closed
source: no upstream confirms the size model), so nearer the limit is a warning, never a gate
stricter than the platform (issue 47)."""
WARN_FRACTION = 0.5
"""Warn above this share: the proxy and the controller need memory of their own (buffers, the
Python and JAX runtime), and a state that grows (a bigger model, more slices) will not fit."""

LIST_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds of each page of the checkpoint listing, which is made once."""
GIB = 2 ** 30
COMMIT_MARKER = "commit_success.txt"
BYTES_PER_PARAM = 12
"""float32 parameters and AdamW's two float32 moments (optax ``adamw``; MaxText's
``weight_dtype`` and ``mu_dtype`` default to float32, ``configs/base.yml``)."""

MAXTEXT_PARAMS: dict[str, float] = {
    # Parameters of the dense models MaxText names (``configs/models/<name>.yml``), from their
    # model cards ("Number of Parameters"): Qwen3 (huggingface.co/Qwen/Qwen3-*), Llama 2
    # (arXiv:2307.09288 Table 1 rounded up to the released sizes), Llama 3/3.1/3.3
    # (huggingface.co/meta-llama), Gemma (arXiv:2403.08295 Table 2), Mistral 7B.
    "qwen3-0.6b": 0.6e9, "qwen3-1.7b": 1.7e9, "qwen3-1.7b-base": 1.7e9, "qwen3-4b": 4.0e9,
    "qwen3-4b-base": 4.0e9, "qwen3-4b-thinking-2507": 4.0e9, "qwen3-8b": 8.2e9,
    "qwen3-8b-base": 8.2e9, "qwen3-14b": 14.8e9, "qwen3-14b-base": 14.8e9, "qwen3-32b": 32.8e9,
    "llama2-7b": 6.74e9, "llama2-13b": 13.0e9, "llama2-70b": 69.0e9, "llama3-8b": 8.03e9,
    "llama3.1-8b": 8.03e9, "llama3-70b": 70.6e9, "llama3.1-70b": 70.6e9,
    "llama3.3-70b": 70.6e9, "llama3.1-405b": 405.9e9, "llama3-405b": 405.9e9,
    "gemma-2b": 2.51e9, "gemma-7b": 8.54e9, "mistral-7b": 7.24e9,
}


@dataclasses.dataclass(frozen=True)
class Restore(TrainerCommand):
    """What the rendered manifest says about a restore's path: the trainer's command line and
    literal env (:class:`TrainerCommand`), and the head's sizes."""

    slices: int
    persistence: bool
    proxy_memory: float | None  # bytes; None: no proxy (headless) or no limit
    head_memory: float | None  # the main container's limit, bytes


def _memory(container: dict[str, Any] | None) -> float | None:
    res = (container or {}).get("resources") or {}
    for kind in ("limits", "requests"):
        value = (res.get(kind) or {}).get("memory")
        if value is not None:
            try:
                return platform.quantity(value)
            except ValueError:
                return None
    return None


def restore_path(manifest: dict[str, Any]) -> Restore | None:
    """:class:`Restore` from a rendered JobSet; None when it has no head main container."""
    cmd = trainer_command(manifest)
    if cmd is None:
        return None
    containers = head_containers(manifest)
    worker = replicated_job(manifest, labels.WORKER_JOB) or {}
    return Restore(command=cmd.command, env=cmd.env, slices=int(worker.get("replicas", 1)),
                   persistence=cmd.env.get("ENABLE_PATHWAYS_PERSISTENCE") == "1",
                   proxy_memory=_memory(containers.get(labels.PROXY_CONTAINER)),
                   head_memory=_memory(containers.get(labels.MAIN_CONTAINER)))


def checkpoint_dir(r: Restore) -> str | None:
    """Where the trainer keeps its checkpoints, as its command line says."""
    words = r.words()
    if r.maxtext:
        base, run = key(words, "base_output_directory"), key(words, "run_name")
        explicit = key(words, "checkpoint_dir")
        if explicit:
            return explicit
        return f"{base.rstrip('/')}/{run}/checkpoints" if base and run else None
    return flag(words, "--checkpoint-dir", "--checkpoint_dir") or r.env.get(
        "ELASTIX_CHECKPOINT_DIR")


def newest_committed(uri: str, client: Any) -> tuple[int, int] | None:
    """``(step, bytes)`` of the newest committed step under ``uri`` (``gs://``), from one
    listing; None when no step is committed."""
    bucket, _, prefix = uri[5:].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    sizes: dict[int, int] = {}
    committed: set[int] = set()
    # Bounded: a preflight never waits on Cloud Storage's default retry (up to 120 s of
    # backoff, seen when storage.googleapis.com was unreachable: CI's loopback-only network); a
    # listing that fails is a notice (check), and create goes on.
    for blob in client.list_blobs(bucket, prefix=prefix, timeout=LIST_TIMEOUT, retry=None):
        first, _, rest = blob.name[len(prefix):].partition("/")
        if not first.isdigit() or not rest:
            continue
        step = int(first)
        sizes[step] = sizes.get(step, 0) + int(blob.size or 0)
        if rest == COMMIT_MARKER:
            committed.add(step)
    if not committed:
        return None
    step = max(committed)
    return step, sizes[step]


def first_run_bytes(r: Restore) -> tuple[int, str] | None:
    """The state a first run's flags imply, and how it was sized; None when they do not say."""
    words = r.words()
    if r.maxtext:
        model = key(words, "model_name")
        if model in MAXTEXT_PARAMS:
            params = MAXTEXT_PARAMS[model]
            return (round(params * BYTES_PER_PARAM),
                    f"MaxText model_name={model}: {params / 1e9:.2f} B parameters x "
                    f"{BYTES_PER_PARAM} bytes (float32 parameters and AdamW moments)")
        return None
    if not r.elastix_train:
        return None
    config = flag(words, "--model-config")
    if config:  # a local config.json is read; one in the image or on gs:// is not here
        try:
            with open(config, encoding="utf-8") as f:
                params = param_count(modelconfig.read(f.read(modelconfig.MAX_CONFIG_BYTES + 1),
                                                      config))
        except (OSError, UnicodeDecodeError, modelconfig.ModelConfigProblem):
            return None
        return (params * BYTES_PER_PARAM,
                f"elastix-train --model-config {config}: {params / 1e9:.2f} B parameters x "
                f"{BYTES_PER_PARAM} bytes (float32 parameters and AdamW moments)")
    preset = flag(words, "--preset") or "tiny"
    size = state_bytes(preset)
    if size is None:
        return None
    return size, f"elastix-train --preset {preset}: parameters and AdamW moments in float32"


def restore_line(manifest: dict[str, Any]) -> str | None:
    """What a first run's restore pushes through the head's pathways-proxy, in one line, sized
    offline from the trainer's flags (:func:`first_run_bytes`); None where it cannot be."""
    r = restore_path(manifest)
    if r is None:
        return None
    if r.persistence:
        return ("a restore: each TPU host reads its own shards (--pathways-persistence): "
                "nothing goes through the proxy")
    est = first_run_bytes(r)
    if est is None or not r.proxy_memory:
        return None
    size, _ = est
    slices = max(r.slices, 1)
    moved = size * slices
    verdict = ("; does not fit: --pathways-persistence" if moved > r.proxy_memory * REFUSE_FRACTION
               else "")
    return (f"a restore without Pathways persistence pushes {_gib(moved)} through the "
            f"pathways-proxy ({_gib(size)} x {slices} slice{'s' if slices > 1 else ''}) "
            f"against its {_gib(r.proxy_memory)} limit{verdict}")


@dataclasses.dataclass
class Verdict:
    problems: list[tuple[str, str, str | None]]  # (field, message, fix): refuse, exit 2
    notices: list[str]


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def check(manifest: dict[str, Any], storage: Any = None) -> Verdict:
    """Size what a restore moves and judge it against the head's memory (module docstring).

    ``storage``: a ``google.cloud.storage.Client``, or a callable making one (only asked for when
    the checkpoint directory is on ``gs://``); it failing is a notice, not a refusal.
    """
    out = Verdict([], [])
    r = restore_path(manifest)
    if r is None or r.persistence:
        return out
    if not (r.proxy_memory or r.head_memory):
        return out
    where = checkpoint_dir(r)
    size = how = None
    if where and where.startswith("gs://"):
        try:
            client = storage() if callable(storage) else storage
            found = newest_committed(where, client) if client is not None else None
        except Exception as e:  # noqa: BLE001 - no credentials, no bucket, no permission
            why = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            out.notices.append(f"preflight could not list {where} to size a restore ({why}); "
                               "the state's size was not checked against the head's memory")
            return out
        if found is not None:
            step, size = found
            how = f"the newest committed step {step} under {where}"
    if size is None:
        est = first_run_bytes(r)
        if est is None:
            out.notices.append("preflight cannot size the trainer's state (no committed step "
                               "under its checkpoint directory, and its flags name no known "
                               "model): a restore larger than the pathways-proxy's memory fails "
                               "unless --pathways-persistence is on")
            return out
        size, how = est
    slices = max(r.slices, 1)
    # (container, bytes through it, its limit, the flag that raises it): the proxy carries every
    # slice's replica; the controller reads them one slice at a time (one copy held).
    paths = [(c, n, lim, flag) for c, n, lim, flag in (
        ("pathways-proxy", size * slices, r.proxy_memory, "--proxy-memory"),
        (labels.MAIN_CONTAINER, size, r.head_memory, "--head-memory")) if lim]
    if not paths:
        return out
    name, moved, limit, _ = max(paths, key=lambda p: p[1] / p[2])
    share = moved / limit
    said = (f"a restore moves {_gib(moved)} through {name} ({how}: {_gib(size)}"
            + (f", x {slices} slices, each slice's replica through the proxy" if moved != size
               else "") + f") against its {_gib(limit)} memory limit")
    raise_ = " and ".join(f"{flag} above {_gib(n / REFUSE_FRACTION)}" for _, n, lim, flag in paths
                          if n / lim > WARN_FRACTION)
    # MaxText under persistence needs its checkpoint format for Pathways too (lint.
    # PATHWAYS_CHECKPOINT_KEYS: its GCS checkpointing guide, "Set to 0 for Pathways").
    fmt = (" with " + " ".join(f"{k}=false" for k in PATHWAYS_CHECKPOINT_KEYS)
           + " on MaxText's command line") if r.maxtext else ""
    fixes = ("pass --pathways-persistence (each TPU host reads its own shards: "
             f"ENABLE_PATHWAYS_PERSISTENCE=1){fmt}, or raise {raise_}")
    if share > REFUSE_FRACTION:
        out.problems.append(("state size", f"{said}: with persistence off it does not fit "
                             "(the proxy was OOM-killed on every restore of a 135 GiB state "
                             "against its 100 G limit)", fixes))
    elif share > WARN_FRACTION:
        out.notices.append(f"{said}: {share:.0%} of it, near the limit; {fixes}")
    return out
