"""Thin Typer commands: parse flags, call the core, print. No heavy imports at module level."""
