"""Cluster Toolkit's ``gcluster job`` spellings, answered as xpk's are (:mod:`.xpk`).

Google's newest MaxText elastic guide submits with ``gcluster job submit --pathways
--pathways-elastic-slices=1 --pathways-max-slice-restarts=10 ...``. A flag meaning the same in
both is accepted (``--num-slices``, ``--queue``, ``--priority``, ``--env``, ``--command``,
``--pathways-gcs-location``, ``--cluster``...), one meaning the same under another name is an
alias (:data:`ALIASES`), and every other flag of ``gcluster job submit/list/logs`` gets a
did-you-mean naming the elastix flag, or saying why there is none. The flag list is
``tests/fixtures/gcluster/job_flags.json``, read from GoogleCloudPlatform/cluster-toolkit
``cmd/job/*.go`` @ c765092; ``docs/from-gcluster.md`` is the prose.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from elastix.backends import Target
from elastix.errors import UsageError

Entry = tuple[str | None, str]

ALIASES: dict[tuple[str, str], tuple[str, ...]] = {
    ("workload create", "--docker-image"): ("--image",),
    ("workload create", "--elastic-slices"): ("--pathways-elastic-slices",),
    ("workload create", "--max-slice-restarts"): ("--pathways-max-slice-restarts",),
    ("workload create", "--max-restarts"): ("--restarts",),
    ("workload create", "--proxy-server-image"): ("--pathways-proxy-server-image",),
    ("workload create", "--server-image"): ("--pathways-server-image",),
    ("workload create", "--head-node-pool"): ("--pathways-head-np",),
    ("workload create", "--headless"): ("--pathways-headless",),
}
"""Same meaning, gcluster's name (``cmd/job/submit.go`` L129-179): declared beside the elastix
flag. ``--pathways-server-image`` also sets the workers' image in elastix, which runs one
server image on the resource manager and the workers."""

_ARGS = "one argument a flag, repeated, not one string split at spaces"
_NO_CAPACITY = ("capacity is the cluster's node pools in elastix: elastix cluster create "
                "--spot, --reservation NAME or --on-demand")
_WAIT = "submit returns at once; then: elastix workload wait NAME --for completed --timeout 2h"
_SECONDS = "in seconds (gcluster's 1h is 3600)"

SPELLINGS: dict[str, dict[str, Entry]] = {
    "workload create": {
        "--num-nodes": (None, "hosts per slice follow from --tpu-type"),
        "--dry-run-out": ("--dry-run --output-file FILE", "no cluster needed: --dry-run is "
                                                          "offline"),
        "--gke-ttl-after-finished": ("--ttl-after-finished", _SECONDS),
        "--grace-period": ("--termination-grace-period", "the workers' grace, " + _SECONDS),
        "--pathways-colocated-python-sidecar-image": (
            "--colocated-python-sidecar-image", "the same image, elastix's name (too long "
                                                "for --help to show both)"),
        "--pathways-worker-image": ("--server-image", "elastix runs one server image on the "
                                                      "resource manager and the workers"),
        "--pathways-proxy-args": ("--custom-proxy-arg", _ARGS),
        "--pathways-server-args": ("--custom-rm-arg", _ARGS),
        "--pathways-worker-args": ("--custom-worker-arg", _ARGS),
        "--pathways-proxy-env": (None, "--env sets the trainer's; the sidecars' and workers' "
                                       "environment: your own --template"),
        "--pathways-server-env": (None, "--env sets the trainer's; the sidecars' and workers' "
                                        "environment: your own --template"),
        "--pathways-worker-env": (None, "--env sets the trainer's; the sidecars' and workers' "
                                        "environment: your own --template"),
        "--base-image": ("--docker-image", "build the image first: elastix image build "
                                           "--base-image IMAGE --tag TAG"),
        "--build-context": ("--docker-image", "build the image first: elastix image build"),
        "--platform": ("--docker-image", "build the image first: elastix image build "
                                         "--platform"),
        "--mount": (None, "mount storage with your own --template"),
        "--gke-disable-parallel-containers": (None, "elastix renders one main container"),
        "--placement-policy": (None, "elastix cluster create gives each multi-host TPU pool "
                                     "its compact placement"),
        "--node-constraint": (None, "the workers select their TPU pools by type and "
                                    "topology, the head its pool (--head-node-pool); more: "
                                    "your own --template"),
        "--cpu-affinity": (None, "not for TPU workloads"),
        "--restart-on-exit-codes": (None, "a slice's failures count against "
                                          "--max-slice-restarts, whatever the exit code"),
        "--image-pull-secret": (None, "use Artifact Registry with the nodes' identity"),
        "--service-account": (None, "elastix makes the head's own account (docs/gke.md); "
                                    "Pathways pods reach Cloud Storage as the node's"),
        "--gke-scheduler": (None, "the default scheduler places the pods"),
        "--await-job-completion": (None, _WAIT),
        "--timeout": (None, _WAIT),
        "--verbose": (None, "elastix sets no log level on the workers; your own --template "
                            "can (TPU_MIN_LOG_LEVEL)"),
        "--gke-nap-provisioning": (None, _NO_CAPACITY),
        "--gke-nap-reservation": (None, _NO_CAPACITY),
    },
    "logs": {
        "--main-only": (None, "gcluster's --main-only=false interleaves every pod; elastix "
                              "logs reads one container: the head's trainer (gcluster's "
                              "main), a worker's with --slice S --host H, a sidecar's with "
                              "-c pathways-proxy"),
    },
    "workload list": {
        "--status": (None, "the table shows every workload's state; -o json to filter it"),
        "--name-contains": (None, "-l key=value selects by label; -o name | grep by name"),
    },
}
"""gcluster flags with no same-meaning elastix flag, per elastix command: the flag to type
(or None) and how, or why there is none."""

# -- the flags ``workload create`` takes as gcluster means them (cmd/job/submit.go) -----------

NameOpt = Annotated[str | None, typer.Option(
    "--workload", "--name", help="The workload NAME, as xpk (--workload) and gcluster "
                                 "(--name) spell it.", show_default=False)]
"""``--name``: "Name of the workload to create" (submit.go L140): xpk's ``--workload``."""
PathwaysOpt = Annotated[bool, typer.Option(
    "--pathways", hidden=True, help="gcluster's: every elastix workload is a Pathways JobSet "
                                    "(taken, changes nothing).")]
