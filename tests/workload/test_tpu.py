import pytest

from elastix.errors import UsageError
from elastix.workload import tpu


@pytest.mark.parametrize(
    ("name", "canonical", "hosts", "chips_per_host", "topology", "instance"),
    [
        ("v5litepod-16", "v5litepod-16", 4, 4, "4x4", "tpuv5e:4x4"),
        ("v5litepod-4x4", "v5litepod-16", 4, 4, "4x4", "tpuv5e:4x4"),
        ("v5e-16", "v5litepod-16", 4, 4, "4x4", "tpuv5e:4x4"),
        # xpk's layout: 2 hosts of the 4-chip machine (the 8-chip host would be tpuv5e1t).
        ("V5LITEPOD-8", "v5litepod-8", 2, 4, "2x4", "tpuv5e:2x4"),
        ("v6e-8", "v6e-8", 2, 4, "2x4", "tpuv6e:2x4"),
        ("v5litepod-4", "v5litepod-4", 1, 4, "2x2", "tpuv5e:2x2"),
        ("v4-8", "v4-8", 1, 4, "2x2x1", "tpuv4:2x2x1"),
        ("v4-2x2x2", "v4-16", 2, 4, "2x2x2", "tpuv4:2x2x2"),
        ("v5p-128", "v5p-128", 16, 4, "4x4x4", "tpuv5:4x4x4"),
        ("v6e-256", "v6e-256", 64, 4, "16x16", "tpuv6e:16x16"),
        ("v6e-1", "v6e-1", 1, 1, "1x1", "tpuv6e:1x1"),
    ],
)
def test_lookup(name, canonical, hosts, chips_per_host, topology, instance):
    t = tpu.lookup(name)
    assert (t.name, t.hosts, t.chips_per_host, t.topology, t.pathways_instance_type) == (
        canonical, hosts, chips_per_host, topology, instance)
    assert t.hosts * t.chips_per_host == t.chips


def test_node_selectors_and_machine_types():
    assert tpu.lookup("v5litepod-16").accelerator == "tpu-v5-lite-podslice"
    assert tpu.lookup("v5litepod-16").machine_type == "ct5lp-hightpu-4t"
    assert tpu.lookup("v6e-8").machine_type == "ct6e-standard-4t"
    assert tpu.lookup("v5litepod-8").machine_type == "ct5lp-hightpu-4t"
    assert tpu.lookup("v6e-1").machine_type == "ct6e-standard-1t"
    assert tpu.lookup("v5litepod-4").machine_type == "ct5lp-hightpu-4t"
    assert tpu.lookup("v5p-8").accelerator == "tpu-v5p-slice"
    assert tpu.lookup("v4-32").accelerator == "tpu-v4-podslice"


@pytest.mark.parametrize(("name", "suggestion"), [
    ("v5lite-16", "v5litepod-16"), ("v5e16", "v5litepod-16"), ("v6e-15", "v6e-16"),
    ("v4-3x3x3", "v4-"),
])
def test_unknown_types_get_closest_matches(name, suggestion):
    with pytest.raises(UsageError) as e:
        tpu.lookup(name)
    assert "unknown TPU type" in e.value.message
    assert suggestion in e.value.hint


def test_nonsense_gets_family_list():
    with pytest.raises(UsageError) as e:
        tpu.lookup("gpu")
    assert "v5litepod-N" in e.value.hint


@pytest.mark.parametrize("name", ["v5litepod-1", "v5e-1", "v5litepod-1x1"])
def test_v5e_1x1_is_refused_naming_the_nearest_supported_type(name):
    with pytest.raises(UsageError) as e:
        tpu.lookup(name)
    assert "no Pathways mapping" in e.value.message and "\n" not in e.value.message
    assert "v5litepod-4" in e.value.hint
