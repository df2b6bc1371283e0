"""The fit check against the chip: memory compiled without a chip, speed predicted, each beside
what the trainer's own compile and steps gave on a TPU v5e chip; and the seed's run.

``--agreement FILE`` reads ``bench/bench_chip.py``'s rows (its ``chip.jsonl``, written on the
chip) and, for each case, runs the fit check here, on this machine with no chip (libtpu from
the package index), for the chip's topology (``v5e:1x1``): the compiled memory a chip beside the
chip's, and the predicted TFLOP/s beside the measured, the prediction made without that row
(``predict.MEASURED`` less the step itself: left out, as a new shape would be).

``--seed`` times the check of the seed's run (Qwen3-4B on 3 x v5litepod-16, replica-resize: the
meshes of 3 and 2 slices) at ``--seed-batches`` (batch 1 is MaxText's guide shape) and finds
the largest batch that fits by bisection on the compiled memory.

    python bench/bench_fitcheck.py --agreement chip.jsonl --seed

Prints Markdown tables for docs/benchmarks.md; nothing asserts a timing. ``--smoke`` checks the
tiny preset on a 2x2 topology (the bench runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from benchcli import smoke_args

GIB = 1 << 30


def _flags(case: dict) -> list[str] | None:
    """The trainer flags of a bench_chip case; None for what flags cannot say (heads=)."""
    if case.get("heads"):
        return None
    preset = case["preset"]
    flags = (["--model-config", os.path.join(os.path.dirname(__file__), preset)]
             if preset.endswith(".json") else ["--preset", preset])
    flags += ["--seq-len", str(case["seq"]), "--batch-per-device", str(case["batch"]),
              "--attention", case.get("attention", "autoselected"),
              "--remat-policy", case.get("remat", "auto"),
              "--num-vocab-tiling", str(case.get("tiles", 0)),
              "--sa-block", str(case.get("block", 0))]
    if case.get("fused") is False:
        flags.append("--no-sa-use-fused-bwd-kernel")
    if case.get("scan") is False:
        flags.append("--no-scan-layers")
    return flags


def _row_measured(row: dict):
    """The predict.Measured of a chip row (to leave out), by its shape and choices."""
    from elastix_trainer import predict

    case = row["case"]
    for m in predict.MEASURED:
        if (m.name == os.path.basename(case["preset"]) and m.seq_len == case["seq"]
                and m.batch == case["batch"] and not case.get("heads")
                and abs(m.step_s - row["step_s"]) < 5e-4):
            return m
    return None


def agreement(path: str, out: list[str]) -> None:
    from elastix_trainer import fitcheck, predict
    from elastix_trainer.config import parse_args

    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    rows = [r for r in rows if r.get("kind") == "case" and "step_s" in r]
    out += ["| model | seq | batch | layers | remat | tiles | block | chip GiB | check GiB | "
            "memory | measured TFLOP/s | predicted | speed |", "|" + "---|" * 13]
    worst_mem = worst_speed = 0.0
    for r in rows:
        case = r["case"]
        flags = _flags(case)
        if flags is None:
            continue
        cfg = parse_args(flags + ["--steps", "10"])
        own = _row_measured(r)
        rest = tuple(m for m in predict.MEASURED if m is not own)
        real = predict.tflops
        predict.tflops = lambda *a, _real=real, _rest=rest, **k: _real(*a, **{**k,
                                                                             "rows": _rest})
        try:
            m = fitcheck.check(cfg, "v5e:1x1", 1, (1, 1, 1), progress=lambda _: None)[
                "meshes"][0]
        finally:
            predict.tflops = real
        mem = m["hbm"] / r["peak_bytes"] - 1
        pred = m["prediction"]["tflops"]
        speed = pred / r["tflops"] - 1
        worst_mem = max(worst_mem, abs(mem))
        if "unrolled" not in r["remat"] and case.get("block", 0) in (0, 1024):
            worst_speed = max(worst_speed, abs(speed))
        out.append(
            f"| {os.path.basename(case['preset'])} | {case['seq']} | {case['batch']} | "
            f"{'unrolled' if 'unrolled' in r['remat'] else 'scanned'} | {m['remat_policy']} | "
            f"{m['loss_tiles']} | {r['block']} | {r['peak_bytes'] / GIB:.2f} | "
            f"{m['hbm'] / GIB:.2f} | {mem:+.1%} | {r['tflops']:.1f} | {pred:.1f} | "
            f"{speed:+.1%} |")
        print(out[-1], file=sys.stderr, flush=True)
    out += ["", f"largest memory difference {worst_mem:.2%}; largest speed difference "
            f"{worst_speed:.1%} (scanned, default blocks: the calibrated settings)"]


def seed(batches: list[int], out: list[str], largest: bool) -> None:
    from elastix_trainer import fitcheck
    from elastix_trainer.config import parse_args

    def check(batch: int) -> dict:
        cfg = parse_args(["--preset", "qwen3-4b", "--seq-len", "2048", "--batch-per-device",
                          str(batch), "--elastic-mode", "replica-resize", "--steps", "10"])
        t0 = time.monotonic()
        report = fitcheck.check(cfg, "v5e:4x4", 3, progress=lambda s: print(s, file=sys.stderr))
        report["wall"] = time.monotonic() - t0
        return report

    out += ["| batch a chip | mesh | fits | HBM a chip (GiB) | remat | loss tiles | predicted "
            "TFLOP/s | compile (s) |", "|" + "---|" * 8]
    fits: dict[int, bool] = {}

    def add(batch: int) -> bool:
        report = check(batch)
        ok = all(m["fits"] for m in report["meshes"])
        fits[batch] = ok
        for m in report["meshes"]:
            out.append(
                f"| {batch} | {m['slices']} x 16 | {'yes' if m['fits'] else 'no'} | "
                + (f"{m['hbm'] / GIB:.2f} | {m['remat_policy']} | {m['loss_tiles']} | "
                   f"{m['prediction']['tflops']:.1f}" if m["fits"] else " | | | ")
                + f" | {m['seconds']:.0f} |")
            print(out[-1], file=sys.stderr, flush=True)
        return ok

    for b in batches:
        add(b)
    if largest:
        lo = max((b for b, ok in fits.items() if ok), default=0)
        hi = min((b for b, ok in fits.items() if not ok), default=None)
        while hi is None:
            nxt = max(2 * lo, 1)
            if add(nxt):
                lo = nxt
            else:
                hi = nxt
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if add(mid):
                lo = mid
            else:
                hi = mid
        out += ["", f"largest batch a chip that fits every mesh: {lo} (batch {hi} does not)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agreement", help="bench_chip.py's chip.jsonl")
    ap.add_argument("--seed", action="store_true", help="the seed's run, timed per mesh")
    ap.add_argument("--seed-batches", type=int, nargs="*", default=[1])
    ap.add_argument("--largest", action="store_true", help="and the largest batch that fits")
    args = smoke_args(ap, "tiny on v5e:2x2: checks the bench runs", agreement=None,
                      seed=False, largest=False)
    out: list[str] = []
    if args.smoke:
        from elastix_trainer import fitcheck
        from elastix_trainer.config import parse_args

        report = fitcheck.check(parse_args(["--preset", "tiny"]), "v5e:2x2", 1,
                                progress=lambda _: None)
        out.append(json.dumps({k: v for k, v in report["meshes"][0].items()
                               if k in ("fits", "hbm", "remat_policy")}))
    if args.agreement:
        agreement(args.agreement, out)
    if args.seed:
        seed(args.seed_batches, out, args.largest)
    print("\n".join(out))


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    main()
