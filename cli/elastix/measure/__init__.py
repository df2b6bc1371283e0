"""Measurement: events -> recoveries -> goodput, and the chaos drivers over a Backend."""
