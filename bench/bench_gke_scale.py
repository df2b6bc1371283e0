"""What the GKE commands cost on 16 slices x 64 hosts (1024 worker pods), against a plain list.

Against the fake API server (tests/fakes/fake_k8s.py) running a ``v5litepod-256`` workload of
16 slices (64 hosts each), every pod Running. For each command: its wall time (median and max
of ``--rounds`` runs) and the requests it made, from the fake's request log; next to it, in
the same run, the time of one plain ``GET pods?labelSelector=jobset-name=<name>`` of the same
1025 pods with the official client (what any reader of them must pay once).

- ``workload status``, ``workload list``, ``chaos kill-worker``: the real CLI, in-process
  (``elastix.main.main``; rendering included, Python start-up not);
- ``logs -f``: the backend's follower, until it yields its first line of the head's log;
- pod watch: the head's ``elastix_trainer.elastic.podwatch.PodWatch``, from start to its watch open;
  then one kill, and the requests it made until it saw the replacement Ready.

Run by hand from the repo root::

    .venv/bin/python bench/bench_gke_scale.py --rounds 5

``--smoke`` runs the smallest case (one round, the same 1024 pods): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from benchcli import smoke_args  # noqa: E402
from fake_cluster import start_fake, stop, wait_for  # noqa: E402

from elastix.backends.base import LogOptions  # noqa: E402
from elastix.backends.gke.backend import GKEBackend  # noqa: E402
from elastix.clients.kube import api_client_from_kubeconfig  # noqa: E402
from elastix.main import main as cli  # noqa: E402
from elastix_trainer.elastic.podwatch import PodWatch  # noqa: E402

NAME, TPU, SLICES, HOSTS = "scale", "v5litepod-256", 16, 64
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def _all_running(fake, pods: int) -> None:
    wait_for(lambda: sum(1 for p in fake.pods(f"{JOBSET_LABEL}={NAME}")
                         if p["status"].get("phase") == "Running"
                         and not p["metadata"].get("deletionTimestamp")) == pods + 1,
             timeout=600, what="every pod Running")


def _quiet(argv: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(argv)
    if code != 0:
        raise SystemExit(f"elastix {' '.join(argv)} -> {code}")


def _measure(fake, rounds: int, run: Callable[[], None],
             before: Callable[[], None] = lambda: None) -> tuple[list[float], int]:
    """Wall times of ``rounds`` runs, and the requests of the last one (from the fake's log)."""
    times, count = [], 0
    for _ in range(rounds):
        before()
        fake.requests(clear=True)
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
        count = len(fake.requests(clear=True))
    return times, count


def _row(what: str, times: list[float], requests: int, base: float) -> str:
    med = statistics.median(times)
    return (f"| {what} | {med * 1000:.0f} | {max(times) * 1000:.0f} | {requests} | "
            f"{med / base:.1f} |")


def _pod_watch(fake, api, where) -> tuple[float, int, int]:
    """Start to open watch (s), requests to get there, requests from a kill to the replacement."""
    hints: list[bool] = []
    fake.requests(clear=True)
    t0 = time.perf_counter()
    w = PodWatch(api, "default", NAME, lambda s, gone: hints.append(gone)).start()
    try:
        wait_for(lambda: len(fake.requests()) >= 2, timeout=120, what="the watch open")
        opened = time.perf_counter() - t0
        start = len(fake.requests(clear=True))
        GKEBackend(api, "default", where).kill_worker(NAME, seed=11)
        wait_for(lambda: True in hints, timeout=120, what="the kill seen")
        wait_for(lambda: False in hints[hints.index(True):], timeout=120,
                 what="the replacement seen")
        sel = f"{JOBSET_LABEL}={NAME},jobset.sigs.k8s.io/replicatedjob-name=worker"
        after = [r for r in fake.requests(clear=True) if r["query"].get("labelSelector") == sel]
        return opened, start, len(after) - 1  # minus kill-worker's own list of the workers
    finally:
        w.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    args = smoke_args(p, "one round: checks it runs", rounds=1)
    pods = SLICES * HOSTS
    with tempfile.TemporaryDirectory() as tmp:
        fake = start_fake(Path(tmp), {"log_interval": 0.05, "recreate_delay": 0.05})
        os.environ["KUBECONFIG"] = str(fake.kubeconfig)
        os.environ.pop("ELASTIX_BACKEND", None)
        try:
            t0 = time.perf_counter()
            _quiet(["workload", "create", NAME, "--tpu-type", TPU, "--num-slices",
                    str(SLICES), "--docker-image", "img:1", "--command", "python train.py"])
            _all_running(fake, pods)
            print(f"{SLICES} x {HOSTS} = {pods} worker pods Running in "
                  f"{time.perf_counter() - t0:.1f} s; nproc {os.cpu_count()}, "
                  f"load {os.getloadavg()[0]:.2f}")
            api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
            backend = GKEBackend(api, "default", where)
            plain, _ = _measure(fake, args.rounds,
                                lambda: backend.pods(f"{JOBSET_LABEL}={NAME}"))
            base = statistics.median(plain)
            rows = [_row(f"plain list of the {pods + 1} pods", plain, 1, base)]
            for what, argv in (("workload status", ["workload", "status", NAME]),
                               ("workload list", ["workload", "list"])):
                times, n = _measure(fake, args.rounds, lambda a=argv: _quiet(a))
                rows.append(_row(f"`{what}`", times, n, base))

            def first_line() -> None:
                stream = backend.logs(NAME, LogOptions(follow=True))
                next(itertools.islice(stream, 1))
                stream.close()

            times, n = _measure(fake, args.rounds, first_line)
            rows.append(_row("`logs -f` (to its first line)", times, n, base))
            times, n = _measure(fake, args.rounds,
                                lambda: _quiet(["chaos", "kill-worker", NAME, "--seed", "7"]),
                                before=lambda: _all_running(fake, pods))
            rows.append(_row("`chaos kill-worker`", times, n, base))
            _all_running(fake, pods)
            opened, start, extra = _pod_watch(fake, api, where)
            rows.append(f"| head pod watch: start to watching | {opened * 1000:.0f} | - | "
                        f"{start} | {opened / base:.1f} |")
            print("| command | median ms | max ms | requests | x plain list |")
            print("|---|---|---|---|---|")
            print("\n".join(rows))
            print(f"pod watch: requests of its own from a kill to the replacement Ready: {extra}")
            print(f"load after: {os.getloadavg()[0]:.2f}")
        finally:
            stop(fake)


if __name__ == "__main__":
    main()
