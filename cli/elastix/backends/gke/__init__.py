"""The GKE backend: JobSets on a cluster through the Kubernetes API."""
