"""Label and annotation keys, in one place for the launcher (the JobSet's own, which the trainer
reads too, are defined in ``elastix.protocol.jobset``). elastix selects pods with these labels
and never parses pod names.
"""

# Set by the JobSet controller on Jobs and Pods, and the replicated jobs' names: the trainer
# reads them too, so they are defined in the protocol and named here for the launcher.
from elastix.protocol.jobset import (  # noqa: F401 - re-exported
    COORDINATOR,
    EXCLUSIVE_TOPOLOGY,
    HEAD_JOB,
    JOB_GLOBAL_INDEX,
    JOB_INDEX,
    JOB_KEY,
    JOBSET_NAME,
    REPLICATED_JOB_NAME,
    REPLICATED_JOB_REPLICAS,
    RESTART_ATTEMPT,
    WORKER_JOB,
)

# Set by Kubernetes' Job controller on pods of an Indexed Job.
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""Index of the pod within its Job (for ``worker``: the host index within the slice)."""

# Set by elastix.
WORKLOAD = "elastix.dev/workload"
"""Name of the elastix workload (equal to the JobSet name)."""
MANAGED_BY = "app.kubernetes.io/managed-by"
"""Always ``elastix`` on objects elastix creates."""
MANAGED_BY_VALUE = "elastix"
ELASTIC_SLICES = "elastix.dev/elastic-slices"
"""Annotation: how many slices may be lost and recovered in-process."""
MAX_SLICE_RESTARTS = "elastix.dev/max-slice-restarts"
"""Annotation: how many times each slice may be recreated before the JobSet restarts."""
EVENTS_PATH = "elastix.dev/events-path"
"""Annotation: the gs:// URI of the trainer's JSONL events (docs/events.md), when set."""

# Set by other launchers on the JobSets they make (elastix reads them: backends/gke/foreign.py).
XPK_WORKLOAD = "xpk.google.com/workload"
"""Label of xpk's JobSets and worker pods (tests/fixtures/xpk-1.16.0-pathways-elastic.yaml)."""
GCLUSTER_WORKLOAD = "gcluster.google.com/workload"
"""Label of Cluster Toolkit's ``gcluster job`` JobSets and worker pods (not its head pod):
``pkg/orchestrator/gke/templates/pathways_jobset.tmpl`` L6, L226 @ c765092."""
MADE_BY = ((WORKLOAD, "elastix"), (XPK_WORKLOAD, "xpk"), (GCLUSTER_WORKLOAD, "gcluster"))
"""The label each launcher puts on its JobSets, and the launcher's name (the first found)."""


def made_by(object_labels: dict[str, str] | None) -> str:
    """``elastix``, ``xpk`` or ``gcluster`` by a JobSet's labels; ``other`` for the rest (a
    user's YAML, pathways-job)."""
    found = object_labels or {}
    return next((who for key, who in MADE_BY if key in found), "other")


def elastix_made(object_labels: dict[str, str] | None, workload: str) -> bool:
    """Whether an object's labels prove it elastix's, made for ``workload``: both
    :data:`WORKLOAD` (the name) and :data:`MANAGED_BY` (``elastix``), as elastix sets them on
    a JobSet and on its head's ServiceAccount, Role and RoleBinding. What deletes an object
    requires it (``workload delete``)."""
    found = object_labels or {}
    return found.get(WORKLOAD) == workload and found.get(MANAGED_BY) == MANAGED_BY_VALUE


QUEUE_NAME = "kueue.x-k8s.io/queue-name"
"""Label: the Kueue LocalQueue (``--queue``)."""

RESERVED_PREFIXES = ("elastix.dev/", "jobset.sigs.k8s.io/", "batch.kubernetes.io/")
"""Label key prefixes that elastix, the JobSet controller and the Job controller set on the
JobSet and its pods (the JobSet's from kubernetes-sigs/jobset api/jobset/v1alpha2/
jobset_types.go, the Job's from Kubernetes' batch/v1 well-known labels): a ``--label`` there
would be overridden or would confuse the selectors elastix and JobSet use."""
RESERVED_KEYS = frozenset({MANAGED_BY, QUEUE_NAME})
"""Single keys elastix sets (``--queue`` sets the second)."""

MAIN_CONTAINER = "jax-tpu"
PROXY_CONTAINER = "pathways-proxy"
RM_CONTAINER = "pathways-rm"
WORKER_CONTAINER = "pathways-worker"
