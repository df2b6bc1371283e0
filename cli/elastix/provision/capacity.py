"""TPU capacity types of ``cluster create``: on-demand, Spot, a reservation, or flex-start.

xpk 1.16.0 takes the same four flags on ``cluster create`` (``src/xpk/parser/cluster.py``
L862-905) and turns the one given into node-pool flags of gcloud (``src/xpk/core/capacity.py``
L112-155); elastix sends the same settings as fields of the GKE API's ``NodePool``. The xpk lines
cited here are identical in the 1.16.0 wheel and at commit 367c838 (compared file by file).

Only the TPU pools carry the capacity type: xpk creates the Pathways CPU pool ``cpu-np`` with
no capacity argument at all (``src/xpk/core/nodepool.py`` L406-420), so the head pool stays
on-demand and keeps its own size flags whatever is chosen here.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

ON_DEMAND, SPOT, RESERVATION, FLEX = "on-demand", "spot", "reservation", "flex"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
"""The reservation-affinity key GKE matches a specific reservation by (what gcloud's
``--reservation-affinity=specific --reservation=R`` sends)."""
FLEX_UNSUPPORTED = ("v3", "v4")
"""TPU generations GKE's flex-start does not provision: "TPU v3 and v4 are not supported" (GKE,
"About flex-start provisioning mode", cloud.google.com/kubernetes-engine/docs/concepts/
provisioning-model, read 2026-12-04; its zone table lists v5e, v5p and v6e, and TPUs need GKE
1.33.0-gke.1712000 or later). GKE refuses such a pool only at its create, after the cluster and
its CPU pool exist, so elastix refuses before any request."""
FLEX_SUPPORTED = "v5e (v5litepod), v5p, v6e"
FLEX_MAX_DAYS = 7
"""Flex-start VMs run for at most seven days (the same page: "for up to seven days";
``maxRunDurationSeconds`` defaults to seven days): every slice is reclaimed within 7 days of its
scale-up, and an elastic run waits for its replacement."""
_RES_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_PROJECT = re.compile(r"^(?:[a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$")


@dataclasses.dataclass(frozen=True)
class Capacity:
    """The capacity type of the TPU pools.

    ``reservation`` is what the pools name in their affinity: the bare name when the reservation
    is the cluster's project's, else ``projects/OWNER/reservations/NAME`` (a shared reservation),
    as xpk's ``to_reservation_path`` writes it (``src/xpk/core/reservation.py`` L409-422).
    """

    kind: str = ON_DEMAND
    reservation: str | None = None
    reservation_project: str | None = None  # the project that owns the reservation
    reservation_name: str | None = None


def choose(project: str | None, *, on_demand: bool = False, reservation: str | None = None,
           spot: bool = False, flex: bool = False) -> tuple[Capacity, list[tuple[str, str, str]]]:
    """The capacity type the flags ask for, and the problems with them.

    At most one flag: xpk refuses two or more (``src/xpk/core/capacity.py`` L98-107). With none
    xpk refuses too and lists the reservations (``src/xpk/core/nodepool.py`` L81-90); elastix
    takes on-demand instead, which is what ``cluster create`` sent before these flags existed
    and what ``--on-demand`` sends (no capacity field at all, ``capacity.py`` L133-134), so
    existing scripts keep working and nothing is spent on capacity nobody asked for.
    """
    given = [f for f, on in (("--on-demand", on_demand), ("--reservation", reservation is not None),
                             ("--spot", spot), ("--flex", flex)) if on]
    if len(given) > 1:
        return Capacity(), [("capacity", f"{' and '.join(given)} were both given" if len(given) == 2
                             else f"{', '.join(given)} were all given",
                             "pass exactly one of --on-demand, --reservation NAME, --spot, --flex")]
    if spot:
        return Capacity(SPOT), []
    if flex:
        return Capacity(FLEX), []
    if reservation is None:
        return Capacity(ON_DEMAND), []
    return _reservation(reservation, project)


def flex_problems(generation: str) -> list[tuple[str, str, str]]:
    """``--flex`` on a TPU generation flex-start does not provision (:data:`FLEX_UNSUPPORTED`)."""
    if generation not in FLEX_UNSUPPORTED:
        return []
    return [("--flex", f"GKE's flex-start does not provision TPU {generation} (\"TPU v3 and v4 "
             "are not supported\", GKE's About flex-start provisioning mode)",
             f"use a generation it supports ({FLEX_SUPPORTED}), or --spot, --reservation NAME "
             "or --on-demand")]


def _reservation(text: str, project: str | None) -> tuple[Capacity, list[tuple[str, str, str]]]:
    """``NAME`` or ``projects/OWNER/reservations/NAME`` (a reservation shared from another
    project), the two forms xpk's ``_try_parse_reservation`` takes for a whole reservation
    (``src/xpk/core/reservation.py`` L374-406). Its block and sub-block forms and its comma list
    (one reservation per pool, ``reservation.py`` L316-330) are refused here: elastix targets
    one reservation with every TPU pool."""
    hint = "a reservation NAME in the cluster's project, or projects/OWNER/reservations/NAME"
    parts = text.split("/")
    owner = project
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == "reservations":
        owner, parts = parts[1], parts[3:]
        if not _PROJECT.match(owner):
            return Capacity(), [("--reservation", f"{owner!r} is not a project id", hint)]
    if len(parts) != 1 or "," in text:
        what = "a block or sub-block" if "reservationBlocks" in text else "several reservations" \
            if "," in text else "not a reservation"
        return Capacity(), [("--reservation", f"{text!r} is {what}; elastix takes one whole "
                             "reservation", hint)]
    if not _RES_NAME.match(parts[0]):
        return Capacity(), [("--reservation", f"{parts[0]!r} is not a reservation name", hint)]
    shared = owner is not None and owner != project
    affinity = f"projects/{owner}/reservations/{parts[0]}" if shared else parts[0]
    return Capacity(RESERVATION, affinity, owner, parts[0]), []


def apply(pool: Any, capacity: Capacity, hosts: int) -> None:
    """Set a TPU ``NodePool``'s capacity fields, as xpk's gcloud flags set them.

    - ``--spot``: ``config.spot`` (xpk ``capacity.py`` L135-136: ``--spot``).
    - ``--reservation R``: ``config.reservationAffinity`` SPECIFIC_RESERVATION on
      :data:`RESERVATION_KEY` = [R] (``capacity.py`` L145-148: ``--reservation-affinity=specific
      --reservation=R``, R from ``to_reservation_path``).
    - ``--flex``: ``config.flexStart``, no reservation, autoscaling 0..hosts with location policy
      ANY, no auto-repair, no initial nodes (``capacity.py`` L137-142: ``--flex-start
      --enable-autoscaling --location-policy=ANY --reservation-affinity=none
      --no-enable-autorepair --max-nodes=vms_per_slice``; ``nodepool.py`` L91-92 and L350-353:
      ``--num-nodes=0``). Not queued provisioning: xpk adds ``--enable-queued-provisioning`` only
      for a single-slice GPU cluster (``capacity.py`` L143-144, ``src/xpk/utils/kueue.py``
      L20-24), never for TPUs; a queued-provisioning pool gets nodes only through a
      ProvisioningRequest (Kueue's ``dws-prov`` admission check in xpk), which elastix does not
      create, so the slice's pods would wait forever.
    - ``--on-demand``: nothing (``capacity.py`` L133-134).
    """
    from google.cloud import container_v1

    if capacity.kind == SPOT:
        pool.config.spot = True
    elif capacity.kind == RESERVATION:
        pool.config.reservation_affinity = container_v1.ReservationAffinity(
            consume_reservation_type=container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION,
            key=RESERVATION_KEY, values=[capacity.reservation])
    elif capacity.kind == FLEX:
        pool.config.flex_start = True
        pool.config.reservation_affinity = container_v1.ReservationAffinity(
            consume_reservation_type=container_v1.ReservationAffinity.Type.NO_RESERVATION)
        pool.initial_node_count = 0
        pool.autoscaling = container_v1.NodePoolAutoscaling(
            enabled=True, min_node_count=0, max_node_count=hosts,
            location_policy=container_v1.NodePoolAutoscaling.LocationPolicy.ANY)
        pool.management.auto_repair = False


def describe(config: Any) -> str:
    """A pool's capacity type from its ``NodeConfig``, as ``cluster describe`` shows it."""
    from google.cloud import container_v1

    if config.spot or config.preemptible:
        return SPOT
    if config.flex_start:
        return FLEX
    affinity = config.reservation_affinity
    if affinity and affinity.consume_reservation_type == \
            container_v1.ReservationAffinity.Type.SPECIFIC_RESERVATION:
        return f"{RESERVATION} {','.join(affinity.values)}"
    return ON_DEMAND


# --- the reservation preflight ----------------------------------------------------------------


def reservation_url(capacity: Capacity, zone: str) -> str:
    """The Compute Engine API path of the reservation (``reservations.get``)."""
    return (f"compute/v1/projects/{capacity.reservation_project}/zones/{zone}/reservations/"
            f"{capacity.reservation_name}")


def reservation_problems(found: dict | None, capacity: Capacity, zone: str, machine_type: str,
                         hosts: int, slices: int) -> list[tuple[str, str, str]]:
    """What keeps the reservation from holding ``slices`` slices of ``hosts`` VMs each.

    As xpk checks before creating pools (``src/xpk/core/capacity.py`` L198-246, L377-475): the
    reservation must be READY (``reservation.py`` L206), its machine type the pools' (L393-407),
    and ``count - inUseCount`` VMs free for every slice (L455-458, L474-475). An aggregate
    reservation (accelerator counts, not VMs) is counted in chips: ``reservedResources`` minus
    ``inUseResources`` of the machine family's accelerator type (L459-472, ``reservation.py``
    L436-437).
    """
    where = f"{capacity.reservation_project}/{zone}"
    hint = (f"list them: gcloud compute reservations list --project "
            f"{capacity.reservation_project} --filter=zone:{zone}")
    if found is None:
        return [("--reservation", f"no reservation {capacity.reservation_name!r} in {where}", hint)]
    status = found.get("status")
    if status != "READY":
        state = status or "in no state"
        return [("--reservation", f"reservation {capacity.reservation_name} is {state}, not "
                 "READY", "wait until it is READY, or pick another")]
    need_vms = hosts * slices
    specific = found.get("specificReservation")
    if specific:
        have_type = ((specific.get("instanceProperties") or {}).get("machineType") or "")
        if have_type.rsplit("/", 1)[-1] != machine_type:
            return [("--reservation", f"reservation {capacity.reservation_name} holds "
                     f"{have_type or 'no machine type'}; the TPU pools need {machine_type}",
                     "pick the reservation of this TPU type, or the --tpu-type it holds")]
        count, used = int(specific.get("count") or 0), int(specific.get("inUseCount") or 0)
        free = max(0, count - used)
        if free < need_vms:
            return [("--reservation", f"reservation {capacity.reservation_name} has {free} free "
                     f"{machine_type} VMs ({count} reserved, {used} in use); {slices} slice(s) "
                     f"× {hosts} hosts need {need_vms}", "use fewer --num-slices, or another "
                     "reservation")]
        return []
    aggregate = found.get("aggregateReservation")
    if aggregate:
        family = machine_type.split("-")[0]
        chips = int(re.search(r"-(\d+)t$", machine_type).group(1)) if re.search(
            r"-(\d+)t$", machine_type) else 1

        def total(key: str) -> int:
            return sum(int((r.get("accelerator") or {}).get("acceleratorCount") or 0)
                       for r in aggregate.get(key) or []
                       if str((r.get("accelerator") or {}).get("acceleratorType", ""))
                       .rsplit("/", 1)[-1] == family)

        count, used = total("reservedResources"), total("inUseResources")
        if count == 0:
            return [("--reservation", f"reservation {capacity.reservation_name} has no {family} "
                     "accelerators", "pick the reservation of this TPU type")]
        free, need = max(0, count - used), need_vms * chips
        if free < need:
            return [("--reservation", f"reservation {capacity.reservation_name} has {free} free "
                     f"{family} chips ({count} reserved, {used} in use); {slices} slice(s) × "
                     f"{hosts} hosts × {chips} chips need {need}",
                     "use fewer --num-slices, or another reservation")]
        return []
    return [("--reservation", f"reservation {capacity.reservation_name} reserves neither VMs nor "
             "accelerators", "pick another reservation")]
