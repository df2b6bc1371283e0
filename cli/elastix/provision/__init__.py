"""Provisioning: a GKE cluster, the JobSet controller on it, the trainer image."""
