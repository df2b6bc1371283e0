"""What the launcher and the trainer agree on: environment names, event lines, wire formats.

Standard library only, and nothing else from ``elastix``: the trainer imports this package, and
so do the local backend's slice-host processes, which must start fast.
"""
