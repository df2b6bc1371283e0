"""Launcher benchmark: wall time of ``elastix`` vs ``xpk`` 1.16.0, side by side in one run.

Two cases, each timed interleaved (elastix, xpk, elastix, xpk, ...) so both share the noise of a
shared 2-core VM:

- ``help``: ``elastix --help`` vs ``xpk --help``;
- ``dry-run``: a dry-run render of the 3 x v5litepod-16 elastic workload by both tools.

Target: elastix's median at most a quarter of xpk's for both cases.

Both tools run in a fresh temp dir used as ``HOME`` and working directory, with
``TELEMETRY_ENABLED=false`` so xpk sends nothing. xpk's ``--dry-run`` runs no gcloud/kubectl
(``run_command_*`` only prints the command) and opens no socket, so no fake binaries are needed;
``--check-offline`` proves it by running each command once in a network namespace that has only
loopback (``unshare -n``, needs root) before timing.

Run by hand::

    .venv/bin/python bench/bench_cli.py --xpk ~/venvs/xpk/bin/xpk --runs 10 \
        [--elastix NEW/bin/elastix --baseline OLD/bin/elastix]

Without ``--xpk`` only elastix is timed (no ratio, no target). ``--smoke`` runs the smallest
case (one timed run, no warm-up, no offline check): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchcli import smoke_args

TARGET_RATIO = 0.25
REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "xpk-1.16.0-pathways-elastic.yaml"

IMAGE = "us-docker.pkg.dev/demo-project/elastix/trainer:latest"
WORKLOAD = "elastic-demo"

# The same workload for both tools: 3 x v5litepod-16, all 3 slices elastic, 10 restarts per slice.
ELASTIX_DRY_RUN = [
    "workload", "create", WORKLOAD,
    "--tpu-type", "v5litepod-16", "--num-slices", "3",
    "--elastic-slices", "3", "--max-slice-restarts", "10",
    "--docker-image", IMAGE, "--command", "python3 train.py",
    "--project", "demo-project", "--cluster", "demo", "--location", "us-central1",
    "--dry-run", "-o", "yaml",
]  # fmt: skip
XPK_DRY_RUN = [
    "workload", "create-pathways", "--workload", WORKLOAD,
    "--tpu-type", "v5litepod-16", "--num-slices", "3",
    "--elastic-slices", "3", "--max-slice-restarts", "10",
    "--docker-image", IMAGE, "--command", "python3 train.py",
    "--project", "demo-project", "--cluster", "demo", "--zone", "us-central1-a",
    "--dry-run",
]  # fmt: skip


@dataclass
class Case:
    """One side-by-side comparison: the same job done by elastix and by xpk."""

    name: str
    elastix: list[str]
    xpk: list[str] | None  # None: no xpk to time beside elastix (no --xpk)
    baseline: list[str] | None = None  # an older elastix, timed in the same loop (--baseline)
    times: dict[str, list[float]] = field(
        default_factory=lambda: {"elastix": [], "xpk": [], "baseline": []})

    def tools(self) -> tuple[str, ...]:
        return ("elastix", *(("baseline",) if self.baseline else ()),
                *(("xpk",) if self.xpk else ()))


def _clean_env(home: Path, exe_dirs: list[Path]) -> dict[str, str]:
    """A minimal environment: temp HOME, no kubeconfig, no telemetry, the tools' venvs on PATH."""
    path = os.pathsep.join([str(d) for d in exe_dirs] + ["/usr/local/bin", "/usr/bin", "/bin"])
    # A PYTHONPATH set for this run (a checkout's sources ahead of the venv's install) is kept,
    # so the tree being measured is the one imported.
    keep = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return {
        **keep,
        "PATH": path,
        "HOME": str(home),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TELEMETRY_ENABLED": "false",  # xpk: no clearcut upload
        "COLUMNS": "100",  # same help layout whatever the terminal
        "TERM": "dumb",
    }


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def _check(label: str, argv: list[str], proc: subprocess.CompletedProcess) -> None:
    if proc.returncode != 0 or not proc.stdout.strip():
        sys.stderr.write(
            f"{label} failed (exit {proc.returncode}): {' '.join(argv)}\n"
            f"--- stdout ---\n{proc.stdout[-2000:]}\n--- stderr ---\n{proc.stderr[-2000:]}\n"
        )
        raise SystemExit(1)


