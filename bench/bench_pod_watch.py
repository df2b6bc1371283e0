"""How soon the GKE head sees a replacement slice: PathwaysHealth with vs without the pod watch.

Against the fake API server (tests/fakes/fake_k8s.py) running the xpk reference JobSet
(3 slices x 4 hosts), with a stand-in for Pathways' probe (tests/fakes/pathways_standin.py: a
slice is up when all its worker pods are Ready; there is no Pathways here). Two PathwaysHealth
instances run side by side on the same cluster, both with the real default ``poll`` (10 s):

- ``watch``: its worker-pod watch (elastix_trainer.elastic.podwatch) nudges it;
- ``poll``: no watch, as before (a down slice is re-probed every ``poll`` seconds).

Each round waits a random part of ``poll`` (seeded: a kill comes at any phase of the poll), then
kills a worker pod of one slice (grace 0); once an independent watch sees it gone,
both sources ``probe()`` (standing in for the error that reaches the classifier), so both have
the slice down. Then the time is taken from the moment the independent watch sees every pod of
the slice Ready again to the moment each source's ``live_slices()`` contains the slice, and to
the moment its ``wait_for`` (what the runtime's recovery calls; it probes every
``min(poll, 5)`` s) returns.

``--saturate`` also runs the rounds with ``2 x nproc`` busy-loop processes, and samples the
watched source's view all along: a slice missing from it other than the one just killed would
be a false loss (the watch never declares one; only the probe does). A quiet spell with no pod
changes checks that load alone triggers nothing.

Run by hand from the repo root::

    .venv/bin/python bench/bench_pod_watch.py --rounds 5 --saturate

``--smoke`` runs the smallest case (one round, ``--poll 1``, a 1 s quiet spell, no saturation):
it checks that the bench runs.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from benchcli import smoke_args  # noqa: E402
from fake_cluster import start_fake, stop, wait_for  # noqa: E402
from pathways_standin import StandinProbe  # noqa: E402

from elastix.backends.gke.backend import GKEBackend  # noqa: E402
from elastix.clients.kube import api_client_from_kubeconfig  # noqa: E402
from elastix_trainer.elastic.health import PathwaysHealth  # noqa: E402
from elastix_trainer.elastic.podwatch import PodWatch  # noqa: E402

REFERENCE = ROOT / "tests" / "fixtures" / "xpk-1.16.0-pathways-elastic.yaml"
NAME, SLICES, HOSTS = "elastic-demo", 3, 4
WAIT = 120.0  # seconds for what the fake does at once (a watch event, a replacement): a hang


class Observer:
    """An independent watch: when each slice was last seen gone / all Ready (monotonic)."""

    def __init__(self, api, probe: StandinProbe) -> None:
        self.probe = probe
        self.gone: dict[int, float] = {}
        self.ready: dict[int, float] = {}
        self.watch = PodWatch(api, "default", NAME, self.hint).start()

    def hint(self, slice_: int | None, gone: bool) -> None:
        now = time.monotonic()
        if slice_ is None:
            return
        if gone:
            self.gone[slice_] = now
        elif slice_ in self.probe.up():
            self.ready.setdefault(slice_, now)


def one_round(backend, obs: Observer, sources: dict, s: int, sampler,
              pause: float, waits: bool) -> dict[str, float]:
    time.sleep(pause)  # a kill comes at any phase of the poll, not right after a tick
    obs.gone.pop(s, None)
    obs.ready.pop(s, None)
    sampler.killed = s
    backend.kill_worker(NAME, slice=s, host=s % HOSTS)
    wait_for(lambda: s in obs.gone, WAIT, what="the kill seen")
    for h in sources.values():
        h.probe()
    seen: dict[str, float] = {}

    def waiter(k: str, h: PathwaysHealth) -> None:  # the runtime's recovery waits like this
        h.wait_for(SLICES, 60)
        seen[f"{k} wait_for"] = time.monotonic()

    waiters = [threading.Thread(target=waiter, args=kv, daemon=True) for kv in sources.items()]
    for t in waiters if waits else []:
        t.start()
    deadline = time.monotonic() + 60
    while len(seen) < (2 if waits else 1) * len(sources) and time.monotonic() < deadline:
        for k, h in sources.items():
            if k not in seen and s in h.live_slices():
                seen[k] = time.monotonic()
        time.sleep(0.001)
    wait_for(lambda: s in obs.ready, WAIT, what="the replacement Ready")
    sampler.killed = None
    return {k: t - obs.ready[s] for k, t in seen.items()}


class Sampler(threading.Thread):
    """Samples the watched source's view; counts views missing a slice nobody killed."""

    def __init__(self, h: PathwaysHealth) -> None:
        super().__init__(daemon=True)
        self.h, self.killed, self.samples, self.false = h, None, 0, []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.002):
            missing = set(range(SLICES)) - self.h.live_slices() - {self.killed}
            self.samples += 1
            if missing:
                self.false.append(sorted(missing))


