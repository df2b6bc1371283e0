"""Label and annotation keys, in one place.

JobSet sets the ``jobset.sigs.k8s.io/*`` keys on every Job and Pod it creates
(kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``). elastix selects pods with
these labels and never parses pod names.
"""

# Set by the JobSet controller on Jobs and Pods.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
"""Name of the JobSet that owns the Job or Pod."""
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
"""Name of the replicated job (``pathways-head`` or ``worker``)."""
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
"""Number of replicas of the replicated job (for ``worker``: the number of slices)."""
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
"""Index of the Job within its replicated job (for ``worker``: the slice index)."""
JOB_KEY = "jobset.sigs.k8s.io/job-key"
"""SHA1 of the namespaced Job name: unique per Job."""
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
"""Index of the Job across the whole JobSet."""
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
"""How many times the whole JobSet has been restarted when this Job was created."""
COORDINATOR = "jobset.sigs.k8s.io/coordinator"
"""Stable DNS name of the coordinator pod (the Pathways head)."""
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
"""Annotation: one Job per topology domain (node pool = TPU slice)."""

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

HEAD_JOB = "pathways-head"
WORKER_JOB = "worker"
MAIN_CONTAINER = "jax-tpu"
PROXY_CONTAINER = "pathways-proxy"
RM_CONTAINER = "pathways-rm"
WORKER_CONTAINER = "pathways-worker"