def extract_xpk_yaml(stdout: str) -> str:
    """The JobSet that ``xpk ... --dry-run`` prints between its temp-file banner and the apply."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("[XPK] Temp file (")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("[XPK] "))
    return "\n".join(lines[start:end]).rstrip() + "\n"


def check_offline(cases: list[Case], env: dict[str, str], cwd: Path) -> None:
    """Run every command once with no network at all (loopback only) and require success."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        print("offline check skipped: needs root and unshare(1)")
        return
    for case in cases:
        for tool in case.tools():
            argv = ["unshare", "-n", *getattr(case, tool)]
            _, proc = _run(argv, env, cwd)
            _check(f"offline {case.name}/{tool}", argv, proc)
    print("offline check: all commands succeed in a network namespace with only loopback")


def check_xpk_matches_reference(xpk_argv: list[str], env: dict[str, str], cwd: Path) -> None:
    """Confirm the timed xpk invocation renders the reference JobSet, byte for byte."""
    if not REFERENCE.exists():
        print(f"reference check skipped: {REFERENCE} missing")
        return
    _, proc = _run(xpk_argv, env, cwd)
    _check("xpk dry-run", xpk_argv, proc)
    same = extract_xpk_yaml(proc.stdout) == REFERENCE.read_text()
    print(f"xpk dry-run output == {REFERENCE.name}: {same}")
    if not same:
        raise SystemExit("the xpk invocation no longer reproduces the reference; fix XPK_DRY_RUN")


def measure(cases: list[Case], runs: int, warmup: int, env: dict[str, str], cwd: Path) -> None:
    """Time each case ABAB: elastix (then the baseline) then xpk, ``runs`` times, after ``warmup``
    untimed rounds."""
    for case in cases:
        for i in range(warmup + runs):
            for tool in case.tools():
                argv = getattr(case, tool)
                elapsed, proc = _run(argv, env, cwd)
                _check(f"{case.name}/{tool}", argv, proc)
                if i >= warmup:
                    case.times[tool].append(elapsed)


def _pct(xs: list[float], q: int) -> float:
    """Percentile q (10, 90) by linear interpolation; the median for a single sample."""
    if len(xs) < 2:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def summarize(cases: list[Case]) -> list[dict]:
    rows = []
    for case in cases:
        e, x = case.times["elastix"], case.times["xpk"]
        me = statistics.median(e)
        if not x:  # elastix alone
            rows.append({"case": case.name, "runs": len(e), "target_met": None,
                         "elastix": {"median": me, "p10": _pct(e, 10), "p90": _pct(e, 90)}})
            continue
        mx = statistics.median(x)
        rows.append({
            "case": case.name,
            "runs": len(e),
            "elastix": {"median": me, "p10": _pct(e, 10), "p90": _pct(e, 90)},
            "xpk": {"median": mx, "p10": _pct(x, 10), "p90": _pct(x, 90)},
            "ratio": me / mx,
            "pair_ratio_median": statistics.median(a / b for a, b in zip(e, x, strict=True)),
            "target_met": me / mx <= TARGET_RATIO,
        })  # fmt: skip
        if case.baseline:
            b = case.times["baseline"]
            rows[-1]["baseline"] = {"median": statistics.median(b), "p10": _pct(b, 10),
                                    "p90": _pct(b, 90)}
            rows[-1]["vs_baseline"] = me / statistics.median(b)
    return rows


def print_table(rows: list[dict]) -> None:
    print("\n| case | elastix median (p10–p90) | xpk median (p10–p90) | ratio | target ≤ 0.25 |")
    print("|---|---|---|---|---|")
    for r in rows:
        e, x = r["elastix"], r.get("xpk")
        if x is None:
            print(f"| {r['case']} | {e['median'] * 1000:.0f} ms ({e['p10'] * 1000:.0f}–"
                  f"{e['p90'] * 1000:.0f}) | - (no --xpk) | - | - |")
            continue
        print(
            f"| {r['case']} | {e['median'] * 1000:.0f} ms ({e['p10'] * 1000:.0f}–"
            f"{e['p90'] * 1000:.0f}) | {x['median'] * 1000:.0f} ms ({x['p10'] * 1000:.0f}–"
            f"{x['p90'] * 1000:.0f}) | {r['ratio']:.2f} (pairwise {r['pair_ratio_median']:.2f}) "
            f"| {'met' if r['target_met'] else 'MISSED'} |"
        )
    for r in rows:
        if "baseline" in r:
            b = r["baseline"]
            print(f"| {r['case']}: baseline elastix | {b['median'] * 1000:.0f} ms "
                  f"({b['p10'] * 1000:.0f}–{b['p90'] * 1000:.0f}) | this elastix / baseline "
                  f"{r['vs_baseline']:.2f} | | |")


