"""What a JobSet's pods carry, as both halves read it: the launcher selects and reports pods by
these labels, and the trainer on the head pod watches its workers by them (``podwatch``).

JobSet sets the ``jobset.sigs.k8s.io/*`` keys on every Job and Pod it creates
(kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``); the replicated jobs' names
are elastix's template's (``templates/pathways-jobset.yaml.j2``).
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

HEAD_JOB = "pathways-head"
WORKER_JOB = "worker"

# The JobSet API itself (the vendored CRD, templates/jobset-crd-v0.12.0.yaml): the head patches
# its own JobSet's annotations through it (``elastix_trainer.obs.recoverypoint``).
API_GROUP = "jobset.x-k8s.io"
API_VERSION = "v1alpha2"
PLURAL = "jobsets"
