"""`cluster create` capacity types (--on-demand, --reservation, --spot, --flex) over real HTTP.

The CLI runs in-process against the fake GKE API (``tests/fakes/fake_gke.py``), which also serves
the Compute Engine reservation read; every request the REST transports sent is what is checked.
Each type's requests are kept as a golden file beside the node-pool command xpk 1.16.0 runs for
the same flags (``tests/fixtures/xpk_capacity_nodepools.json``: read from xpk's code, not run);
``ELASTIX_REGEN_GOLDEN=1`` rewrites the elastix side.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fake_gke import FakeGke

from elastix.main import main
from elastix.provision import capacity

ARGS = ["cluster", "create", "c1", "--project", "my-proj-1", "--zone", "us-central1-a",
        "--tpu-type", "v5litepod-16", "--num-slices", "2", "--skip-jobset"]
KINDS = {"on-demand": ["--on-demand"], "spot": ["--spot"],
         "reservation": ["--reservation", "res-1"], "flex": ["--flex"]}
XPK = json.loads((Path(__file__).parents[1] / "fixtures" / "xpk_capacity_nodepools.json")
                 .read_text())
GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("ELASTIX_REGEN_GOLDEN") == "1"
# The REST transport sends enums as numbers (rest_numeric_enums): container v1
# ReservationAffinity.Type and NodePoolAutoscaling.LocationPolicy.
NO_RESERVATION, SPECIFIC_RESERVATION, ANY = 1, 3, 2
MACHINE = "ct5lp-hightpu-4t"  # v5litepod-16: 4 hosts of 4 chips


def _run(tmp_path, monkeypatch, *flags: str, reservations=()) -> tuple[int, FakeGke]:
    with FakeGke() as gke:
        for res in reservations:
            gke.add_reservation(*res)
        monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("ELASTIX_COMPUTE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(gke.adc_file(tmp_path / "adc.json")))
        rc = main([*ARGS, *flags])
    return rc, gke


def _sent(gke: FakeGke) -> list[dict]:
    return [{"method": m, "path": p, "body": b} for m, p, b in gke.requests if p != "/token"]


def _tpu_pools(gke: FakeGke) -> list[dict]:
    return [b["nodePool"] for m, p, b in gke.requests
            if m == "POST" and p.endswith("/nodePools")]


def _xpk_command(kind: str) -> list[str]:
    common, spec = XPK["common_args"], XPK["capacity"][kind]
    out = list(common["command"])
    for arg, _ in common["args"]:
        if arg == "<capacity args>":
            out += spec["capacity_args"]
        else:
            out.append(arg.replace("<num_nodes>", str(spec["num_nodes"])))
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_golden_requests_beside_xpk(kind, tmp_path, monkeypatch):
    res = [("my-proj-1", "us-central1-a", "res-1", MACHINE, 8)]
    rc, gke = _run(tmp_path, monkeypatch, *KINDS[kind], reservations=res)
    assert rc == 0
    doc = {"flags": KINDS[kind], "elastix_requests": _sent(gke),
           "xpk_tpu_pool_command": _xpk_command(kind),
           "xpk_source": f"{XPK['capacity'][kind]['cited']} (tests/fixtures/"
                         "xpk_capacity_nodepools.json: read from xpk's code, not run)"}
    text = json.dumps(doc, indent=2) + "\n"
    path = GOLDEN / f"capacity-{kind}.json"
    if REGEN or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"regenerate with ELASTIX_REGEN_GOLDEN=1 ({path.name})"


def test_on_demand_and_no_flag_send_no_capacity_field(tmp_path, monkeypatch):
    _, on_demand = _run(tmp_path, monkeypatch, "--on-demand")
    _, default = _run(tmp_path, monkeypatch)
    assert _sent(on_demand) == _sent(default)  # none given is on-demand (xpk refuses: docs)
    for pool in _tpu_pools(on_demand):
        assert {"spot", "flexStart", "reservationAffinity"} & set(pool["config"]) == set()
        assert pool["initialNodeCount"] == 4 and "autoscaling" not in pool


def test_spot_pools(tmp_path, monkeypatch):
    rc, gke = _run(tmp_path, monkeypatch, "--spot")
    assert rc == 0
    pools = _tpu_pools(gke)
    assert len(pools) == 2 and all(p["config"]["spot"] is True for p in pools)
    head = gke.requests[1][2]["cluster"]["nodePools"][0]
    assert "spot" not in head["config"]  # the head pool stays on-demand, as xpk's cpu-np


def test_reservation_pools_name_it_and_it_is_read_first(tmp_path, monkeypatch):
    rc, gke = _run(tmp_path, monkeypatch, "--reservation", "res-1",
                   reservations=[("my-proj-1", "us-central1-a", "res-1", MACHINE, 8)])
    assert rc == 0
    for pool in _tpu_pools(gke):
        assert pool["config"]["reservationAffinity"] == {
            "consumeReservationType": SPECIFIC_RESERVATION,
            "key": "compute.googleapis.com/reservation-name", "values": ["res-1"]}
        assert pool["initialNodeCount"] == 4
    methods = [(m, p) for m, p, _ in gke.requests if p != "/token"]
    assert methods[1] == ("GET", "/compute/v1/projects/my-proj-1/zones/us-central1-a/"
                                 "reservations/res-1")
    assert methods[2][0] == "POST"  # the first change comes after the check


def test_a_shared_reservation_is_read_in_its_project_and_named_by_path(tmp_path, monkeypatch):
    path = "projects/owner-proj/reservations/res-9"
    rc, gke = _run(tmp_path, monkeypatch, "--reservation", path,
                   reservations=[("owner-proj", "us-central1-a", "res-9", MACHINE, 8, 0)])
    assert rc == 0
    assert ("GET", "/compute/v1/projects/owner-proj/zones/us-central1-a/reservations/res-9") in [
        (m, p) for m, p, _ in gke.requests]
    assert {tuple(p["config"]["reservationAffinity"]["values"]) for p in _tpu_pools(gke)} == {
        (path,)}


def test_flex_pools_autoscale_from_zero_to_one_slice(tmp_path, monkeypatch):
    rc, gke = _run(tmp_path, monkeypatch, "--flex")
    assert rc == 0
    for pool in _tpu_pools(gke):
        assert pool["config"]["flexStart"] is True
        assert pool["config"]["reservationAffinity"] == {
            "consumeReservationType": NO_RESERVATION}
        # 0 and false are proto3 defaults: the REST transport leaves them out of the JSON.
        assert "initialNodeCount" not in pool and "autoRepair" not in pool["management"]
        assert pool["autoscaling"] == {"enabled": True, "maxNodeCount": 4, "locationPolicy": ANY}
        assert "queuedProvisioning" not in pool  # as xpk for TPUs (capacity.py L143-144)
    head = gke.requests[1][2]["cluster"]["nodePools"][0]
    assert "flexStart" not in head["config"] and head["initialNodeCount"] == 1


@pytest.mark.parametrize("flags", [["--spot", "--flex"], ["--reservation", "r1", "--on-demand"],
                                   ["--spot", "--flex", "--on-demand"]])
def test_two_capacity_types_are_one_line_exit_2_nothing_sent(flags, tmp_path, monkeypatch, capsys):
    rc, gke = _run(tmp_path, monkeypatch, *flags)
    assert rc == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 2 and lines[1].startswith("hint: "), err
    assert lines[0].startswith("error: capacity: --") and "given" in lines[0]
    assert gke.requests == []


@pytest.mark.parametrize("tpu_type,generation", [("v4-8", "v4"), ("v4-32", "v4")])
def test_flex_on_a_generation_flex_start_lacks_is_refused_before_any_request(
        tpu_type, generation, tmp_path, monkeypatch, capsys):
    # GKE, "About flex-start provisioning mode": "TPU v3 and v4 are not supported". GKE itself
    # would refuse only the first TPU pool, after the cluster and cpu-np exist.
    flags = [a for a in ARGS]
    flags[flags.index("--tpu-type") + 1] = tpu_type
    with FakeGke() as gke:
        monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("ELASTIX_COMPUTE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(gke.adc_file(tmp_path / "adc.json")))
        rc = main([*flags, "--flex"])
    assert rc == 2 and gke.requests == []
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 2, err
    assert lines[0] == (f"error: --flex: GKE's flex-start does not provision TPU {generation} "
                        '("TPU v3 and v4 are not supported", GKE\'s About flex-start '
                        "provisioning mode)")
    assert "v5e (v5litepod), v5p, v6e" in lines[1]


@pytest.mark.parametrize("tpu_type", ["v5litepod-16", "v5p-8", "v6e-8"])
def test_flex_is_taken_for_the_generations_flex_start_supports(tpu_type, capsys):
    flags = [a for a in ARGS]
    flags[flags.index("--tpu-type") + 1] = tpu_type
    assert main([*flags, "--flex", "--dry-run"]) == 0


def test_flex_help_says_the_seven_day_limit(capsys):
    from typer.testing import CliRunner

    from elastix.main import app

    text = " ".join(CliRunner().invoke(app, ["cluster", "create", "--help"],
                                       terminal_width=200).output.split())
    assert "at most 7 days" in text and "not v3 or v4" in text


def test_a_missing_reservation_is_refused_before_any_change(tmp_path, monkeypatch, capsys):
    rc, gke = _run(tmp_path, monkeypatch, "--reservation", "nope",
                   reservations=[("my-proj-1", "us-central1-a", "res-1", MACHINE, 8)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "no reservation 'nope' in my-proj-1/us-central1-a" in err
    assert gke.mutations() == []
    assert gke.clusters == {}


def test_too_small_a_reservation_is_refused_with_the_numbers(tmp_path, monkeypatch, capsys):
    rc, gke = _run(tmp_path, monkeypatch, "--reservation", "res-1",
                   reservations=[("my-proj-1", "us-central1-a", "res-1", MACHINE, 10, 3)])
    assert rc == 2
    err = capsys.readouterr().err
    assert re.search(r"has 7 free ct5lp-hightpu-4t VMs \(10 reserved, 3 in use\); 2 slice\(s\) "
                     r"× 4 hosts need 8", err), err
    assert gke.mutations() == []


@pytest.mark.parametrize(("machine", "status", "needle"), [
    ("ct6e-standard-4t", "READY", "holds ct6e-standard-4t; the TPU pools need ct5lp-hightpu-4t"),
    (MACHINE, "CREATING", "is CREATING, not READY")])
def test_a_reservation_of_another_type_or_not_ready_is_refused(machine, status, needle, tmp_path,
                                                               monkeypatch, capsys):
    with FakeGke() as gke:
        gke.add_reservation("my-proj-1", "us-central1-a", "res-1", machine, 8, status=status)
        monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("ELASTIX_COMPUTE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(gke.adc_file(tmp_path / "adc.json")))
        assert main([*ARGS, "--reservation", "res-1"]) == 2
    assert needle in capsys.readouterr().err
    assert gke.mutations() == []


def test_a_resumed_create_counts_only_the_pools_still_to_make(tmp_path, monkeypatch):
    """Pools already made hold reservation VMs (in use): only the missing ones need free VMs."""
    with FakeGke() as gke:
        gke.add_reservation("my-proj-1", "us-central1-a", "res-1", MACHINE, 8, 4)
        gke.clusters["c1"] = {"name": "c1", "nodePools": [
            {"name": "cpu-np", "config": {"machineType": "n2-standard-64"}, "status": "RUNNING"},
            {"name": "tpu-slice-0", "config": {"machineType": MACHINE}, "status": "RUNNING"}]}
        monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("ELASTIX_COMPUTE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(gke.adc_file(tmp_path / "adc.json")))
        assert main([*ARGS, "--reservation", "res-1"]) == 0
    assert [p["name"] for p in _tpu_pools(gke)] == ["tpu-slice-1"]


@pytest.mark.parametrize(("value", "needle"), [
    ("projects/o-proj1/reservations/r/reservationBlocks/b", "a block or sub-block"),
    ("r1,r2", "several reservations"), ("Bad_Name", "is not a reservation name")])
def test_reservation_forms_elastix_does_not_take(value, needle, capsys, monkeypatch):
    monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", "http://127.0.0.1:9")  # nothing listens
    assert main([*ARGS, "--reservation", value, "--dry-run"]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_dry_run_prints_the_capacity_fields(kind, capsys):
    assert main([*ARGS, *KINDS[kind], "--dry-run"]) == 0
    out = capsys.readouterr().out
    want = {"on-demand": [], "spot": ['"spot": true'],
            "reservation": ['"consumeReservationType": "SPECIFIC_RESERVATION"',
                            '"values": [\n          "res-1"\n        ]',
                            "GET /compute/v1/projects/my-proj-1/zones/us-central1-a/"
                            "reservations/res-1"],
            "flex": ['"flexStart": true', '"consumeReservationType": "NO_RESERVATION"',
                     '"locationPolicy": "ANY"', '"maxNodeCount": 4']}[kind]
    for needle in want:
        assert out.count(needle) >= (1 if needle.startswith("GET") else 2), needle
    if kind == "on-demand":
        assert "reservationAffinity" not in out and '"spot"' not in out


def test_every_xpk_capacity_flag_has_its_field(tmp_path, monkeypatch):
    """Each gcloud flag xpk adds for a capacity type is a field of elastix's TPU pool."""
    wire = {"SPECIFIC_RESERVATION": SPECIFIC_RESERVATION, "NO_RESERVATION": NO_RESERVATION,
            "ANY": ANY}
    for kind, flags in KINDS.items():
        res = [("my-proj-1", "us-central1-a", "res-1", MACHINE, 8)]
        _, gke = _run(tmp_path, monkeypatch, *flags, reservations=res)
        pool = _tpu_pools(gke)[0]
        xpk_args = XPK["capacity"][kind]["capacity_args"]
        if XPK["capacity"][kind]["num_nodes"] == 0:
            xpk_args = [*xpk_args, "--num-nodes=0"]
        for arg in xpk_args:
            for field in XPK["gcloud_to_api"][arg].split(", "):
                name, value = (s.strip() for s in field.split("="))
                if not name.startswith("nodePool."):
                    name = "nodePool.config.reservationAffinity." + name
                got: object = {"nodePool": pool}
                for key in name.split("."):
                    got = got.get(key) if isinstance(got, dict) else None
                want = {"true": True, "false": False}.get(value, value)
                want = wire.get(want, want) if isinstance(want, str) else want
                if isinstance(want, str) and want.isdigit():
                    want = int(want)
                if isinstance(want, str) and want.startswith("["):
                    want = [want.strip("[]")]
                default = got is None and want in (0, False)  # proto3 default: not on the wire
                assert got == want or default, (kind, arg, name, got, want)


