"""``elastix-train`` / ``python -m elastix_trainer``: the program on the head pod.

``elastix-train [flags]`` trains; ``elastix-train prepare-data --input F... --output DIR`` turns
text or JSONL into ArrayRecord shards; ``elastix-train fit-check --topology T --slices N --
[flags]`` compiles the run's step for TPU slices without a chip (``fitcheck``). Errors print
one line (and a hint); exit codes: 2 bad input, 1 runtime failure, 130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys

from elastix.errors import ElastixError
from elastix.protocol import entrypoints, envvars


def _init_platform(num_slices: int | None = None) -> None:
    """Pathways first: pathwaysutils must register the proxy backend before JAX starts.

    On CPU, make the devices the slices need (``num_slices`` x ``ELASTIX_DEVICES_PER_SLICE``,
    default 1 each) before JAX creates its CPU client, unless ``XLA_FLAGS`` already says how
    many: a user of ``--num-slices 4`` should not have to know the XLA flag.
    """
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if "proxy" in platforms:
        import pathwaysutils

        pathwaysutils.initialize()
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if platforms not in ("", "cpu") or "xla_force_host_platform_device_count" in flags:
        return
    slices = _positive(envvars.NUM_SLICES) or num_slices or 1
    per = _positive(envvars.DEVICES_PER_SLICE) or 1
    if slices * per > 1:
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_force_host_platform_device_count={slices * per}".strip())


def _positive(name: str) -> int | None:
    raw = os.environ.get(name, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _prepare_data(argv: list[str]) -> int:
    from elastix_trainer.data import prepare_data

    ap = argparse.ArgumentParser(prog="elastix-train prepare-data",
                                 description="Tokenize .txt/.jsonl files (byte tokenizer, no "
                                             "download) into ArrayRecord shards.")
    ap.add_argument("--input", nargs="+", required=True, help=".txt or .jsonl ({'text': ...})")
    ap.add_argument("--output", required=True, help="directory for the shards")
    ap.add_argument("--seq-len", type=int, default=64, help="train sequence length")
    ap.add_argument("--shards", type=int, default=4, help="number of shards")
    ns = ap.parse_args(argv)
    out = prepare_data(ns.input, ns.output, ns.seq_len, ns.shards)
    print(f"wrote {out['records']} records ({out['tokens']} tokens) to {len(out['shards'])} "
          f"shards in {ns.output}")
    return 0


def _train(argv: list[str]) -> int:
    from elastix_trainer.config import parse_args

    # What a run writes (checkpoints, events, logs, snapshots) is its user's alone, whatever
    # the umask it was started with: files 0600, directories 0700.
    os.umask(0o077)
    cfg = parse_args(argv)
    _init_platform(cfg.num_slices)
    from elastix_trainer.program import run

    return run(cfg, settle_heap=True)


def _exit_without_teardown(code: list[int]) -> None:
    """The last exit handler of the program: end the process with ``code[0]`` without the
    interpreter's teardown. By then the run has closed everything it writes
    (``program.run``'s ``finally``), the non-daemon threads were joined and every other
    exit handler ran (logging's flush, JAX's); what is skipped is freeing memory and destroying
    XLA's CPU client: 0.66 s of a stopped head's exit after its ``run_end`` (measured, quiet),
    which a ``workload create --replace``, a delete and a restart all waited for."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code[0])


def exit_without_teardown() -> list[int]:
    """Register :func:`_exit_without_teardown` as the process's last exit handler; returns the
    one-item list whose value it exits with (1 until the run says otherwise: an exception
    that escapes, Python prints it and exits 1). Registered before anything that registers
    its own (JAX, the step's precompiles, logging): the first registered runs last."""
    code = [1]
    atexit.register(_exit_without_teardown, code)
    return code


def main(argv: list[str] | None = None, *, code: list[int] | None = None) -> int:
    """Entry point; returns the exit code. Run as the program (``argv`` None), the process
    then ends without the interpreter's teardown (:func:`_exit_without_teardown`; ``code``:
    the list :func:`exit_without_teardown` returned, when the caller registered it first, as
    :mod:`elastix_trainer.warm` does before its imports)."""
    if argv is None:
        if code is None:
            code = exit_without_teardown()
        try:
            code[0] = _main(sys.argv[1:])
        except SystemExit as e:  # argparse's exit 2, --help's 0
            code[0] = e.code if isinstance(e.code, int) else int(e.code is not None)
            raise
        return code[0]
    return _main(argv)


def _main(argv: list[str]) -> int:
    try:
        if argv and argv[0] == "prepare-data":
            return _prepare_data(argv[1:])
        if argv and argv[0] == entrypoints.FIT_CHECK:
            from elastix_trainer import fitcheck

            return fitcheck.main(argv[1:])
        return _train(argv)
    except ElastixError as e:
        print(f"error: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the one boundary: one line, the traceback only with ELASTIX_DEBUG
        if os.environ.get(envvars.DEBUG):
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"error: {type(e).__name__}: {first}", file=sys.stderr)
        print("hint: set ELASTIX_DEBUG=1 for the traceback", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
