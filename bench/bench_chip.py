"""The trainer on one accelerator chip: speed and memory per preset, batch and kernel choice.

For each case (preset, sequence length, batch per chip, attention, remat policy, vocabulary
tiles) it compiles the trainer's own step (``step.step_fns``, as a run does), runs it, and
reports the step time (back to back, as the trainer's loop runs the steps, and synced after
each step), TFLOP/s per chip by the trainer's own count (``model.flops_per_step``:
MaxText's accounting, model FLOPs only, never a remat policy's recomputation), the share of
the chip's peak and of a bf16 matmul measured in the same run (the machine is shared: the
ratio is what compares), and the compiled step's memory per chip (its memory analysis). A
case that cannot fit is the trainer's own one-line refusal (``fit.DoesNotFit``).

``--largest`` finds the largest batch that fits per preset and sequence length, from the
compiled step's memory analysis (two compiles give the memory per sequence; the prediction is
compiled to confirm it), never by running out of memory. ``--trainer`` runs the trainer itself
(``program.assemble``, its events) on one case and compares the TFLOP/s it prints per step
with this bench's count of the same case.

On a machine with the chip (the trainer's dependencies installed beside its JAX:
``pip install '.[trainer]'``, or the wheels carried in ``.whl-tpu/``), one command:

    . .whl-tpu/install.sh && python3 bench/bench_chip.py --out $OUT

``--smoke`` runs the tiny preset on CPU (checks that the bench runs; times nothing). Prints a
Markdown table for docs/benchmarks.md; nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from benchcli import smoke_args

from elastix_trainer import fit
from elastix_trainer.config import from_mapping
from elastix_trainer.mesh import build_mesh, slice_devices
from elastix_trainer.model import flops_per_step
from elastix_trainer.step import OptConfig, fresh_state, step_fns
from elastix_trainer.train import model_config

PEAK = {"tpu v5 lite": 197e12, "tpu v5e": 197e12}
"""bf16 peak FLOP/s per chip by device kind (Google's v5e spec: 197 TFLOP/s)."""

DEFAULT_CASES = [
    "bench-1g:1024:16", "bench-1g:1024:32", "bench-1g:1024:16:dot_product",
    "qwen3-0.6b:1024:16", "qwen3-0.6b:2048:8", "qwen3-0.6b:1024:16:flash:full",
]


@dataclasses.dataclass
class Case:
    preset: str
    seq: int
    batch: int
    attention: str = "autoselected"
    remat: str = "auto"
    tiles: int = 0
    block: int = 0  # the splash kernel's block size (0: the trainer's, ModelConfig.sa_block)
    fused: bool | None = None  # the fused backward (None: the trainer's, ModelConfig.sa_fused_bwd)
    mu: str = ""  # AdamW's first-moment dtype (OptConfig.mu_dtype; "": the parameters')
    scan: bool = True  # the layers as one lax.scan (False: unrolled, ``--no-scan-layers``)
    heads: str = ""  # "Q/KVxD": the preset's attention heads reshaped (same widths, same FLOPs)

    @classmethod
    def parse(cls, text: str) -> Case:
        """``preset:seq:batch[:attention[:remat[:tiles[:block]]]][:fused|:unfused][:unscanned]
        [:mu=DTYPE][:heads=Q/KVxD]``."""
        words = text.split(":")
        flags = ("fused", "unfused", "unscanned")
        keyed = ("mu=", "heads=")
        p = [t for t in words if t not in flags and not t.startswith(keyed)]
        mu = next((t[3:] for t in words if t.startswith("mu=")), "")
        heads = next((t[6:] for t in words if t.startswith("heads=")), "")
        fused = True if "fused" in words else False if "unfused" in words else None
        return cls(p[0], int(p[1]), int(p[2]), *(p[3:5]), *(int(t) for t in p[5:7]),
                   fused=fused, mu=mu, scan="unscanned" not in words, heads=heads)

    def model(self, cfg):
        """The trainer's model for ``cfg``, its heads reshaped where ``heads`` says (the query
        and key/value widths kept, so the parameters and the FLOPs are the preset's)."""
        model = model_config(cfg)
        if not self.heads:
            return model
        q, rest = self.heads.split("/")
        kv, d = rest.split("x")
        q, kv, d = int(q), int(kv), int(d)
        if (q * d, kv * d) != (model.num_heads * model.head_dim,
                               model.num_kv_heads * model.head_dim):
            raise ValueError(f"heads={self.heads} changes the widths of {self.preset}'s "
                             f"projections ({model.num_heads}/{model.num_kv_heads}x"
                             f"{model.head_dim})")
        return dataclasses.replace(model, num_heads=q, num_kv_heads=kv, head_dim=d)

    def opt(self, steps: int = 10) -> OptConfig:
        return OptConfig(total_steps=steps, mu_dtype=self.mu)

    def config(self, steps: int = 10):
        model = ({"model_config": self.preset} if self.preset.endswith(".json") else
                 {"preset": self.preset})  # a Hugging Face config.json, or a preset
        return from_mapping(dict(**model, seq_len=self.seq,
                                 batch_per_device=self.batch, attention=self.attention,
                                 remat_policy=self.remat, num_vocab_tiling=self.tiles,
                                 sa_block=self.block, scan_layers=self.scan,
                                 **({} if self.fused is None else
                                    {"sa_use_fused_bwd_kernel": self.fused}),
                                 steps=steps, checkpoint_period=0))


def peak_flops() -> float | None:
    kind = jax.devices()[0].device_kind.lower()
    return next((v for k, v in PEAK.items() if k in kind), None)


def matmul_tflops(n: int, reps: int) -> float:
    """A bf16 [n, n] x [n, n] matmul's TFLOP/s on device 0, the best of three timings."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.bfloat16)
    f = jax.jit(lambda a, b: a @ b)
    jax.block_until_ready(f(a, b))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = f(a, b)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / reps)
    return 2 * n ** 3 / best / 1e12


def _mesh():
    return build_mesh(slice_devices(1), [0])


def run_case(case: Case, steps: int) -> dict:
    """Compile the trainer's step for ``case``, run ``steps`` after two warm-up steps."""
    cfg = case.config(steps)
    row: dict = {"case": dataclasses.asdict(case)}
    try:
        model = case.model(cfg)
    except Exception as e:  # noqa: BLE001 - the trainer's own refusal, reported as a row
        return {**row, "error": str(e).splitlines()[0]}
    opt = case.opt(steps)
    mesh = _mesh()
    t0 = time.perf_counter()
    try:
        fns = step_fns(model, opt, mesh, case.batch, case.seq, 0)
    except fit.DoesNotFit as e:
        return {**row, "error": f"does not fit: {e.message}", "hint": e.hint}
    compile_s = time.perf_counter() - t0
    state = fresh_state(model, opt, mesh, 0)
    rng = np.random.default_rng(0)
    tokens = jax.device_put(rng.integers(0, model.vocab_size, fns.batch.shape, dtype=np.int32),
                            fns.batch_sharding)  # the batch per chip x every device
    for _ in range(2):
        state, metrics = fns.step(state, tokens)
    jax.block_until_ready(metrics)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        state, metrics = fns.step(state, tokens)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - t)
    # Then back to back, as the trainer's loop runs them (the next step is dispatched before
    # the last one's metrics are read): the step the trainer prints. Synced each step, the
    # host's dispatch and the wait's wake-up are added to every step: on a v5e chip 3.4 % of
    # bench-1g's 47 ms step (12-07), more than the 2 % the two counts must agree within.
    t = time.perf_counter()
    for _ in range(steps):
        state, metrics = fns.step(state, tokens)
    jax.block_until_ready(metrics)
    step_s = (time.perf_counter() - t) / steps
    flops = flops_per_step(fns.model, fns.batch.shape[0], case.seq) / fns.num_devices
    stats = jax.devices()[0].memory_stats() or {}
    del state, metrics, tokens
    gc.collect()
    return {**row, "devices": fns.num_devices, "attention": fns.model.attention,
            "remat": fns.model.remat_policy + ("" if fns.model.scan_layers else ", unrolled"),
            "tiles": fns.model.num_vocab_tiling,
            "block": f"{fns.model.sa_block}{' fused' if fns.model.sa_fused_bwd else ''}",
            "mu": case.mu or "float32",
            "compile_s": compile_s,
            "step_s": step_s, "step_synced_s": statistics.median(times),
            "tflops": flops / step_s / 1e12, "peak_bytes": fns.peak_bytes,
            "in_use_bytes": stats.get("bytes_in_use"), "limit_bytes": stats.get("bytes_limit")}