def test_the_real_cli_refuses_a_missing_reservation_and_changes_nothing(tmp_path):
    """The journey as a user runs it: a subprocess, its environment aimed at the fakes."""
    with FakeGke() as gke:
        env = gke.cli_env(tmp_path)
        env["PYTHONPATH"] = os.pathsep.join(sys.path)
        r = subprocess.run([sys.executable, "-m", "elastix", *ARGS, "--reservation", "nope"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "error: --reservation: no reservation 'nope' in my-proj-1/us-central1-a"
    assert len(lines) == 2 and lines[1].startswith("hint: list them: gcloud compute reservations")
    assert gke.mutations() == []
    assert ("GET", "/compute/v1/projects/my-proj-1/zones/us-central1-a/reservations/nope") in [
        (m, p) for m, p, _ in gke.requests]


def test_no_permission_on_the_reservation_is_a_clear_error(httpserver, tmp_path, monkeypatch,
                                                          capsys):
    path = "/compute/v1/projects/my-proj-1/zones/us-central1-a/reservations/res-1"
    httpserver.expect_request(path).respond_with_json(
        {"error": {"code": 403, "message": "Required 'compute.reservations.get' permission"}},
        status=403)
    with FakeGke() as gke:
        monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("ELASTIX_COMPUTE_API_ENDPOINT", httpserver.url_for("/"))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(gke.adc_file(tmp_path / "adc.json")))
        assert main([*ARGS, "--reservation", "res-1"]) == 1
    err = capsys.readouterr().err
    assert "permission denied reading" in err and "roles/compute.viewer" in err
    assert gke.mutations() == []


def _aggregate(reserved: int, in_use: int, family: str = "ct5lp") -> dict:
    accel = f"projects/my-proj-1/zones/us-central1-a/acceleratorTypes/{family}"
    return {"status": "READY", "aggregateReservation": {
        "vmFamily": "VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT5LP",
        "reservedResources": [{"accelerator": {"acceleratorCount": reserved,
                                               "acceleratorType": accel}}],
        "inUseResources": [{"accelerator": {"acceleratorCount": in_use,
                                            "acceleratorType": accel}}]}}


@pytest.mark.parametrize(("reserved", "in_use", "family", "needle"), [
    (32, 0, "ct5lp", None), (64, 40, "ct5lp", "has 24 free ct5lp chips (64 reserved, 40 in use)"),
    (64, 0, "ct6e", "has no ct5lp accelerators")])
def test_an_aggregate_reservation_is_counted_in_chips(reserved, in_use, family, needle):
    cap, problems = capacity.choose("my-proj-1", reservation="res-1")
    assert problems == []
    got = capacity.reservation_problems(_aggregate(reserved, in_use, family), cap,
                                        "us-central1-a", MACHINE, hosts=4, slices=2)
    if needle is None:
        assert got == []  # 2 slices × 4 hosts × 4 chips = 32
    else:
        assert len(got) == 1 and needle in got[0][1], got


def test_describe_names_each_pool_s_capacity(tmp_path, monkeypatch):
    """What --reservation made reads back from the GKE API as the pool's capacity."""
    from google.cloud import container_v1

    from elastix.provision import cluster

    rc, gke = _run(tmp_path, monkeypatch, "--reservation", "res-1",
                   reservations=[("my-proj-1", "us-central1-a", "res-1", MACHINE, 8)])
    assert rc == 0
    found = container_v1.Cluster.from_json(json.dumps(gke.clusters["c1"]),
                                           ignore_unknown_fields=True)
    assert [(p.name, p.capacity) for p in cluster.pools(found)] == [
        ("cpu-np", "on-demand"), ("tpu-slice-0", "reservation res-1"),
        ("tpu-slice-1", "reservation res-1")]
    for flags, want in ((["--spot"], "spot"), (["--flex"], "flex")):
        _, gke = _run(tmp_path, monkeypatch, *flags)
        found = container_v1.Cluster.from_json(json.dumps(gke.clusters["c1"]),
                                               ignore_unknown_fields=True)
        assert {p.capacity for p in cluster.pools(found)} == {"on-demand", want}
