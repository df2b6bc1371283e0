"""The ``ELASTIX_*`` environment names shared by the launcher, its processes and the trainer.

Each name is written by one side and read by the other; keeping them here means a rename cannot
leave one side reading a variable nobody sets.
"""

from __future__ import annotations

# -- set in the rendered JobSet (and by the local supervisor), read by the trainer -----------
WORKLOAD = "ELASTIX_WORKLOAD"
"""The workload's name."""
NUM_SLICES = "ELASTIX_NUM_SLICES"
MAX_SLICE_LOSSES = "ELASTIX_MAX_SLICE_LOSSES"
"""An elastic workload's slice-loss budget, rendered into the head's environment: its slice
restarts x slices (what the JobSet would replace). ``elastix-train``'s ``--max-slice-losses``
default, so the trainer and the launcher run out together."""
"""Slices of the workload; on CPU the trainer groups its devices into this many."""
EVENTS_FILE = "ELASTIX_EVENTS_FILE"
"""Where the trainer writes its JSONL events (overrides ``--events-file``)."""

# -- set by the local supervisor for the processes it starts ---------------------------------
DEVICES_PER_SLICE = "ELASTIX_DEVICES_PER_SLICE"
"""CPU devices per slice (the trainer's slice grouping)."""
WORKLOAD_DIR = "ELASTIX_WORKLOAD_DIR"
"""The local workload's state directory (the default command keeps checkpoints under it)."""
LOCAL_HEALTH = "ELASTIX_LOCAL_HEALTH"
"""Heartbeat address (``elastix.protocol.heartbeat``); set means "use local slice health"."""
HEALTH_TIMEOUT = "ELASTIX_HEALTH_TIMEOUT"
"""Seconds without a heartbeat after which a host counts as lost (also a submit-time knob)."""
DETECT_EXITS = "ELASTIX_DETECT_EXITS"
"""``0``: the local trainer notices a dead slice host by its missing heartbeats only (the
timeout), not the moment its process exits (Linux pidfd). For comparisons; default on."""
HEARTBEAT_KEY = "ELASTIX_HEARTBEAT_KEY"
"""The workload's heartbeat key (hex): every datagram of the heartbeat channel is sealed with it
(``elastix.protocol.heartbeat``). Made by the supervisor, kept in its memory and in the
environment of the processes it starts, never in a file."""
HEARTBEAT_INTERVAL = "ELASTIX_HEARTBEAT_INTERVAL"
"""Seconds between a slice host's heartbeats (also a submit-time knob)."""
HOSTS_PER_SLICE = "ELASTIX_HOSTS_PER_SLICE"
"""Hosts that must all heartbeat for a slice to be live."""
SLICE = "ELASTIX_SLICE"
"""The slice a slice-host process stands in for."""
HOST = "ELASTIX_HOST"
"""The host index, within its slice, of a slice-host process."""
SUPERVISOR_PID = "ELASTIX_SUPERVISOR_PID"
"""The supervisor's pid: a slice host exits when its parent is no longer this process."""
LOCAL_MARKER = "ELASTIX_LOCAL_MARKER"
"""A per-workload token in every local process's environment, to sweep escaped grandchildren."""

# -- read from the submitting (CLI) environment by the local backend -------------------------
LOCAL_SCHEDULING_DELAY = "ELASTIX_LOCAL_SCHEDULING_DELAY"
"""Seconds before a dead worker's replacement starts (a scheduler's delay)."""
LOCAL_HUNG_HOST_TIMEOUT = "ELASTIX_LOCAL_HUNG_HOST_TIMEOUT"
"""Seconds a slice host may make no progress (stopped, deadlocked) before the supervisor kills
and replaces it, as the platform replaces a hung TPU VM's pod; 0 never does."""
LOCAL_DEVICES_PER_SLICE = "ELASTIX_LOCAL_DEVICES_PER_SLICE"
"""CPU devices per slice instead of the default (1-2, so a multislice run fits a laptop); on an
accelerator (``ELASTIX_LOCAL_PLATFORM``), its chips per slice (default: all, divided evenly)."""
LOCAL_PLATFORM = "ELASTIX_LOCAL_PLATFORM"
"""The JAX platform the local head trains on: ``cpu`` (the default; CPU devices stand in for
the slices' chips) or this machine's accelerator (``tpu``): the slices are then its chips,
divided evenly, and the slice hosts stay processes, so a kill is still a real signal."""
STATE_DIR = "ELASTIX_STATE_DIR"
"""Where local workloads live (``--state-dir``)."""
MAXTEXT_PYTHON = "ELASTIX_MAXTEXT_PYTHON"
"""The MaxText environment's Python, which runs a MaxText head command's leading ``python``
(default ``.venv-maxtext/bin/python`` of the elastix tree, made by ``.ci/setup-maxtext``)."""

# -- set by the local supervisor for a MaxText head, read by its sitecustomize ---------------
MAXTEXT_STANDIN = "ELASTIX_MAXTEXT_STANDIN"
"""``fault`` (a lost slice fails the step) or ``elastic`` (also pathwaysutils' Pathways check,
slices and probe): which parts of the local Pathways stand-in the MaxText head installs
(``elastix_trainer.elastic.local.maxtext``)."""
MAXTEXT_STANDIN_KILL_AT = "ELASTIX_MAXTEXT_STANDIN_KILL_AT"
"""An operation of a MaxText head on the local stand-in (``during the checkpoint copy of step
10``, ``before step 12``) at which the stand-in SIGKILLs slice 0's host 0 once, just before
the hosts are asked: a kill aimed inside an operation that lasts milliseconds."""

# -- user knobs both halves honour ---------------------------------------------------------------
DEBUG = "ELASTIX_DEBUG"
"""Set: the entry points print tracebacks (``elastix --debug`` sets it for the trainer too)."""

LOCAL_DATA_DIR = "ELASTIX_LOCAL_DATA_DIR"
"""Local backend: a directory of the workload's that outlives it (``<state-dir>/.data/<name>``),
kept across ``create --replace`` and ``delete`` unless ``delete --delete-data``; the default
local job keeps its checkpoints there."""

LOCAL_COMPILATION_CACHE = "ELASTIX_LOCAL_COMPILATION_CACHE"
"""Local backend: JAX's persistent compilation cache shared by every workload of the state
directory (``<state-dir>/.cache/jax``), so a new workload of a model compiled before starts
warm; ``elastix-train``'s default ``--compilation-cache-dir`` there. Set by the supervisor
unless the launcher's environment or ``--env`` sets it (``off``: none). ``delete
--delete-data`` never removes it."""

DATA_CACHE = "ELASTIX_DATA_CACHE"
"""Where the trainer keeps local copies of ``gs://`` ArrayRecord shards (default: the temp
dir)."""

PATHWAYS_PERSISTENCE = "ENABLE_PATHWAYS_PERSISTENCE"
"""Pathways' own switch (not elastix's), set to ``1`` by ``--pathways-persistence``: TPU hosts
read and write checkpoint data themselves. The trainer then saves without OCDBT (MaxText's
``checkpoint_storage_use_ocdbt``: "Set to 0 for Pathways") and lets every host read its own
shards."""

POD_WATCH = "ELASTIX_POD_WATCH"
"""``0``: the GKE head does not watch its worker pods (``elastix_trainer.elastic.podwatch``); a slice
last seen down is then re-probed on Pathways' poll only. For comparisons; default on."""
