"""xpk's and kubectl's spellings that elastix does not take, and what to type instead.

xpk users bring their habits. A flag spelled and meaning the same in both is simply accepted
(``--tpu-type``, ``--num-slices``, ``--workload``, ``--cluster``...), and a few same-meaning
spellings are aliases (:data:`ALIASES`). Every other xpk flag of the Pathways commands is
listed here, per elastix command, so that ``main`` turns click's "No such option" into a
did-you-mean naming the elastix flag, or saying why elastix has none. The flag list is
``tests/fixtures/xpk_pathways_flags.json`` (read from xpk's parsers); ``docs/from-xpk.md``
is the prose. kubectl's habits (``get``, ``describe``, ``-A``, ``--for=delete``...) go
through the same two answers, worded as kubectl's (:data:`KUBECTL_SPELLINGS`,
:data:`KUBECTL_COMMANDS`, :func:`kubectl_for`); ``docs/from-xpk.md`` lists them too.
"""

from __future__ import annotations

# Same meaning, another spelling: accepted as aliases. Keyed by (command, elastix flag).
ALIASES: dict[tuple[str, str], tuple[str, ...]] = {
    ("workload create", "--termination-grace-period"): (
        "--termination-grace-period-seconds", "-tgps"),
    ("workload create", "--output-file"): ("--output-manifest-file",),
    ("workload create", "--ttl-after-finished"): ("--ttl-seconds-after-finished",),
    ("cluster create", "--cpu-machine-type"): ("--pathways-gce-machine-type",),
    ("cluster delete", "--yes"): ("--force",),
}

# xpk flag -> (the elastix flag to type, or None), and a note: how to use it, or why none.
Entry = tuple[str | None, str]

_EVERYWHERE: dict[str, Entry] = {
    "--project-number": ("--project", "elastix takes the project id"),
    "--skip-validation": (None, "elastix validates locally, before any request; "
                                "workload create --skip-preflight skips the cluster checks"),
    "--quiet": (None, "elastix asks only before deleting a cluster (--yes there)"),
    "--no-quiet": (None, "elastix asks only before deleting a cluster"),
    "--sandbox-kubeconfig": ("--kubeconfig", "elastix uses your kubeconfig, or the one given"),
    "--no-sandbox-kubeconfig": ("--kubeconfig", "elastix uses your kubeconfig, or the one given"),
    "--dependency-auto-download": (None, "elastix downloads no tools: it calls the APIs"),
    "--no-dependency-auto-download": (None, "elastix downloads no tools: it calls the APIs"),
    "--no-dry-run": (None, "leave out --dry-run"),
    "--enable-debug-logs": ("--debug", "a flag of elastix itself: elastix --debug ..."),
}

_READS = "this command only reads: it has no dry run"
_NO_CAPACITY = ("elastix asks for no capacity per workload: the cluster's node pools are the "
                "capacity (elastix cluster create --reservation NAME, --spot, "
                "--flex or --on-demand)")
_NO_KUBECONFIG = "elastix cluster commands get the cluster's credentials from the GKE API"
_CUSTOM_ARGS = "one argument a flag, repeated, not one string split at spaces"

