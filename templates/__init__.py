"""Jinja2 templates and vendored schemas shipped as package data."""