def _interpreter(script: Path) -> str:
    """The Python a console script runs under (its shebang), to rerun it with -X importtime."""
    first = script.read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def import_offenders(script: Path, args: list[str], env: dict, cwd: Path, top: int) -> list:
    """Top imports by cumulative time (top-level packages) and by self time, from -X importtime."""
    argv = [_interpreter(script), "-X", "importtime", str(script), *args]
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    entries = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|", 2)
        entries.append((int(self_us), int(cum_us), name.rstrip()))
    total = sum(s for s, _, _ in entries)
    # Top-level entries (no indentation) tell which package pulled in what.
    roots = sorted(((c, n.strip()) for _, c, n in entries if not n.startswith("  ")), reverse=True)[:top]
    selfs = sorted(((s, n.strip()) for s, _, n in entries), reverse=True)[:top]
    return [total, roots, selfs, len(entries)]


def print_offenders(label: str, data: list) -> None:
    total, roots, selfs, count = data
    print(f"\n{label}: {count} modules imported, {total / 1000:.0f} ms total self time")
    print("  top-level imports by cumulative time:")
    for cum, name in roots:
        print(f"    {cum / 1000:7.1f} ms  {name}")
    print("  modules by self time:")
    for s, name in selfs:
        print(f"    {s / 1000:7.1f} ms  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xpk", type=Path,
                        help="xpk console script (own venv); without it elastix is timed alone")
    parser.add_argument(
        "--elastix", type=Path, default=Path(sys.executable).parent / "elastix",
        help="elastix console script (default: next to this Python)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline", type=Path,
        help="an older elastix console script (own venv) timed in the same loop, e.g. the "
             "commit before a refactor",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=10, help="timed pairs per case")
    parser.add_argument("--warmup", type=int, default=1, help="untimed pairs per case first")
    parser.add_argument("--cases", default="help,dry-run", help="comma-separated subset")
    parser.add_argument("--no-check-offline", action="store_true", help="skip the unshare -n run")
    parser.add_argument("--top", type=int, default=12, help="import offenders to list")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = smoke_args(parser, "one timed run, no warm-up, no offline check: checks it runs",
                      runs=1, warmup=0, no_check_offline=True)

    elastix = args.elastix.resolve()
    xpk = args.xpk.absolute() if args.xpk else None
    for exe in (elastix, xpk):
        if exe is not None and not exe.exists():
            parser.error(f"{exe} not found")
    base = args.baseline.absolute() if args.baseline else None
    if base is not None and not base.exists():
        parser.error(f"{base} not found")
    all_cases = [
        Case("help", [str(elastix), "--help"], [str(xpk), "--help"] if xpk else None,
             [str(base), "--help"] if base else None),
        Case("dry-run", [str(elastix), *ELASTIX_DRY_RUN], [str(xpk), *XPK_DRY_RUN] if xpk else None,
             [str(base), *ELASTIX_DRY_RUN] if base else None),
    ]
    wanted = set(args.cases.split(","))
    cases = [c for c in all_cases if c.name in wanted]

    with tempfile.TemporaryDirectory(prefix="bench_cli_") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        # each script's shebang picks its venv
        env = _clean_env(home, [elastix.parent] + ([xpk.parent] if xpk else []))
        cwd = Path(tmp)
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} cores, runs={args.runs}, "
            f"warmup={args.warmup}, order=ABAB (elastix first)"
        )
        if not args.no_check_offline:
            check_offline(cases, env, cwd)
        if xpk and any(c.name == "dry-run" for c in cases):
            check_xpk_matches_reference([str(xpk), *XPK_DRY_RUN], env, cwd)
        measure(cases, args.runs, args.warmup, env, cwd)
        rows = summarize(cases)
        print_table(rows)
        offenders = import_offenders(elastix, ["--help"], env, cwd, args.top)
        print_offenders("elastix --help -X importtime", offenders)
        if any(c.name == "dry-run" for c in cases):
            dry = import_offenders(elastix, ELASTIX_DRY_RUN, env, cwd, args.top)
            print_offenders("elastix dry-run -X importtime", dry)
        if xpk:
            print_offenders("xpk --help -X importtime",
                            import_offenders(xpk, ["--help"], env, cwd, 5))
        leftovers = sorted(str(p.relative_to(tmp)) for p in Path(tmp).rglob("*") if p.is_file())
        print(f"\nfiles left in the temp HOME/cwd by the runs: {leftovers or 'none'}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "elastix_imports": offenders}, indent=2))
    return 0 if all(r["target_met"] is not False for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())
