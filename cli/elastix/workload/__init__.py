"""The pure path from flags to a JobSet: WorkloadSpec, TPU catalogue, renderer, CRD check, labels."""
