"""``ELASTIX_LOCAL_PLATFORM``: the local head trains on this machine's accelerator (issue 58
item 4), its slice hosts still processes. Here (no accelerator) what is checked is what the
head is given, with a stand-in controller, and how the trainer divides one machine's chips
among the slices; the run itself is measured on a TPU machine (docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses
import sys

import psutil
import pytest
from local_helpers import STANDIN, wait_until

from elastix.backends.local.plan import local_platform
from elastix.errors import UsageError


def test_the_head_is_given_the_platform_and_no_cpu_devices(cli, backend):
    cli("workload", "create", "chip", "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--command",
        f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05",
        env={"ELASTIX_LOCAL_PLATFORM": "TPU"})
    try:
        st = wait_until(lambda: (s := backend.status("chip")) and s.head and s.head.pid and s,
                        60, "the head")
        env = psutil.Process(st.head.pid).environ()
        # the accelerator first (JAX's default backend), the host kept for the seam's callback
        assert env["JAX_PLATFORMS"] == "tpu,cpu"
        assert "xla_force_host_platform_device_count" not in env.get("XLA_FLAGS", "")
        assert env["ELASTIX_NUM_SLICES"] == "2"
        assert "ELASTIX_DEVICES_PER_SLICE" not in env  # the chips, divided evenly
        assert env["ELASTIX_LOCAL_HEALTH"]  # the slice hosts are still the backend's processes
    finally:
        cli("workload", "delete", "chip", "--wait", check=False)


def test_a_bad_platform_is_one_line_before_anything_starts(cli, backend):
    proc = cli("workload", "create", "bad", "--tpu-type", "v5litepod-4", "--command",
               f"{sys.executable} {STANDIN}",
               env={"ELASTIX_LOCAL_PLATFORM": "proxy"}, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "ELASTIX_LOCAL_PLATFORM='proxy' is not a JAX platform" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(backend.root.glob("bad*"))


def test_the_platform_reads_as_jax_names_it():
    assert local_platform({}) == "cpu" and local_platform({"ELASTIX_LOCAL_PLATFORM": " "}) == "cpu"
    assert local_platform({"ELASTIX_LOCAL_PLATFORM": "Tpu"}) == "tpu"
    for bad in ("tpu,cpu", "../x", "proxy", "a" * 30):
        with pytest.raises(UsageError):
            local_platform({"ELASTIX_LOCAL_PLATFORM": bad})


@dataclasses.dataclass(frozen=True)
class Chip:
    """What ``slice_devices`` reads of a device: a TPU chip of one machine (slice 0)."""

    id: int
    platform: str = "tpu"
    slice_index: int = 0


def test_one_machines_chips_are_divided_among_the_local_slices(monkeypatch):
    from elastix_trainer.mesh import slice_devices

    chips = [Chip(i) for i in range(4)]
    assert slice_devices(devices=chips) == {0: chips}  # no local backend: one slice, as JAX says
    monkeypatch.setenv("ELASTIX_LOCAL_HEALTH", "unix:@x")
    monkeypatch.setenv("ELASTIX_NUM_SLICES", "2")
    assert slice_devices(devices=chips) == {0: chips[:2], 1: chips[2:]}
    monkeypatch.setenv("ELASTIX_NUM_SLICES", "8")
    with pytest.raises(UsageError) as err:
        slice_devices(devices=chips)
    assert "has 4 tpu chips: give --num-slices 4 or fewer" in err.value.hint