def run(rounds: int, poll: float, label: str, fake, backend, api, waits: bool,
        seed: int = 0) -> tuple[dict, Sampler]:
    probes = {k: StandinProbe(fake.url, NAME, HOSTS) for k in ("watch", "poll")}
    devices = {i: [] for i in range(SLICES)}
    sources = {k: PathwaysHealth(devices, poll=poll, active=p, pod_watch=False)
               for k, p in probes.items()}
    watch = PodWatch(api, "default", NAME, sources["watch"].nudge).start()
    obs = Observer(api, StandinProbe(fake.url, NAME, HOSTS))
    sampler = Sampler(sources["watch"])
    sampler.start()
    wait_for(lambda: watch.state == "watching" and obs.watch.state == "watching", WAIT,
             what="watches")
    out: dict[str, list[float]] = {k: [] for k in ("watch", "poll", "watch wait_for",
                                                   "poll wait_for")}
    rng = random.Random(seed)
    try:
        for r in range(rounds):
            pause = rng.uniform(0, poll)
            for k, v in one_round(backend, obs, sources, r % SLICES, sampler, pause,
                                  waits).items():
                out[k].append(v)
    finally:
        sampler.stop.set()
        watch.close()
        obs.watch.close()
        for h in sources.values():
            h.close()
    print(f"[{label}] load {os.getloadavg()[0]:.2f}")
    for k, v in out.items():
        if not v:
            continue
        what = "wait_for()    " if "wait_for" in k else "live_slices()"
        print(f"  {k.split()[0]:5s}: Ready -> {what}: median {statistics.median(v) * 1000:8.1f} ms"
              f"  mean {statistics.fmean(v) * 1000:8.1f} ms  max {max(v) * 1000:8.1f} ms"
              f"  (n={len(v)})")
    print(f"  false losses seen by the watched source: {len(sampler.false)} "
          f"in {sampler.samples} samples")
    return out, sampler


def quiet(seconds: float, fake, api) -> None:
    """No pod changes under load: the watch must trigger no probe and lose no slice."""
    probe = StandinProbe(fake.url, NAME, HOSTS)
    h = PathwaysHealth({i: [] for i in range(SLICES)}, poll=10.0, active=probe, pod_watch=False)
    watch = PodWatch(api, "default", NAME, h.nudge).start()
    wait_for(lambda: watch.state == "watching", WAIT, what="watch")
    asked, lost = len(probe.calls), 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lost += h.live_slices() != frozenset(range(SLICES))
        time.sleep(0.01)
    print(f"  quiet {seconds:.0f} s: probes triggered {len(probe.calls) - asked}, "
          f"views missing a slice {lost}, load {os.getloadavg()[0]:.2f}")
    watch.close()
    h.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--poll", type=float, default=10.0, help="PathwaysHealth's poll (default 10)")
    p.add_argument("--saturate", action="store_true", help="also run with 2 x nproc busy loops")
    p.add_argument("--quiet", type=float, default=10.0, help="seconds of the quiet spell")
    p.add_argument("--no-wait-for", dest="waits", action="store_false",
                   help="time live_slices() alone (a waiting wait_for also refreshes the view "
                        "of the source without a watch, every min(poll, 5) s)")
    args = smoke_args(p, "one round, --poll 1, --quiet 1, not saturated: checks it runs",
                      rounds=1, poll=1.0, quiet=1.0, saturate=False)
    with tempfile.TemporaryDirectory() as tmp:
        fake = start_fake(Path(tmp), {"recreate_delay": 0.2})
        try:
            api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
            backend = GKEBackend(api, "default", where)
            backend.submit(yaml.safe_load(REFERENCE.read_text()), preflight=False)
            wait_for(lambda: StandinProbe(fake.url, NAME, HOSTS).up() == set(range(SLICES)), WAIT,
                     what="every slice Ready")
            print(f"nproc {os.cpu_count()}, poll {args.poll:g} s, {args.rounds} rounds each")
            run(args.rounds, args.poll, "no extra load", fake, backend, api, args.waits)
            if args.saturate:
                hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(2 * (os.cpu_count() or 1))]
                try:
                    time.sleep(2)  # let the load average climb a little
                    run(args.rounds, args.poll, f"saturated, {len(hogs)} busy loops", fake,
                        backend, api, args.waits)
                    quiet(args.quiet, fake, api)
                finally:
                    for h in hogs:
                        h.kill()
                        h.wait()
        finally:
            stop(fake)


if __name__ == "__main__":
    main()