SPELLINGS: dict[str, dict[str, Entry]] = {
    "workload create": {
        "--custom-pathways-server-args": ("--custom-rm-arg", _CUSTOM_ARGS),
        "--custom-pathways-proxy-server-args": ("--custom-proxy-arg", _CUSTOM_ARGS),
        "--custom-pathways-worker-args": ("--custom-worker-arg", _CUSTOM_ARGS),
        "--base-docker-image": ("--docker-image", "build the image first: elastix image build "
                                                  "--base-image IMAGE --tag TAG"),
        "--script-dir": ("--docker-image", "build your code into the image: elastix image build"),
        "--docker-name": (None, "the main container's name is fixed"),
        "--docker-image-pull-secret": (None, "use Artifact Registry with the nodes' identity"),
        "--storage": (None, "mount storage with your own --template"),
        "--use-parallel-containers": (None, "elastix renders one main container"),
        "--no-use-parallel-containers": (None, "elastix renders one main container"),
        "--use-vertex-tensorboard": (None, "not integrated; the trainer writes events "
                                           "(--events-path)"),
        "--experiment-name": (None, "not integrated; the trainer writes events (--events-path)"),
        "--on-demand": (None, _NO_CAPACITY), "--reservation": (None, _NO_CAPACITY),
        "--spot": (None, _NO_CAPACITY), "--flex": (None, _NO_CAPACITY),
    },
    "workload list": {
        "--filter-by-status": (None, "the table shows every workload's state; "
                                     "-o json to filter it"),
        "--filter-by-job": (None, "-l key=value selects by label; -o json to filter by name"),
        "--wait-for-job-completion": (None, "elastix workload status NAME --watch follows one "
                                            "workload"),
        "--timeout": (None, "elastix workload status NAME --watch follows one workload"),
        "--dry-run": (None, _READS),
    },
    "workload delete": {
        "--filter-by-job": (None, "delete by NAME (several: NAME NAME ...) or by label, "
                                  "-l key=value"),
        "--filter-by-status": (None, "delete by NAME (several: NAME NAME ...) or by label, "
                                     "-l key=value"),
        "--force": (None, "elastix workload delete does not ask for confirmation"),
    },
    "workload status": {  # xpk inspector
        "--print-to-terminal": (None, "status prints to the terminal (-o json for a file)"),
        "--dry-run": (None, _READS),
    },
    "cluster create": {
        "--default-pool-cpu-machine-type": (
            "--cpu-machine-type", "elastix makes one CPU pool, the Pathways head's"),
        "--default-pool-cpu-num-nodes": ("--cpu-nodes", "elastix makes one CPU pool, the "
                                                        "Pathways head's"),
        "--cluster-cpu-machine-type": ("--cpu-machine-type", "elastix makes one CPU pool, the "
                                                             "Pathways head's"),
        "--gke-version": ("--release-channel", "elastix picks a channel, not a version"),
        "--host-maintenance-interval": (None, "only in the v1beta1 API; elastix can exclude "
                                              "TPU pool upgrades: --maintenance-exclusion"),
        "--custom-cluster-arguments": (None, "elastix calls the GKE API, not gcloud"),
        "--custom-nodepool-arguments": (None, "elastix calls the GKE API, not gcloud"),
        "--custom-tpu-nodepool-arguments": (None, "elastix calls the GKE API, not gcloud"),
        "--enable-autoprovisioning": (None, "elastix makes one node pool per slice"),
        "--private": (None, "private clusters are not supported yet"),
        "--create-vertex-tensorboard": (None, "not integrated"),
        "--enable-mtc": (None, "elastix checkpoints through the trainer (Orbax on GCS)"),
        "--force": (None, "elastix cluster create asks for no approval"),
        "--sandbox-kubeconfig": (None, _NO_KUBECONFIG),
    },
    "cluster delete": {
        "--cluster-state-gcs-bucket": (None, "elastix keeps no cluster state outside GKE"),
        "--sandbox-kubeconfig": (None, _NO_KUBECONFIG),
    },
    "cluster describe": {
        "--dry-run": (None, _READS),
        "--sandbox-kubeconfig": (None, _NO_KUBECONFIG),
    },
}


def aliases(command: str, flag: str) -> tuple[str, ...]:
    """xpk's other spellings of ``flag`` of ``command``, to declare beside it."""
    return ALIASES.get((command, flag), ())


_ONE_NAMESPACE = ("elastix lists one namespace at a time: -n NAMESPACE (default: default); "
                  "the local backend has none")

# kubectl flags that elastix has no equivalent for, per command (same shape as SPELLINGS).
KUBECTL_SPELLINGS: dict[str, dict[str, Entry]] = {
    "workload list": {"-A": ("-n NAMESPACE", _ONE_NAMESPACE),
                      "--all-namespaces": ("-n NAMESPACE", _ONE_NAMESPACE)},
    "workload delete": {"--all": ("-l key=value", "elastix deletes by NAME or by label"),
                        "-A": ("-n NAMESPACE", _ONE_NAMESPACE),
                        "--all-namespaces": ("-n NAMESPACE", _ONE_NAMESPACE)},
    "workload status": {"-A": ("-n NAMESPACE", _ONE_NAMESPACE),
                        "--all-namespaces": ("-n NAMESPACE", _ONE_NAMESPACE)},
}


