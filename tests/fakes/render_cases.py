"""The workload specs the name and admission tests render: each flag combination the renderer
distinguishes, for any TPU type of the catalogue."""

from __future__ import annotations

from typing import Any

from elastix.workload import tpu

# Flag combinations the renderer distinguishes; headless takes no image or command.
COMBOS: dict[str, dict[str, Any]] = {
    "single": {},
    "multi": {"num_slices": 4},
    "elastic": {"num_slices": 4, "elastic_slices": 3, "max_slice_restarts": 5,
                "events_path": "gs://b/runs/events.jsonl", "pathways_persistence": True},
    "headless": {"headless": True, "num_slices": 2, "elastic_slices": 2},
    "wide": {"num_slices": 16, "elastic_slices": 16, "queue": "q", "priority": "high",
             "labels": {"team": "ml"}, "colocated_python_image": "img:colocated"},
}


def spec_values(tpu_type: str, combo: str, name: str) -> dict[str, Any]:
    """Spec values (as ``build_spec`` takes them) of one TPU type and flag combination."""
    values = {"name": name, "tpu_type": tpu_type, **COMBOS[combo]}
    if not values.get("headless"):
        values.update(docker_image="img:1", command="python3 train.py")
    return values


def tpu_types() -> list[str]:
    """One name per distinct TPU type of the catalogue (its aliases render the same manifest)."""
    seen: dict[Any, str] = {}
    for name, t in sorted(tpu.catalogue().items()):
        seen.setdefault(t, name)
    return sorted(seen.values())
