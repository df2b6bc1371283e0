"""Backends that run a rendered JobSet: ``gke`` (a real cluster) and ``local`` (processes)."""
