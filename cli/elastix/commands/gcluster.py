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
        "--compute-type": ("--tpu-type", "one TPU type for the machine type and topology: "
                                         "ct5lp-hightpu-4t with --topology 4x4 is v5litepod-16"),
        "--topology": ("--tpu-type", "the topology is part of the TPU type: v5litepod-16 "
                                     "is 4x4"),
        "--num-nodes": (None, "hosts per slice follow from --tpu-type"),
        "--name": ("NAME", "the workload's name is the first argument (or --workload)"),
        "--dry-run-out": ("--dry-run --output-file FILE", "no cluster needed: --dry-run is "
                                                          "offline"),
        "--gke-ttl-after-finished": ("--ttl-after-finished", _SECONDS),
        "--grace-period": ("--termination-grace-period", "the workers' grace, " + _SECONDS),
        "--pathways-colocated-python-sidecar-image": (
            "--colocated-python-sidecar-image", "the same image, elastix's name (too long "
                                                "for --help to show both)"),
        "--pathways": (None, "every elastix workload is a Pathways JobSet: leave it out"),
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
    "workload list": {
        "--status": (None, "the table shows every workload's state; -o json to filter it"),
        "--name-contains": (None, "-l key=value selects by label; -o name | grep by name"),
    },
}
"""gcluster flags with no same-meaning elastix flag, per elastix command: the flag to type
(or None) and how, or why there is none."""

JOB = ("gcluster job submit is 'elastix workload create', list 'elastix workload list --all', "
       "logs 'elastix logs NAME', cancel 'elastix workload delete NAME --foreign' "
       "(docs/from-gcluster.md)")
"""What ``elastix job ...`` is answered with: gcluster's ``job`` group, command by command."""


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


def did_you_mean_command(group: str, name: str) -> tuple[str, str] | None:
    """The message and hint for gcluster's ``job`` group typed to elastix, or None."""
    if (group, name) != ("", "job"):
        return None
    return "'job' is gcluster's command group; elastix's workloads are 'elastix workload'", JOB
