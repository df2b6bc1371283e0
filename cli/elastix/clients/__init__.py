"""Thin adapters to external APIs (Kubernetes, GKE, Cloud Storage, Docker), imported lazily."""
