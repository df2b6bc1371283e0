"""Does the compiled step fit the device's memory? Chosen and said before the first step.

The compiler knows what a step needs: ``Compiled.memory_analysis()`` gives the arguments, the
outputs (the donated state aliases its input) and the temporaries per device, and on TPU a
step that cannot fit fails to compile with ``RESOURCE_EXHAUSTED ... Used X of Y hbm``. Both are
read here, so a preset or a batch that cannot fit ends the run before its first step in one
line naming the memory it needs, the memory the device has and the flag that would make it
fit, instead of an XLA traceback; and ``--remat-policy auto`` and ``--num-vocab-tiling 0`` take
the fastest policy and loss whose step fits (:func:`ladder`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

import jax
import numpy as np

from elastix.errors import UsageError
from elastix.protocol import chips
from elastix_trainer.kernels import loss, remat
from elastix_trainer.model import ModelConfig
from elastix_trainer.obs.events import log

GIB = 1 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_OOM = re.compile(r"Used ([\d.]+)([KMGT]?) of ([\d.]+)([KMGT]?) hbm")


class DoesNotFit(UsageError):
    """The step needs more device memory than a device has (exit 2, before the first step)."""


def device_limit(mesh) -> int | None:
    """Bytes of memory a device of ``mesh`` has for programs (None where unknown: CPU). A
    device compiled for without a chip (a topology's abstract device, ``fitcheck``) cannot
    say: its chip's figure is taken from :mod:`chips`."""
    device = mesh.devices.flat[0]
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory stats, or no chip at all
        stats = None
    limit = (stats or {}).get("bytes_limit")
    if limit:
        return int(limit)
    chip = chips.by_kind(device.device_kind) if device.platform == "tpu" else None
    return chip.limit if chip else None


def memory_in_use(devices) -> str | None:
    """What the devices' memory holds now, in words ("6.69 of 15.75 GiB in use on 1 device"),
    or None where they do not say (CPU). Logged before a restore: on a chip, state still held
    from before a failure is memory the restored state must fit beside."""
    used = limit = n = 0
    for d in devices:
        try:
            stats = d.memory_stats()
        except Exception:  # noqa: BLE001 - a backend without memory stats
            return None
        if not stats or "bytes_in_use" not in stats:
            return None
        used += stats["bytes_in_use"]
        limit += stats.get("bytes_limit", 0)
        n += 1
    if not n:
        return None
    of = f" of {limit / GIB:.2f}" if limit else ""
    return f"{used / GIB:.2f}{of} GiB in use on {n} device{'s' if n > 1 else ''}"


def peak_bytes(compiled) -> int | None:
    """A compiled program's device memory per device: arguments + outputs (less what the
    donated inputs alias) + temporaries + code (None where the backend does not say)."""
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend analyses memory
        return None
    if ma is None:
        return None
    return int(ma.argument_size_in_bytes + ma.output_size_in_bytes - ma.alias_size_in_bytes
               + ma.temp_size_in_bytes + ma.generated_code_size_in_bytes)


_VMEM = re.compile(r"ScopedVmemOom|memory space vmem", re.IGNORECASE)
"""A compile that ran a kernel's scratch out of the core's VMEM (seen on a v5e chip with splash
blocks of 2048: ``RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom``)."""


def oom_bytes(error: BaseException) -> int | None:
    """What a compile that ran out of device memory said it needed (-1 when it said so without
    a figure); None for any other error."""
    text = str(error)
    if _VMEM.search(text):
        return None  # a kernel's scratch (the core's VMEM): no batch fixes that
    if "memory space hbm" not in text and not (
            "RESOURCE_EXHAUSTED" in text and "memory space" not in text):
        return None  # e.g. a kernel's scratch (``memory space vmem``): no batch fixes that
    m = _OOM.search(text)
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else -1


def state_bytes(abstract) -> int:
    """Per-device bytes of a state of ShapeDtypeStructs with shardings."""
    total = 0
    for a in jax.tree.leaves(abstract):
        shape = a.sharding.shard_shape(a.shape) if a.sharding is not None else a.shape
        total += math.prod(shape) * np.dtype(a.dtype).itemsize
    return total


def estimate(model: ModelConfig, batch_per_device: int, seq_len: int, state: int,
             params: int) -> int:
    """A rough per-device need (the compiler's figure decides): the state, the gradients and
    the activation-dtype copy of the parameters, what each layer keeps per token under the
    policy, and one layer's and one loss tile's working set."""
    q_dim, kv_dim = model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
    itemsize = np.dtype(model.dtype).itemsize
    tokens = batch_per_device * seq_len
    kept = remat.saved_bytes_per_token(
        model.remat_policy, d_model=model.d_model, q_dim=q_dim, kv_dim=kv_dim,
        ffn_dim=model.ffn_dim, heads=model.num_heads, seq_len=seq_len,
        attention=model.attention, itemsize=itemsize)
    layer = tokens * (3 * model.ffn_dim + 2 * q_dim + 4 * model.d_model) * itemsize
    tile = tokens * model.vocab_size * 4 * 3 // max(model.num_vocab_tiling, 1)
    return state + params + params * itemsize // 4 + kept * tokens * model.num_layers \
        + layer + tile


def ladder(model: ModelConfig, platform: str, batch_per_device: int, seq_len: int
           ) -> list[tuple[str, int]]:
    """The (remat policy, loss tiles) pairs :func:`choose` tries, in order, for ``model``'s
    ``auto`` choices: the remat policies of :func:`kernels.remat.candidates`, and for each on
    TPU, where the loss's tiling is ``0`` (auto), the logits whole first (kept for the backward
    pass instead of computed again: bench-1g's step 6 % faster on a v5e chip, at 2.3 GiB more),
    then tiles of at most 256 MiB (``kernels.loss.default_tiles``)."""
    auto = model.remat_policy == "auto"
    policies = remat.candidates(platform) if auto else (model.remat_policy,)
    tiles = model.num_vocab_tiling
    if tiles:
        options: tuple[int, ...] = (tiles,)
    else:
        tiled = loss.default_tiles(batch_per_device, seq_len, model.vocab_size)
        options = (1, tiled) if platform == "tpu" and tiled > 1 else (tiled,)
    return [(p, t) for p in policies for t in options]


def choose(model: ModelConfig, compile_with: Callable[[ModelConfig], object], mesh,
           batch_per_device: int, seq_len: int, abstract) -> tuple[ModelConfig, object, int | None]:
    """Compile the step for ``model``, its ``auto`` choices made concrete: the remat policy
    (``auto``) and the loss's vocabulary tiles (``0``) from :func:`ladder`, the first that fits
    kept. A candidate that :func:`estimate` (within a few per cent of the compiler's figure on
    a v5e chip) puts over the device's memory is not compiled: a compile that runs out of
    memory costs as long as one that fits. Returns (the model as compiled, the compiled step,
    its peak bytes per device).

    Raises:
        DoesNotFit: no candidate fits; says what it needs, what the device has, what to change.
    """
    platform = mesh.devices.flat[0].platform
    candidates = ladder(model, platform, batch_per_device, seq_len)
    limit = device_limit(mesh)
    state = state_bytes(abstract)
    params = state_bytes(abstract["params"])
    tried: list[tuple[str, int, str]] = []
    if limit and state + params > limit:
        # The state and its gradients alone: no policy, tiling or batch makes that fit, and a
        # compile to say so costs as long as one that fits (a minute for an 8 B model).
        tried.append((candidates[-1][0], state + params, "state and gradients"))
        raise _refusal(model, tried, limit, state, params, batch_per_device, seq_len)
    for i, (policy, tiles) in enumerate(candidates):
        m = dataclasses.replace(model, remat_policy=policy, num_vocab_tiling=tiles)
        last = i == len(candidates) - 1
        if limit and not last:
            guess = estimate(m, batch_per_device, seq_len, state, params)
            if guess > limit:
                tried.append((policy, guess, "estimated"))
                continue
        try:
            compiled = compile_with(m)
        except Exception as e:
            if m.attention == "flash" and _VMEM.search(str(e)):
                raise DoesNotFit(
                    f"the splash attention kernel's blocks of {min(m.sa_block, seq_len)} do not "
                    f"fit the chip's on-core memory (VMEM) at head_dim {m.head_dim}",
                    hint="try --sa-block 512 (or 0: the default, 1024)") from None
            need = oom_bytes(e)
            if need is None:
                raise
            tried.append((policy, need, "compiler"))
            continue
        peak = peak_bytes(compiled)
        if limit and peak and peak > limit:
            tried.append((policy, peak, "compiled"))
            continue
        if len(candidates) > 1 and platform == "tpu":
            log.info("elastix: auto: remat %s, loss %s (%s)%s", policy,
                     "whole" if tiles == 1 else f"in {tiles} vocabulary tiles",
                     f"{peak / GIB:.2f} GiB of {limit / GIB:.2f} GiB" if peak and limit else
                     "fits", f"; did not fit: {len(tried)} tried before" if tried else "")
        return m, compiled, peak
    raise _refusal(model, tried, limit, state, params, batch_per_device, seq_len)


def _refusal(model: ModelConfig, tried: list[tuple[str, int, str]], limit: int | None,
             state: int, params: int, batch_per_device: int, seq_len: int) -> DoesNotFit:
    policy, need, how = tried[-1]
    has = f"{limit / GIB:.2f} GiB" if limit else "less"
    if how == "state and gradients":
        return DoesNotFit(
            f"the parameters, AdamW's moments and the gradients alone need {need / GIB:.2f} "
            f"GiB per device (before any activation), and a device has {has}",
            hint="more devices: the state is split over a slice's devices (or a smaller model)")
    needs = (f"needs {need / GIB:.2f} GiB of device memory per device" if need > 0 else
             "does not fit a device's memory (the compiler named no figure)")
    fixed = state + params  # the state and its gradients, whatever the batch
    hints = []
    if not model.scan_layers:
        hints.append("--scan-layers (the layers unrolled keep more alive at once)")
    if policy != "full":
        hints.append("--remat-policy full (keeps only each layer's input)")
    if limit and fixed >= 0.9 * limit:
        hints.append(f"more devices: the state and its gradients alone take {fixed / GIB:.2f} "
                     "GiB per device, split over a slice's devices")
    elif limit and need > 0:
        per_seq = max(need - fixed, 1) / batch_per_device
        fits = int((0.95 * limit - fixed) // per_seq)
        if 1 <= fits < batch_per_device:
            hints.append(f"--batch-per-device {fits} (estimated to fit with remat policy "
                         f"{policy})")
    tried_text = ", ".join(dict.fromkeys(p for p, _, _ in tried))
    return DoesNotFit(
        f"the step {needs} at --batch-per-device "
        f"{batch_per_device}, --seq-len {seq_len} (remat {tried_text}; {how}), and a device "
        f"has {has}",
        hint="try " + " or ".join(hints) if hints else "try a smaller --batch-per-device")
