"""The CLI as the benches drive it: ``python -m elastix`` on a state directory of their own."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any


def smoke_args(ap: argparse.ArgumentParser, smoke_help: str, **smoke: Any) -> argparse.Namespace:
    """Parse a bench's flags, ``ap``'s and ``--smoke`` (``smoke_help``): the smallest case, whose
    values are ``smoke``'s, run by tests/bench to check that the bench runs (it times nothing)."""
    ap.add_argument("--smoke", action="store_true", help=smoke_help)
    args = ap.parse_args()
    if args.smoke:
        vars(args).update(smoke)
    return args


def elastix(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``elastix ARGS``; unless ``check`` is false, a failure ends the bench with its stderr."""
    p = subprocess.run([sys.executable, "-m", "elastix", *args], env=env, capture_output=True,
                       text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"elastix {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def local_env(root: str, label: str) -> dict[str, str]:
    """The environment of a bench's own local state directory ``root/label`` (made here), with
    no cluster configured."""
    state = os.path.join(root, label)
    os.makedirs(state)
    return {**os.environ, "ELASTIX_STATE_DIR": state, "ELASTIX_BACKEND": "local",
            "KUBECONFIG": os.path.join(root, "none")}


def wait_first_checkpoint(env: dict[str, str], name: str) -> None:
    """Wait for local workload ``name``'s first committed checkpoint, so that a first kill never
    finds the run with nothing to restore; a workload that ends first ends the bench, with the
    tail of its logs."""
    from benchwait import wait_for, workload_ended

    from elastix.backends.local.backend import LocalBackend
    from elastix.measure.events import events_of

    backend = LocalBackend(env["ELASTIX_STATE_DIR"])
    wait_for(lambda: any(e.name == "checkpoint_committed"
                         for e in events_of(backend.trainer_events(name))[0]),
             600, f"{name}'s first checkpoint", gone=workload_ended(backend, name), poll=0.5,
             note=lambda: elastix(env, "logs", name, check=False).stdout[-3000:])