"""``--pathways``: "generate a manifest for a Pathways job" (submit.go L164): what every
elastix workload is, so it is taken and changes nothing."""
ComputeTypeOpt = Annotated[str | None, typer.Option(
    "--compute-type", help="gcluster's: a TPU machine type with --topology (ct5lp-hightpu-4t "
                           "with 4x4 is --tpu-type v5litepod-16), or a size (v6e-8).",
    show_default=False)]
TopologyOpt = Annotated[str | None, typer.Option(
    "--topology", help="gcluster's: the slice topology that goes with --compute-type (4x4).",
    show_default=False)]

_SIZE = re.compile(r"^(v4|v5p|v5litepod|v5e|v6e)-(\d+)$")
"""gcluster's size spelling of a TPU (``AcceleratorShorthandMap``, ``IsTPU``'s ``tpuRegex``):
the number counts chips, TensorCores only for v4 (``parseShorthand``)."""


def tpu_type(compute_type: str | None, topology: str | None
             ) -> tuple[str, str | None] | None:
    """elastix's ``--tpu-type`` for gcluster's ``--compute-type`` and ``--topology``, and the
    note saying so where elastix spells it otherwise; None when neither is given.

    gcluster (cluster-toolkit ``pkg/config/hardware.go``, ``pkg/orchestrator/gke/
    resource_resolver.go``) takes a machine type (``ct5lp-hightpu-4t``) whose slice size is
    ``--topology``'s, or a size (``v6e-8``, ``v5litepod-16``) counting chips (TensorCores for
    v4), ``--topology`` then picking the shape.

    Raises:
        UsageError: ``--topology`` alone, a machine type without it, no TPU, or a shape
            elastix cannot place.
    """
    from elastix.workload import tpu

    if compute_type is None:
        if topology is None:
            return None
        raise UsageError("--topology (gcluster's) goes with --compute-type: together they are "
                         "one TPU type", hint="e.g. --compute-type ct5lp-hightpu-4t --topology "
                                              "4x4, or --tpu-type v5litepod-16")
    said = f"--compute-type {compute_type}" + (f" --topology {topology}" if topology else "")
    key = compute_type.strip().lower()
    machines = {t.machine_type for t in tpu.types()}
    if key in machines:
        if topology is None:
            raise UsageError(f"--compute-type {compute_type} needs --topology, as gcluster's "
                             "does: a machine type says no slice size",
                             hint=f"e.g. --topology {_shapes(key)[0]}, or --tpu-type NAME")
        found = [t for t in tpu.types() if t.machine_type == key and t.topology == topology]
        if not found:
            raise UsageError(f"{said} is no TPU slice elastix can place",
                             hint=f"{key} takes --topology {', '.join(_shapes(key))}")
        name = found[0].name
    elif m := _SIZE.match(key):
        prefix, n = m.group(1), int(m.group(2))
        if topology is not None:
            spelled = f"{prefix}-{topology}"
        else:  # gcluster counts chips; elastix's v5p names count TensorCores, two a chip
            spelled = f"{prefix}-{n * 2 if prefix == 'v5p' else n}"
        err = tpu.problem(spelled)
        if err is not None:
            raise UsageError(f"{said} is no TPU slice elastix can place: {err[0]}", hint=err[1])
        name = tpu.lookup(spelled).name
    else:
        raise UsageError(f"--compute-type {compute_type} is not a TPU: elastix runs Pathways "
                         "on TPU slices", hint="a TPU machine type with --topology "
                                               "(ct5lp-hightpu-4t with 4x4), or --tpu-type NAME")
    why = (" (elastix counts v5p's TensorCores, two a chip, as Cloud TPU names it; gcluster "
           "its chips)" if name.startswith("v5p-") and _SIZE.match(key) else "")
    if key == name and topology is None:
        return name, None  # the size is spelled as elastix spells it
    return name, f"{said} is --tpu-type {name} in elastix's words{why}"


