"""A local workload as its state directory records it, with no process behind it: the plan, the
state, and the trainer's events, written as the local backend writes them (for tests of what
status, list and kill-worker read from those files)."""

from __future__ import annotations

from pathlib import Path

from elastix.backends.local.plan import Plan
from elastix.backends.local.state import SliceState, WorkloadState, write_json_atomic


def recorded_workload(root: Path, name: str, state: str, *, slices: list[SliceState] | None = None,
                      events: list[str] | None = None, created: str = "2026-11-29T10:40:00.000000Z",
                      ) -> Path:
    """Write workload ``name`` under ``root`` (2 slices of 1 host, a dead health address) in
    ``state``; ``events``: the events file's lines. Returns its directory."""
    d = root / name
    d.mkdir()
    plan = Plan(name=name, created=created, dir=str(d), cwd="/", num_slices=2, hosts_per_slice=1,
                backoff_limit=1, max_restarts=0, devices_per_slice=1, scheduling_delay=0.0,
                health_timeout=2.0, heartbeat_interval=0.2, health_address="udp:127.0.0.1:9",
                events_file=str(d / "events.jsonl"), head_command=["true"], head_env=[],
                worker_env=[], marker="m")
    write_json_atomic(d / "plan.json", plan.to_json())
    WorkloadState(state=state, slices=slices or []).write(d)
    if events is not None:
        (d / "events.jsonl").write_text("".join(ln + "\n" for ln in events), encoding="utf-8")
    return d


def submitted_workloads(state: Path, labels_by_name: dict[str, dict[str, str]],
                        num_slices: int) -> Path:
    """Workloads of ``num_slices`` v5litepod-16 slices under ``state``, each with its labels, as
    submit leaves them (a plan.json, no state, no process); returns ``state``."""
    from elastix.backends.local.plan import make_plan
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    for name, labels in labels_by_name.items():
        spec = build_spec(None, {"name": name, "tpu_type": "v5litepod-16",
                                 "num_slices": num_slices, "docker_image": "img:1",
                                 "command": "true", "labels": labels})
        d = state / name
        d.mkdir(parents=True)
        write_json_atomic(d / "plan.json", make_plan(render(spec), d, {}, str(state)).to_json())
    return state
