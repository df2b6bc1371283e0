"""A boundary copy reads the state to the host a window at a time and asks, between its
parts, whether it can still complete (``state.hostcopy.read_windowed``): a probe that raises
stops the read there, with at most the window's bytes of transfers left running."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elastix_trainer.state import hostcopy
from elastix_trainer.state.hostcopy import read_windowed
from elastix_trainer.state.snapshot import host_copy

MIB = 1 << 20


@pytest.fixture
def started(monkeypatch):
    """The arrays whose device-to-host transfer was started, in order."""
    out: list = []
    cls = type(jnp.zeros(1))
    real = cls.copy_to_host_async

    def spy(self):
        out.append(self)
        return real(self)

    monkeypatch.setattr(cls, "copy_to_host_async", spy)
    return out


def _leaves(n: int = 8) -> list:
    return [jnp.full((MIB // 4,), i, jnp.float32) for i in range(n)]  # 1 MiB each


def _stop_at(k: int):
    calls = []

    def probe():
        calls.append(1)
        if len(calls) == k:
            raise RuntimeError("lost")
    return probe, calls


def test_the_read_is_whole_and_in_order(started):
    leaves = _leaves()
    probe, calls = _stop_at(0)
    out = read_windowed({"a": leaves[:3], "b": leaves[3:]}, 2 * MIB, probe)
    flat = jax.tree.leaves(out)
    assert all(isinstance(x, np.ndarray) and x[0] == i for i, x in enumerate(flat))
    assert len(calls) == len(leaves)  # asked before each wait
    assert [int(x[0]) for x in started] == list(range(8))


@pytest.mark.parametrize(("window", "stop"), [(2 * MIB, 3), (2 * MIB, 1), (3 * MIB, 5),
                                              (None, 2)])
def test_a_probe_that_raises_stops_the_read(started, window, stop):
    leaves = _leaves()
    probe, calls = _stop_at(stop)
    with pytest.raises(RuntimeError, match="lost"):
        read_windowed(leaves, window, probe)
    assert len(calls) == stop
    read = stop - 1  # the probe runs before each array's wait
    left = sum(x.nbytes for x in started) - read * MIB
    if window is None:
        assert len(started) == len(leaves)  # every transfer was started first
    else:
        assert left <= window, (left, window)  # no more than the window left running
        assert len(started) < len(leaves)


def test_an_array_larger_than_the_window_goes_alone(started):
    big = jnp.ones((2 * MIB // 4,), jnp.float32)
    leaves = [*_leaves(2), big, *_leaves(2)]
    seen = []

    def probe():
        seen.append(len(started))
    read_windowed(leaves, MIB, probe)
    # before the big array's wait, nothing after it was started
    assert seen[2] == 3


def test_host_copy_uses_the_copy_window(started, monkeypatch):
    monkeypatch.setattr(hostcopy, "COPY_WINDOW_BYTES", 2 * MIB)
    probe, calls = _stop_at(4)
    with pytest.raises(RuntimeError):
        host_copy({"w": _leaves()}, probe)
    assert len(started) == 5  # leaves 0-4: 0-2 read, 3-4 in flight (2 MiB)


def test_the_copy_window_grows_with_the_devices_the_state_spans(monkeypatch):
    """Measured on one chip; a state over more devices moves more bytes at once."""
    from jax.sharding import NamedSharding, PartitionSpec

    monkeypatch.setattr(hostcopy, "COPY_WINDOW_BYTES", MIB)
    devices = jax.devices()
    assert len(devices) >= 2, "tests/trainer runs on 8 CPU devices"
    mesh = jax.make_mesh((len(devices),), ("x",))
    spread = jax.device_put(jnp.zeros((len(devices) * 4,)), NamedSharding(mesh, PartitionSpec("x")))
    alone = jax.device_put(jnp.zeros(4), devices[0])
    assert hostcopy.copy_window({"a": alone}) == MIB
    assert hostcopy.copy_window({"a": alone, "b": spread, "n": 3}) == len(devices) * MIB
    monkeypatch.setattr(hostcopy, "COPY_WINDOW_BYTES", None)
    assert hostcopy.copy_window({"b": spread}) is None