def with_tpu_type(flags: dict[str, Any], compute_type: str | None,
                  topology: str | None) -> dict[str, Any]:
    """The spec flags with gcluster's ``--compute-type``/``--topology`` said as ``--tpu-type``
    (a note where elastix spells it otherwise)."""
    translated = tpu_type(compute_type, topology)
    if translated is None:
        return flags
    if flags.get("tpu_type") is not None:
        raise UsageError("--compute-type and --tpu-type both name the TPU type",
                         hint="give one: --tpu-type NAME is elastix's spelling")
    flags["tpu_type"], note = translated
    if note:
        _note(note)
    return flags


def _note(text: str) -> None:
    from rich.markup import escape

    from elastix.views.console import console as make_console

    make_console(stderr=True).print(f"[yellow]note:[/] {escape(text)}")


def say_backend(kind: str, target: Target, flags: dict[str, Any], spec_file: Path | None,
                *, pathways: bool) -> bool:
    """A GKE-shaped create (an image, a ``gs://`` path, ``--pathways``) given no cluster and no
    ``--backend``: which backend it uses, said before anything is sent or started, and how to
    pick the other (gcluster's users keep their cluster in ``gcluster job config``, not on the
    line). A client dry run sends nothing and says nothing of it."""
    if target.backend or target.cluster or target.context:
        return False
    values = [v for v in flags.values() if v is not None]
    if spec_file is not None:
        from elastix.workload.resolve import load_spec_file

        values += list(load_spec_file(spec_file).values())
    words = str(values)
    shaped = [why for why, hit in (("--pathways", pathways),
                                   ("an image", flags.get("docker_image") is not None or
                                    "docker_image" in words),
                                   ("a gs:// path", "gs://" in words)) if hit]
    if not shaped:
        return False
    if kind == "local":
        said = ", ".join(shaped[:-1]) + (" and " if len(shaped) > 1 else "") + shaped[-1]
        _note(f"no cluster given ({said} say{'s' if len(shaped) == 1 else ''} GKE): this runs on the local "
              "backend, processes on this machine; for GKE give --cluster NAME --project "
              "PROJECT --location LOCATION (gcluster job config's three), or --backend gke "
              "with a kubeconfig context")
    else:
        _note(f"no --cluster given: this runs on GKE, on the current kubeconfig context's "
              f"cluster{' (' + target.kubeconfig + ')' if target.kubeconfig else ''}; "
              "--cluster NAME --project PROJECT --location LOCATION names another, "
              "--backend local runs it on this machine")
    return True


def _shapes(machine_type: str) -> list[str]:
    from elastix.workload import tpu

    return [t.topology for t in tpu.types() if t.machine_type == machine_type]

JOB = ("gcluster job submit is 'elastix workload create', list 'elastix workload list --all', "
       "logs 'elastix logs NAME', cancel 'elastix workload delete NAME --foreign' "
       "(docs/from-gcluster.md)")
"""What ``elastix job ...`` is answered with: gcluster's ``job`` group, command by command."""
CONFIG = ("give --cluster, --project and --location on each command (gcluster's three keys), "
          "or let elastix read the current kubeconfig context (gcloud container clusters "
          "get-credentials) or gcloud's configuration (gcloud config set project P) "
          "(docs/from-gcluster.md)")
"""What ``elastix job config ...`` (and ``elastix config``) is answered with: gcluster's
``job config set project|cluster|location`` (cmd/job/config.go), said elastix's way."""


def aliases(command: str, flag: str) -> tuple[str, ...]:
    """gcluster's other spellings of ``flag`` of ``command``, to declare beside it."""
    return ALIASES.get((command, flag), ())


def did_you_mean(command: str, option: str) -> tuple[str, str] | None:
    """The message and hint for a gcluster flag ``option`` given to ``command``, or None."""
    entry = SPELLINGS.get(command, {}).get(option)
    if entry is None:
        return None
    flag, note = entry
    if flag is None:
        return (f"{option} is a gcluster flag; elastix {command} has no equivalent",
                f"{note} (docs/from-gcluster.md)")
    return f"{option} is gcluster's spelling; elastix says {flag}", f"{flag}: {note}"


def did_you_mean_command(group: str, name: str, rest: list[str] = ()
                         ) -> tuple[str, str] | None:
    """The message and hint for gcluster's ``job`` group (or its ``config``) typed to elastix,
    or None; ``rest``: the words after ``name``."""
    if group != "" or name not in ("job", "config"):
        return None
    if name == "config" or rest[:1] == ["config"]:
        said = "job config" if name == "job" else "config"
        return f"'{said}' is gcluster's; elastix keeps no settings of its own", CONFIG
    return "'job' is gcluster's command group; elastix's workloads are 'elastix workload'", JOB
