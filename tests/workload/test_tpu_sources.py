"""The TPU catalogue against the vendored reference tables (tests/fixtures/PROVENANCE.md).

Every type elastix supports must agree, field by field, with the reference its row names:
xpk's system characteristics, or pathways-job's machine-type maps for shapes xpk lacks. Both
pathways-job and pathways-utils must give the same TPU version for the machine type.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from elastix.workload import tpu

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


XPK = {e["name"]: e for e in _load("xpk_system_characteristics.json")["entries"]}
PJ = _load("pathways_job_machine_types.json")["machine_types"]
PU = _load("pathwaysutils_machine_types.json")["machine_types"]


@pytest.mark.parametrize("t", tpu.types(), ids=lambda t: t.name)
def test_each_type_matches_its_reference(t):
    if t.source.startswith(tpu.XPK):
        ref = XPK[t.name]
        assert (t.topology, t.machine_type, t.chips_per_host, t.hosts, t.accelerator) == (
            ref["topology"], ref["gce_machine_type"], ref["chips_per_vm"],
            ref["vms_per_slice"], ref["gke_accelerator"])
        assert t.pathways_instance_type == f"{ref['pathways_tpu_version']}:{ref['topology']}"
    else:
        assert t.source == tpu.PJ and t.name not in XPK  # only for shapes xpk does not define
        ref = PJ[t.machine_type]
        assert t.topology in ref["valid_topologies"]
        chips = math.prod(int(d) for d in t.topology.split("x"))
        assert (t.chips_per_host, t.hosts, t.accelerator) == (
            ref["chips_per_vm"], max(1, chips // ref["chips_per_vm"]), ref["gke_accelerator"])
        assert t.pathways_instance_type == f"{ref['tpu_version']}:{t.topology}"


@pytest.mark.parametrize("t", [t for t in tpu.types() if t.machine_type in PJ],
                         ids=lambda t: t.name)
def test_pathways_job_and_utils_agree_on_the_version(t):
    version = t.pathways_instance_type.split(":")[0]
    assert PJ[t.machine_type]["tpu_version"] == version == PU[t.machine_type]["tpu_version"]
    assert PJ[t.machine_type]["gke_accelerator"] == t.accelerator == \
        PU[t.machine_type]["gke_accelerator"]
    assert PJ[t.machine_type]["chips_per_vm"] == t.chips_per_host


def test_only_v6e_1_lacks_a_pathways_job_machine_and_xpk_maps_it():
    assert [t.name for t in tpu.types() if t.machine_type not in PJ] == ["v6e-1"]
    assert XPK["v6e-1"]["gce_machine_type"] == tpu.lookup("v6e-1").machine_type


@pytest.mark.parametrize("machine", ["ct5lp-hightpu-8t", "ct6e-standard-8t"])
def test_no_type_uses_the_8_chip_machines_with_the_plain_version(machine):
    # The 8-chip hosts go with tpuv5e1t / tpuv6e1t in pathways-job and pathways-utils; elastix
    # uses the 2 x 4-chip layout (xpk) instead, so no row may name the 8t machine.
    assert PJ[machine]["tpu_version"].endswith("1t")
    assert all(t.machine_type != machine for t in tpu.types())


def test_names_xpk_and_pathways_job_lack_are_not_supported():
    absent = " ".join(_load("xpk_system_characteristics.json")["absent_in_xpk"])
    assert "1x1" in absent and "ct5lp-hightpu-1t" not in PJ and "ct5lp-hightpu-1t" not in PU
    for t in tpu.types():
        assert t.machine_type in PJ or t.name in XPK
