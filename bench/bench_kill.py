"""Kill-to-replacement benchmark: ``elastix chaos kill-worker`` vs ``kubectl delete --force``.

Against the fake API server (tests/fakes/fake_k8s.py, replacement created as soon as the pod is
deleted), time from starting the kill command to the replacement pod (same slice and host, new
name) being *listed* by the API, for three ways of killing, interleaved round by round:

- ``elastix``: ``elastix chaos kill-worker demo --slice S --host H`` (a subprocess);
- ``kubectl``: ``kubectl delete pod NAME --grace-period=0 --force`` (a subprocess; the pod name
  is looked up before the clock starts, which favours kubectl);
- ``library``: ``GKEBackend.kill_worker`` in-process (no interpreter start-up).

The fake server does no scheduling work, so this measures the tools' own overhead, not GKE's.
Without ``kubectl`` on PATH its way is left out (and said). Run by hand from the repo root::

    .venv/bin/python bench/bench_kill.py --rounds 10

``--smoke`` runs the smallest case (one round, no warm-up): it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from benchcli import smoke_args  # noqa: E402
from fake_cluster import CREATE, start_fake, stop, wait_for  # noqa: E402

JS = "jobset.sigs.k8s.io/"


def pod_at(fake, slice_: int, host: int) -> list[str]:
    sel = (f"{JS}jobset-name=demo,{JS}replicatedjob-name=worker,{JS}job-index={slice_},"
           f"batch.kubernetes.io/job-completion-index={host}")
    url = f"{fake.url}/api/v1/namespaces/default/pods?labelSelector={urllib.parse.quote(sel)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        items = json.loads(r.read())["items"]
    return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]


def one(fake, how: str, slice_: int, host: int, backend) -> tuple[float, float]:
    """(seconds until the replacement is listed, seconds the kill command itself took)."""
    [victim] = wait_for(lambda: pod_at(fake, slice_, host), what="victim")
    env = fake.env()
    t0 = time.perf_counter()
    if how == "elastix":
        subprocess.run([sys.executable, "-m", "elastix", "chaos", "kill-worker", "demo",
                        "--slice", str(slice_), "--host", str(host)], env=env, check=True,
                       capture_output=True)
    elif how == "kubectl":
        subprocess.run(["kubectl", "delete", "pod", victim, "--grace-period=0", "--force"],
                       env=env, check=True, capture_output=True)
    else:
        backend.kill_worker("demo", slice=slice_, host=host)
    t_cmd = time.perf_counter() - t0
    deadline = time.monotonic() + 120  # the fake replaces a pod at once; this is a hang
    while time.monotonic() < deadline:  # tight poll: the replacement usually exists already
        names = pod_at(fake, slice_, host)
        if names and victim not in names:
            return time.perf_counter() - t0, t_cmd
    raise SystemExit(f"{how}: no replacement for {victim} listed 120 s after the kill")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10)
    args = smoke_args(p, "one round, no warm-up: checks it runs", rounds=1)
    ways = ("elastix", "kubectl", "library") if shutil.which("kubectl") else ("elastix", "library")
    if "kubectl" not in ways:
        print("kubectl is not on PATH: its way is left out")
    with tempfile.TemporaryDirectory() as tmp:
        fake = start_fake(Path(tmp), {"log_interval": 1.0, "start_delay": 0.0})
        try:
            subprocess.run([sys.executable, "-m", "elastix", *CREATE, "--max-slice-restarts",
                            "1000"], env=fake.env(), check=True, capture_output=True)
            from elastix.backends import Target
            from elastix.backends.gke.backend import GKEBackend

            # The library reads no $KUBECONFIG (the CLI's option does): name the file.
            backend = GKEBackend.from_target(Target(kubeconfig=str(fake.kubeconfig)))
            for how in ways if not args.smoke else ():  # warm-up: page cache, kubectl cache
                one(fake, how, 0, 0, backend)
            res: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
            for r in range(args.rounds):
                for i, how in enumerate(ways):
                    res[how].append(one(fake, how, r % 2, (r + i) % 4, backend))
        finally:
            stop(fake)
    print(f"rounds: {args.rounds}, interleaved {', '.join(ways)}; seconds")
    print("| way | kill -> replacement listed, median (min-max) | kill command alone, median |")
    print("|---|---|---|")
    for how in ways:
        total = [x[0] for x in res[how]]
        cmd = [x[1] for x in res[how]]
        print(f"| {how} | {statistics.median(total):.3f} ({min(total):.3f}-{max(total):.3f}) "
              f"| {statistics.median(cmd):.3f} |")
    if "kubectl" in res:
        ek, kk = (statistics.median(x[0] for x in res[w]) for w in ("elastix", "kubectl"))
        print(f"ratio elastix/kubectl (median): {ek / kk:.2f}")


if __name__ == "__main__":
    main()