def did_you_mean(command: str, option: str) -> tuple[str, str] | None:
    """The message and hint for an xpk (or kubectl) flag ``option`` given to ``command``, or
    None.

    ``command`` is the path below ``elastix`` (``"workload create"``).
    """
    kubectl = KUBECTL_SPELLINGS.get(command, {}).get(option)
    if kubectl is not None:
        flag, note = kubectl
        return f"{option} is kubectl's; elastix {command} says {flag}", note
    entry = SPELLINGS.get(command, {}).get(option) or _EVERYWHERE.get(option)
    if entry is None:
        return None
    flag, note = entry
    if flag is None:
        return (f"{option} is an xpk flag; elastix {command} has no equivalent",
                f"{note} (docs/from-xpk.md)")
    return f"{option} is xpk's spelling; elastix says {flag}", f"{flag}: {note}"


# xpk's commands (group, command) that elastix names otherwise -> (the elastix command, note).
COMMANDS: dict[tuple[str, str], Entry] = {
    ("workload", "create-pathways"): ("workload create", "every elastix workload is a Pathways "
                                                         "JobSet"),
    ("cluster", "create-pathways"): ("cluster create", "every elastix cluster has the "
                                                       "Pathways head's CPU pool"),
    ("cluster", "list"): ("cluster describe NAME", "elastix describes one cluster by name"),
    ("cluster", "adapt"): (None, "elastix cluster create makes the pools it needs; "
                                 "workload create --skip-preflight runs on any cluster"),
    ("cluster", "cacheimage"): (None, "the nodes pull the image themselves"),
    ("", "inspector"): ("workload status NAME", "per-slice pods and phases, and why it is "
                                                "stuck"),
    ("", "info"): ("workload list", "the workloads and their slices"),
}


def _xpk_command(group: str, name: str) -> tuple[str, str] | None:
    entry = COMMANDS.get((group, name))
    if entry is None:
        return None
    typed = f"{group} {name}".strip()
    instead, note = entry
    if instead is None:
        return f"'{typed}' is an xpk command; elastix has none", f"{note} (docs/from-xpk.md)"
    return f"'{typed}' is xpk's; elastix says 'elastix {instead}'", note


# kubectl's commands typed to elastix (group, command) -> (the elastix command, note).
KUBECTL_COMMANDS: dict[tuple[str, str], Entry] = {
    ("", "get"): ("workload list", "one namespace's workloads (-o wide, -o name, -l key=value)"),
    ("", "describe"): ("workload status NAME", "its pods, slices, restarts and why it is stuck"),
    ("workload", "get"): ("workload list", "or elastix workload status NAME for one"),
    ("workload", "describe"): ("workload status NAME", "its pods, slices, restarts and why it "
                                                       "is stuck"),
}


def did_you_mean_command(group: str, name: str) -> tuple[str, str] | None:
    """The message and hint for an xpk or kubectl command ``name`` typed under ``group``, or
    None.

    ``group`` is the path below ``elastix`` (``"workload"``; ``""`` at the top).
    """
    kubectl = KUBECTL_COMMANDS.get((group, name))
    if kubectl is not None:
        typed = f"{group} {name}".strip()
        return f"'{typed}' is kubectl's; elastix says 'elastix {kubectl[0]}'", kubectl[1]
    return _xpk_command(group, name)


# kubectl wait's --for values -> the elastix condition they mean exactly.
KUBECTL_FOR = {"delete": "deleted", "condition=complete": "completed",
               "condition=completed": "completed"}


def kubectl_for(value: str) -> str:
    """``workload wait --for``: kubectl's spelling of an elastix condition as that condition.

    Raises:
        UsageError: a kubectl condition elastix has no exact match for, answered with the
            nearest (``condition=Ready`` -> ``running`` or ``stepping``).
    """
    from elastix.errors import UsageError

    exact = KUBECTL_FOR.get(value.lower())
    if exact is not None:
        return exact
    lower = value.lower()
    if lower.startswith(("condition=", "jsonpath=", "create")):
        cond = value.partition("=")[2] or value
        if lower in ("condition=ready", "condition=available", "create"):
            return _nearest(value, "running", "the workload's pods are up; --for stepping "
                                              "once it trains after a save")
        if lower.startswith("condition=failed"):
            return _nearest(value, "completed", "wait --for completed ends at once, exit 4, "
                                                "when the workload fails")
        raise UsageError(f"--for {value!r} is kubectl's; elastix waits for running, stepping, "
                         "completed or deleted", hint=f"no elastix condition is {cond!r}; "
                         "e.g. --for stepping (training, after its first save)")
    return value


def _nearest(value: str, cond: str, note: str) -> str:
    from elastix.errors import UsageError

    raise UsageError(f"--for {value!r} is kubectl's; the nearest elastix condition is "
                     f"--for {cond}", hint=note)
