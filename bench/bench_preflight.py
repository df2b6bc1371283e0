"""Preflight's cost: ``elastix workload create`` against the fake cluster with and without
preflight, interleaved (ABAB...), N pairs; then preflight alone and a server dry run in-process.

The fake cluster (tests/fakes) has 9 Nodes: a cpu-np n2-standard-64 and two v5litepod-16 pools.
Nothing here asserts a timing. Run by hand from the repo root::

    .venv/bin/python bench/bench_preflight.py 20

``--smoke`` runs the smallest case (one pair): it checks that the bench runs.
"""
import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fakes"))
from benchcli import smoke_args  # noqa: E402
from fake_cluster import start_fake, stop  # noqa: E402
from fake_gke import pool_nodes  # noqa: E402

_ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_ap.add_argument("pairs", type=int, nargs="?", default=12)
N = smoke_args(_ap, "one pair: checks it runs", pairs=1).pairs
tmp = Path(tempfile.mkdtemp())
fake = start_fake(tmp, {"start_delay": 0.05})
try:
    pools = [{"name": "cpu-np", "initialNodeCount": 1, "config": {"machineType": "n2-standard-64"}}]
    pools += [{"name": f"tpu-slice-{i}", "initialNodeCount": 4, "config": {"machineType": "ct5lp-hightpu-4t"},
               "placementPolicy": {"type": 1, "tpuTopology": "4x4"}} for i in range(2)]
    for p in pools:
        fake.add_nodes(*pool_nodes("c", p))
    env = fake.env()
    base = [sys.executable, "-m", "elastix", "workload", "create", "--tpu-type", "v5litepod-16",
            "--num-slices", "2", "--elastic-slices", "2", "--docker-image", "img:1",
            "--command", "python train.py"]
    times = {"with": [], "without": []}
    for i in range(N):
        for mode in (("with", "without") if i % 2 == 0 else ("without", "with")):
            name = f"{'p' if mode == 'with' else 's'}{i}"
            args = base + [name] + (["--skip-preflight"] if mode == "without" else [])
            t = time.perf_counter()
            r = subprocess.run(args, env=env, capture_output=True, text=True)
            times[mode].append(time.perf_counter() - t)
            assert r.returncode == 0, r.stderr
    for mode, ts in times.items():
        print(f"workload create {mode:8s} preflight: median {statistics.median(ts) * 1000:7.1f} "
              f"ms, mean {statistics.mean(ts) * 1000:7.1f} ms, min {min(ts) * 1000:7.1f}, "
              f"max {max(ts) * 1000:7.1f} (n={len(ts)})")
    # preflight alone, in-process (the requests and the checks), warm client
    from elastix.backends.gke.backend import GKEBackend
    from elastix.clients.kube import api_client_from_kubeconfig
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    b = GKEBackend(api, "default", where)
    m = render(build_spec(None, {"name": "x", "tpu_type": "v5litepod-16", "num_slices": 2,
                                 "elastic_slices": 2, "docker_image": "i", "command": "c"}))
    b.preflight(m)
    ts = []
    for _ in range(50):
        t = time.perf_counter()
        b.preflight(m)
        ts.append(time.perf_counter() - t)
    print(f"preflight alone (in-process, 2 requests, 9 Nodes): median {statistics.median(ts)*1000:.2f} ms, "
          f"max {max(ts)*1000:.2f} ms (n=50)")
    sub = {True: [], False: []}
    for i in range(100):
        for pre in ((True, False) if i % 2 == 0 else (False, True)):
            t = time.perf_counter()
            b.submit(m, dry_run="server", preflight=pre)
            sub[pre].append(time.perf_counter() - t)
    for pre, ts in sub.items():
        print(f"submit --dry-run=server in-process, preflight={pre!s:5s}: median "
              f"{statistics.median(ts)*1000:.2f} ms, mean {statistics.mean(ts)*1000:.2f} ms (n=100)")
finally:
    stop(fake)
    shutil.rmtree(tmp, ignore_errors=True)