def _compiled_peak(case: Case) -> int | None:
    """The compiled step's memory per chip for ``case`` (None: it does not fit)."""
    cfg = case.config()
    model = model_config(cfg)
    try:
        fns = step_fns(model, case.opt(), _mesh(), case.batch, case.seq, 0)
    except fit.DoesNotFit:
        return None
    return fns.peak_bytes


def largest_batch(preset: str, seq: int, attention: str, remat: str) -> dict:
    """The largest batch per chip that fits, from two compiles' memory analyses and a third
    that confirms the prediction (stepping down while it does not fit)."""
    limit = fit.device_limit(_mesh())
    probes = {}
    for b in (2, 4):
        probes[b] = _compiled_peak(Case(preset, seq, b, attention, remat))
    if None in probes.values() or not limit:
        fits = [b for b, p in probes.items() if p is not None]
        return {"preset": preset, "seq": seq, "remat": remat, "largest": max(fits, default=0),
                "note": "probes did not fit" if limit else "no memory limit known"}
    per_seq = (probes[4] - probes[2]) / 2
    fixed = probes[2] - 2 * per_seq
    guess = int((limit - fixed) // per_seq)
    tried = []
    while guess > 4:
        peak = _compiled_peak(Case(preset, seq, guess, attention, remat))
        tried.append((guess, peak))
        if peak is not None:
            break
        guess -= max(1, guess // 16)
    return {"preset": preset, "seq": seq, "remat": remat, "largest": guess,
            "per_seq_bytes": per_seq, "fixed_bytes": fixed, "tried": tried,
            "peak_bytes": tried[-1][1] if tried else probes[4]}


def trainer_agreement(case: Case, steps: int, bench_tflops: float | None) -> dict:
    """Run the trainer itself on ``case``; its step events' median TFLOP/s against ours."""
    from elastix_trainer.elastic.health import StaticHealth
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.program import assemble

    events = EventLog(None)
    outcome = assemble(case.config(steps), events, StaticHealth(1)).run()
    if outcome.status != "completed":
        raise RuntimeError(f"the trainer's run failed: {outcome.reason}")
    steps_ev = events.of("step")
    tf = [e["tflops_per_device"] for e in steps_ev][3:]
    printed = statistics.median(tf) if tf else None
    return {"case": dataclasses.asdict(case), "trainer_tflops": printed,
            "bench_tflops": bench_tflops,
            "ratio": printed / bench_tflops if printed and bench_tflops else None}


def profile(case: Case, out: str | None) -> dict:
    """Three steps of ``case`` under JAX's profiler: the device time per XLA op, summed (the
    top ones printed), and the Perfetto trace kept in ``out``."""
    import glob
    import gzip
    import shutil
    import tempfile

    cfg = case.config()
    model = case.model(cfg)
    opt = case.opt()
    mesh = _mesh()
    fns = step_fns(model, opt, mesh, case.batch, case.seq, 0)
    state = fresh_state(model, opt, mesh, 0)
    tokens = jax.device_put(np.zeros(fns.batch.shape, np.int32), fns.batch_sharding)
    for _ in range(2):
        state, metrics = fns.step(state, tokens)
    jax.block_until_ready(metrics)
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d, create_perfetto_trace=True):
            for _ in range(3):
                state, metrics = fns.step(state, tokens)
            jax.block_until_ready(metrics)
        path = (glob.glob(f"{d}/**/perfetto_trace.json.gz", recursive=True) or [None])[0]
        if path is None:
            return {"case": dataclasses.asdict(case), "error": "no perfetto trace written"}
        if out:
            shutil.copy(path, os.path.join(out, f"profile-{case.preset}-{case.batch}.json.gz"))
        trace = json.load(gzip.open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[(e["name"], e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
    ops: dict[str, list] = {}
    threads: dict[str, float] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        proc = names.get(("process_name", e.get("pid"), None), "")
        thread = names.get(("thread_name", e.get("pid"), e.get("tid")), "")
        where = f"{proc} / {thread}"
        threads[where] = threads.get(where, 0) + e.get("dur", 0)
        if "TPU" not in proc and "/device" not in proc:
            continue
        if "Ops" not in thread:
            continue
        args = e.get("args", {})
        key = args.get("long_name", e["name"])[:140]
        cat = args.get("hlo_category") or args.get("category") or ""
        ops.setdefault(key, [0.0, 0, cat])
        ops[key][0] += e.get("dur", 0)
        ops[key][1] += 1
    total = sum(v[0] for v in ops.values()) or 1
    top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:40]
    cats: dict[str, float] = {}
    for _, (dur, _, cat) in ops.items():
        cats[cat] = cats.get(cat, 0) + dur
    return {"case": dataclasses.asdict(case), "device_ms_per_step": total / 3 / 1000,
            "categories": {k: round(v / total, 3) for k, v in sorted(cats.items(),
                                                                    key=lambda kv: -kv[1])},
            "top": [(k, round(v[0] / 3 / 1000, 3), v[1] // 3, v[2]) for k, v in top],
            "threads": sorted(((k, round(v / 3000, 2)) for k, v in threads.items()),
                              key=lambda kv: -kv[1])[:12]}


def _gib(b) -> str:
    return f"{b / (1 << 30):.2f}" if b else "-"


def report(rows: list[dict], mm: float, peak: float | None, largest: list[dict],
           agree: list[dict]) -> str:
    dev = jax.devices()[0]
    out = [f"{dev.device_kind}, JAX {jax.__version__}; bf16 matmul measured: {mm:.1f} TFLOP/s"
           + (f" ({mm * 1e12 / peak:.0%} of the {peak / 1e12:.0f} TFLOP/s peak)" if peak
              else ""), "",
           "| preset | seq | batch | attention | remat | tiles | block | mu | step (s) | synced "
           "(s) | TFLOP/s | of peak | of matmul | compiled GiB | compile (s) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["case"]
        head = f"| {c['preset']} | {c['seq']} | {c['batch']} |"
        if "error" in r:
            out.append(f"{head} {c['attention']} | {c['remat']} | | {r['error']} |")
            continue
        of_peak = f"{r['tflops'] * 1e12 / peak:.1%}" if peak else "-"
        heads = f", heads {c['heads']}" if c.get("heads") else ""
        out.append(f"{head} {r['attention']}{heads} | {r['remat']} | {r['tiles']} | "
                   f"{r['block']} | {r['mu']} | "
                   f"{r['step_s']:.4f} | {r['step_synced_s']:.4f} | {r['tflops']:.1f} | {of_peak} | "
                   f"{r['tflops'] / mm:.1%} | {_gib(r['peak_bytes'])} | {r['compile_s']:.1f} |")
    if largest:
        out += ["", "| preset | seq | remat | largest batch that fits | GiB at it | GiB per "
                "sequence |", "|---|---|---|---|---|---|"]
        for r in largest:
            if "error" in r:
                out.append(f"| {r['preset']} | {r['seq']} | {r['remat']} | {r['error']} |")
                continue
            out.append(f"| {r['preset']} | {r['seq']} | {r['remat']} | {r['largest']} | "
                       f"{_gib(r.get('peak_bytes'))} | {_gib(r.get('per_seq_bytes'))} |")
    for a in agree:
        c = a["case"]
        ratio = f"{a['ratio']:.3f}" if a["ratio"] else "-"
        out.append(f"\ntrainer's printed TFLOP/s, {c['preset']} seq {c['seq']} batch "
                   f"{c['batch']}: {a['trainer_tflops'] or 0:.1f} against the bench's "
                   f"{a['bench_tflops'] or 0:.1f} (ratio {ratio})")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=DEFAULT_CASES,
                    help="preset:seq:batch[:attention[:remat[:tiles[:block]]]][:fused][:unscanned]"
                         "[:mu=DTYPE][:heads=Q/KVxD]"
                         " ...")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per case")
    ap.add_argument("--largest", nargs="*", default=["bench-1g:1024", "qwen3-0.6b:1024",
                                                      "qwen3-0.6b:2048"],
                    help="preset:seq[:remat] to find the largest batch for (remat: full)")
    ap.add_argument("--trainer", default="bench-1g:1024:16",
                    help="a case to run the trainer itself on (empty: none)")
    ap.add_argument("--profile", nargs="*", default=[],
                    help="cases to profile (3 steps each; the top device ops are printed)")
    ap.add_argument("--matmul", type=int, default=8192, help="the matmul's size")
    ap.add_argument("--budget", type=float, default=480,
                    help="seconds after which no new case starts (the report still prints)")
    ap.add_argument("--out", default=None, help="also write the rows as JSON lines here")
    args = smoke_args(ap, "tiny on CPU: checks that the bench runs", cases=["tiny:128:2",
                      "tiny:128:2:dot_product:full:4",
                      "tiny:128:2:heads=2/1x32"], steps=2, largest=["tiny:128"],
                      trainer="tiny:128:2", matmul=256)
    log = open(os.path.join(args.out, "chip.jsonl"), "a") if args.out else None

    def keep(kind: str, row: dict) -> dict:
        if log:
            log.write(json.dumps({"kind": kind, **row}) + "\n")
            log.flush()
        print(json.dumps({"kind": kind, **row}), file=sys.stderr, flush=True)
        return row

    start = time.monotonic()

    def guarded(kind: str, what: dict, fn) -> dict | None:
        """``fn()``'s row, or the error it raised as a row; None once past ``--budget``."""
        if time.monotonic() - start > args.budget:
            print(f"skipped (past --budget): {what}", file=sys.stderr)
            return None
        try:
            return keep(kind, fn())
        except Exception as e:  # noqa: BLE001 - one case's failure is that case's row
            line = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
            return keep(kind, {**what, "error": f"{type(e).__name__}: {line}"})

    mm = keep("matmul", {"tflops": matmul_tflops(args.matmul, 10)})["tflops"]
    rows = [r for c in args.cases if (r := guarded(
        "case", {"case": dataclasses.asdict(Case.parse(c))},
        lambda c=c: run_case(Case.parse(c), args.steps))) is not None]
    largest = []
    for spec in args.largest:
        p = spec.split(":")
        what = {"preset": p[0], "seq": int(p[1]), "remat": p[2] if len(p) > 2 else "full"}
        r = guarded("largest", what, lambda w=what: largest_batch(
            w["preset"], w["seq"], "autoselected", w["remat"]))
        if r is not None:
            largest.append(r)
    agree = []
    if args.trainer and time.monotonic() - start < args.budget:
        case = Case.parse(args.trainer)
        mine = next((r.get("tflops") for r in rows if r["case"] == dataclasses.asdict(case)),
                    None)
        agree.append(keep("trainer", trainer_agreement(case, max(args.steps, 8) + 3, mine)))
    for spec in args.profile:
        guarded("profile", {"case": dataclasses.asdict(Case.parse(spec))},
                lambda spec=spec: profile(Case.parse(spec), args.out))
    mm = max(mm, matmul_tflops(args.matmul, 10))
    print(report(rows, mm, peak_flops(), largest, agree))


if __name__ == "__main__":
    main()
