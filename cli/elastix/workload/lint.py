"""The elastic lint: the four layers of an elastic run checked together, every finding at once.

An elastic run is configured in four places that must agree and that no other tool reads
together (the MaxText elastic guide leaves it to the user: "keep ``--max-slice-restarts`` and
``elastic_max_retries`` consistent", "do not enable profiling in an elastic run"; maxtext @
e591f30 ``docs/run_maxtext/run_maxtext_elastic_training.md`` L113, L117, on GitHub):

(a) the JobSet's budgets: the worker Job's ``backoffLimit`` (``--max-slice-restarts`` x hosts)
    and ``failurePolicy.maxRestarts`` (``--max-restarts``);
(b) the proxy's ``--num_elastic_slices`` (``--elastic-slices``);
(c) the trainer's own retry settings, read from the head's command line and environment:
    MaxText's ``elastic_*`` keys, ``enable_single_controller`` and ``profiler``; elastix-train's
    ``--max-slice-losses``, ``--slice-wait-timeout``, ``--elastic-mode``, ``--min-slices``;
(d) colocated Python: the workers' sidecar and MaxText's ``colocated_python_*`` keys.

Everything is read from the rendered manifest, so a user's ``--template`` and a manifest
written by hand are judged alike. A value the manifest does not show (a trainer elastix does
not know, an ``elastix-train --config`` file, a MaxText config other than ``base.yml``) is not
guessed: its rules are skipped.

No rule is stricter than the platform. An error is kept for what the platform itself refuses or
fails at start-up (MaxText refusing ``elastic_enabled`` without a single controller); it stops
``workload create`` (exit 2, nothing submitted). What the platform would run, where the run
would only end sooner, lose goodput or surprise someone, is a warning that names the numbers and
the source: MaxText's own elastic guide runs ``--max-slice-restarts=10`` with
``elastic_max_retries=10``, which this lint used to refuse. elastix-train's defaults produce no
finding.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from elastix.errors import ProblemsError
from elastix.protocol import entrypoints, envvars
from elastix.workload import labels
from elastix.workload.manifest import pod_spec, replicated_job
from elastix.workload.trainer_command import TrainerCommand, flag, head_containers, trainer_command

Finding = tuple[str, str, str | None]
"""(rule, message, hint)."""

REPLACEMENT_WAIT_SECONDS = 50.0
"""The wait for a replacement slice on GKE, tens of seconds: maxtext#4043
(https://github.com/AI-Hypercomputer/maxtext/pull/4043, 2026-06-02) reports about 40 s from the
kill to training again, the replacement's wait included. A wait timeout below it fails even a recovery whose
replacement node was ready."""
REPLACEMENT_WARN_SECONDS = 2 * REPLACEMENT_WAIT_SECONDS
"""Below this a wait timeout is warned about: a replacement that needs a node repaired or
provisioned takes minutes (docs/fault-hunt.md row 3: "GKE takes minutes to replace a TPU VM")."""
SIDECAR_CONTAINER = "colocated-python-sidecar"
"""The workers' colocated-Python sidecar (xpk ``templates/pathways_workload_create.yaml.j2``
L167-173 and elastix ``pathways-jobset.yaml.j2`` render it under this name)."""
COLOCATED_KEYS = ("colocated_python_checkpointing", "colocated_python_data_input")
"""MaxText's colocated-Python switches (``maxtext/configs/base.yml`` L103, L949 of 0.2.5): both
run code on the TPU hosts through the sidecar ("Only applicable to Single Controller/Pathways")."""
MAXTEXT_DEFAULTS = {
    # maxtext/configs/base.yml of 0.2.5 (and configs/types.py ElasticTraining L2888-2912).
    "elastic_enabled": "false",  # L1567
    "elastic_timeout_seconds": "300",  # L1569
    "elastic_max_retries": "10",  # L1570
    "elastic_min_slice_count": "-1",  # L1571: -1 waits for every slice
    "enable_single_controller": "false",  # L1277
    "profiler": "",  # L1013: '', xplane or nsys
    "colocated_python_checkpointing": "false",  # L103
    "colocated_python_data_input": "false",  # L949
    # configs/types.py OrbaxStorage of 0.2.5: OCDBT and zarr3 on unless said otherwise.
    "checkpoint_storage_use_ocdbt": "true",
    "checkpoint_storage_use_zarr3": "true",
}
PATHWAYS_CHECKPOINT_KEYS = ("checkpoint_storage_use_ocdbt", "checkpoint_storage_use_zarr3")
"""MaxText's checkpoint format keys that its GCS checkpointing guide says to "Set to ``0`` for
Pathways" (maxtext @ e591f30 ``docs/guides/checkpointing_solutions/gcs_checkpointing.md``
L52-53): with ``ENABLE_PATHWAYS_PERSISTENCE=1`` pathwaysutils registers Orbax's
``CloudPathwaysArrayHandler`` (pathwaysutils 0.1.13 ``_initialize.py`` L91-103), which refuses
OCDBT ("OCDBT not supported for Pathways.", orbax-checkpoint 0.12.8
``cloud_pathways_array_handler.py`` L73-74)."""
_TRUE = frozenset({"true", "1", "yes", "on", "y", "t"})


class LintError(ProblemsError):
    """The elastic layers disagree: every error found, each with its fix."""

    subject = "in the elastic configuration; nothing was submitted"


@dataclasses.dataclass
class Findings:
    """What the lint found: errors stop a run, warnings are notes."""

    errors: list[Finding] = dataclasses.field(default_factory=list)
    warnings: list[Finding] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def one(f: Finding) -> dict[str, Any]:
            return {"rule": f[0], "message": f[1], "hint": f[2]}

        return {"errors": [one(f) for f in self.errors],
                "warnings": [one(f) for f in self.warnings]}


@dataclasses.dataclass(frozen=True)
class Platform:
    """Layers (a), (b) and (d) as the manifest renders them."""

    slices: int  # the worker ReplicatedJob's replicas
    hosts: int  # pods of one slice's Job (its completions)
    slice_restarts: int  # how often the worker Job replaces each slice in-process
    elastic_slices: int  # the proxy's --num_elastic_slices (0: absent)
    max_restarts: int  # failurePolicy.maxRestarts
    sidecar: bool  # a colocated-python sidecar on the workers

    @property
    def losses(self) -> int:
        """Slice losses the JobSet replaces in-process before a worker Job fails: each slice's
        Job survives ``slice_restarts`` of them (:func:`elastix.workload.platform.
        worker_backoff_limit`: one loss costs ``hosts`` pod failures), and there is one Job a
        slice."""
        return self.slice_restarts * self.slices if self.elastic_slices > 0 else 0


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _number(value: str | None) -> float | None:
    """A finite number, or None (unset, or not one: the trainer refuses that itself)."""
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def platform_layers(manifest: dict[str, Any]) -> Platform:
    """Read (a), (b), (d) from a rendered JobSet."""
    worker = replicated_job(manifest, labels.WORKER_JOB) or {}
    job = (worker.get("template") or {}).get("spec") or {}
    hosts = max(_int(job.get("completions", 1), 1), 1)
    # Kubernetes' Job default backoffLimit is 6 (batch/v1 JobSpec).
    backoff = _int(job.get("backoffLimit", 6), 6)
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    # --max-slice-restarts 0 asks for no in-process replacement: the backoffLimit of 4 x hosts
    # it renders is for Pathways' suspend-resume (platform.worker_backoff_limit), not slice loss.
    restarts = 0 if str(annotations.get(labels.MAX_SLICE_RESTARTS)) == "0" else backoff // hosts
    policy = (manifest.get("spec") or {}).get("failurePolicy") or {}
    slices = max(_int(worker.get("replicas", 1), 1), 1)
    # --slice-restart job: a RestartJob rule on the workers recreates a failed slice's Job while
    # the JobSet's one total of restarts is under maxRestarts (JobSet v0.12 failure_policy.go
    # L350, L548; platform.failure_policy): maxRestarts spread over the slices.
    rule = next((r for r in policy.get("rules") or [] if isinstance(r, dict) and
                 labels.WORKER_JOB in (r.get("targetReplicatedJobs") or [labels.WORKER_JOB])),
                None)
    if rule is not None and rule.get("action") == "RestartJob":
        restarts = _int(policy.get("maxRestarts", 0), 0) // slices
    elif rule is not None and rule.get("action") == "RestartJobAndIgnoreMaxRestarts":
        restarts = 10 ** 6  # unbounded: as pathwaysutils' builder's 1,000,000
    proxy = head_containers(manifest).get(labels.PROXY_CONTAINER) or {}
    elastic = _int(flag([str(a) for a in proxy.get("args") or []], "--num_elastic_slices"), 0)
    spec = pod_spec(worker)
    sidecar = any(c.get("name") == SIDECAR_CONTAINER for c in
                  (spec.get("initContainers") or []) + (spec.get("containers") or [])
                  if isinstance(c, dict))
    return Platform(slices=slices, hosts=hosts,
                    slice_restarts=max(restarts, 0), elastic_slices=elastic,
                    max_restarts=_int(policy.get("maxRestarts", 0), 0), sidecar=sidecar)


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Layer (c), one trainer's settings in common terms; None where the manifest does not say."""

    name: str  # "MaxText" or "elastix-train"
    elastic: bool | None  # recovers in-process from a slice loss
    explicit_elastic: bool  # the user asked for elastic behaviour (a flag or key given)
    budget: int | None  # the retry setting's value
    budget_field: str
    survived: int | None  # slice losses it recovers from before giving up
    timeout: float | None  # seconds it waits for slices
    timeout_field: str
    min_slices: int | None  # replica-resize: fewest slices it trains on; None: pause-resume
    min_field: str
    single_controller: bool | None = None
    profiler: str | None = None
    colocated: tuple[str, ...] | None = None  # colocated-python keys turned on
    persistence: bool = False  # ENABLE_PATHWAYS_PERSISTENCE=1 in the head's main container
    pathways_format: tuple[str, ...] | None = None  # PATHWAYS_CHECKPOINT_KEYS still on


def _maxtext(cmd: TrainerCommand, slices: int) -> Trainer:
    words = cmd.words()
    yml = next((w for w in words if w.endswith((".yml", ".yaml")) and "=" not in w), None)
    # MaxText's defaults are base.yml's; another config file may set any key (unknown here).
    known = yml is None or os.path.basename(yml) == "base.yml"

    def get(name: str) -> str | None:
        value = cmd.maxtext_key(name)
        return value if value is not None else (MAXTEXT_DEFAULTS[name] if known else None)

    def boolean(name: str) -> bool | None:
        value = get(name)
        return None if value is None else value.strip().lower() in _TRUE

    retries = _number(get("elastic_max_retries"))
    min_count = _number(get("elastic_min_slice_count"))
    min_slices = None if min_count is None or min_count == -1 else int(min_count)
    resize = min_slices is not None and min_slices < slices  # else it waits for every slice
    survived = None
    if retries is not None:
        # pathwaysutils 0.1.13 elastic/manager.py L66-76: ElasticRetryLimit(max_retries) retries
        # while attempt < max_retries, attempts counted from 1: N allows N - 1 recoveries. In
        # replica-resize a replacement's arrival is an attempt too (ScaleUpSignalError,
        # L390-403; MaxText maybe_elastic_scale_up, utils/elastic_utils.py L269-295).
        survived = int(retries) - 1 if not resize else (int(retries) - 1) // 2
    colocated = tuple(k for k in COLOCATED_KEYS if boolean(k))
    fmt = tuple(k for k in PATHWAYS_CHECKPOINT_KEYS if boolean(k)) \
        if known or any(cmd.maxtext_key(k) is not None for k in PATHWAYS_CHECKPOINT_KEYS) \
        else None
    return Trainer(
        name="MaxText", elastic=boolean("elastic_enabled"),
        explicit_elastic=(cmd.maxtext_key("elastic_enabled") or "").lower() in _TRUE,
        budget=None if retries is None else int(retries), budget_field="elastic_max_retries",
        survived=survived, timeout=_number(get("elastic_timeout_seconds")),
        timeout_field="elastic_timeout_seconds",
        min_slices=min_slices, min_field="elastic_min_slice_count",
        single_controller=boolean("enable_single_controller"), profiler=get("profiler"),
        colocated=colocated if known or any(cmd.maxtext_key(k) for k in COLOCATED_KEYS) else None,
        persistence=cmd.env.get(envvars.PATHWAYS_PERSISTENCE) == "1", pathways_format=fmt)


def _elastix_train(cmd: TrainerCommand, slices: int) -> Trainer:
    words = cmd.words()
    given = lambda *names: flag(words, *names)  # noqa: E731
    # A --config file may set any field; flags win over it (config.parse_args).
    known = given("--config") is None
    # The trainer's defaults, declared where the launcher may read them (the trainer's
    # TrainConfig takes them from there).
    defaults = {"slice_wait_timeout": entrypoints.SLICE_WAIT_TIMEOUT,
                "elastic_mode": entrypoints.ELASTIC_MODE}

    def get(name: str) -> str | None:
        value = given("--" + name.replace("_", "-"), "--" + name)
        return value if value is not None else (str(defaults[name]) if known else None)

    budget_text = given("--max-slice-losses", "--max_slice_losses")
    if budget_text is None and known:
        # The launcher's budget in the env wins over the default (config.parse_args L355-359).
        budget_text = cmd.env.get(envvars.MAX_SLICE_LOSSES, str(entrypoints.MAX_SLICE_LOSSES))
    budget = _number(budget_text)
    mode = get("elastic_mode")
    resize = mode == "replica-resize"
    min_text = given("--min-slices", "--min_slices")
    # replica-resize's default: all slices - 1, at least 1 (TrainConfig.min_slices).
    min_slices = (int(_number(min_text) or 0) if min_text is not None else max(slices - 1, 1)) \
        if resize else None
    # Asked for in-process recovery: replica-resize, or a slice-loss budget of its own.
    explicit = given("--elastic-mode") == "replica-resize" or \
        given("--min-slices") is not None or given("--max-slice-losses") not in (None, "0")
    return Trainer(
        name="elastix-train", elastic=True, explicit_elastic=explicit,
        budget=None if budget is None else int(budget), budget_field="--max-slice-losses",
        # elastic/runtime.py L239-254: it gives up when losses > --max-slice-losses.
        survived=None if budget is None else int(budget),
        timeout=_number(get("slice_wait_timeout")), timeout_field="--slice-wait-timeout",
        min_slices=min_slices, min_field="--min-slices")


def trainer_layer(manifest: dict[str, Any], slices: int) -> Trainer | None:
    """Layer (c) from the head's command line; None for a trainer elastix cannot read."""
    cmd = trainer_command(manifest)
    if cmd is None:
        return None
    if cmd.maxtext:
        return _maxtext(cmd, slices)
    if cmd.elastix_train:
        return _elastix_train(cmd, slices)
    return None


def lint(manifest: dict[str, Any]) -> Findings:
    """Every disagreement between the elastic layers of a rendered JobSet, at once."""
    out = Findings()
    p = platform_layers(manifest)
    t = trainer_layer(manifest, p.slices)
    _structure(p, out)
    _job_specs(manifest, out)
    if t is not None:
        _budget(p, t, out)
        _wait(p, t, out)
        _maxtext_rules(p, t, out)
        _min_slices(p, t, out)
        _elastic_off(p, t, out)
        _persistence(t, out)
    _colocated(p, t, out)
    return out


def _structure(p: Platform, out: Findings) -> None:
    # pathwaysutils 0.1.13 experimental/gke/jobset.py refuses elastic_slices > num_slices
    # (L386-540; https://pypi.org/project/pathwaysutils/0.1.13/); xpk 1.16.0 renders it unchecked
    # (https://pypi.org/project/xpk/1.16.0/). Pathways cannot lose more slices than there are.
    # A warning: xpk renders it and no platform part is known to refuse it; pathwaysutils'
    # own JobSet builder does (a ValueError), and it means no more than "every slice".
    if p.elastic_slices > p.slices:
        out.warnings.append(("elastic-slices", f"the proxy's --num_elastic_slices="
                             f"{p.elastic_slices} is more than the workload's {p.slices} slices "
                             "(worker replicas): at most every slice can be missing "
                             "(pathwaysutils' JobSet builder refuses it)",
                             f"use --elastic-slices {p.slices} (or fewer)"))


_UNSET_RESTART = "unset (JobSet's webhook makes it OnFailure)"
"""JobSet v0.12.0 ``pkg/webhooks/jobset_webhook.go`` ``Default`` (L111-161) sets a replicated
job's pod ``restartPolicy`` to OnFailure when the template leaves it out."""


def _job_specs(manifest: dict[str, Any], out: Findings) -> None:
    # The JobSet controller creates one Job a replica from each template; the API server then
    # validates it as any Job: "only \"Never\" is supported when podFailurePolicy is specified"
    # (kubernetes pkg/apis/batch/validation/validation.go, validateJobSpecCommon; the Job field's
    # doc: "This field cannot be used in combination with restartPolicy=OnFailure"). JobSet
    # v0.12's webhook does not check it, so the JobSet is accepted and its Jobs never exist.
    # gcluster's Pathways template renders podFailurePolicy on its OnFailure workers when its
    # PodFailurePolicy is set (cluster-toolkit pkg/orchestrator/gke/templates/
    # pathways_jobset.tmpl @ 7993057).
    for rj in (manifest.get("spec") or {}).get("replicatedJobs") or []:
        job = ((rj or {}).get("template") or {}).get("spec") or {}
        restart = pod_spec(rj).get("restartPolicy")
        if job.get("podFailurePolicy") is not None and restart != "Never":
            name = rj.get("name")
            out.errors.append(("pod-failure-policy", f"replicated job {name!r} has a "
                               f"podFailurePolicy and restartPolicy {restart or _UNSET_RESTART}: the "
                               "API server refuses every Job made from it (only \"Never\" is "
                               "supported when podFailurePolicy is specified), so the workload "
                               "never starts",
                               f"set restartPolicy: Never in the pod template of {name!r}, or "
                               "drop its podFailurePolicy"))


def _budget(p: Platform, t: Trainer, out: Findings) -> None:
    # The JobSet replaces up to slice_restarts losses of each slice in-process (worker Job
    # backoffLimit = restarts x hosts: pathways-job pathwaysjob_controller.go L692, L712-715;
    # xpk src/xpk/commands/workload.py L277-281). A trainer that gives up sooner exits, fails the
    # head Job (backoffLimit 0) and costs a whole-JobSet restart (new pods, new processes, a
    # restore from storage) or the run, with replacements left unused. The local hunt
    # found it: chaos run --kills 20 ended the trainer at kill 11 against 10 x 2 restarts.
    if not (p.losses and t.elastic and t.survived is not None) or t.survived >= p.losses:
        return
    if t.name == "MaxText":
        twice = _resizes(p, t)
        need = (2 if twice else 1) * p.losses + 1
        why = ("pathwaysutils counts the first attempt too"
               + ("; in replica-resize a loss and its scale-up are an attempt each" if twice else ""))
    else:
        need, why = p.losses, f"it gives up at loss {t.budget + 1}" if t.budget is not None else ""
    # A warning, not an error: the platform runs it, and a smaller trainer budget only ends the
    # run sooner. MaxText's elastic guide (maxtext @ e591f30
    # docs/run_maxtext/run_maxtext_elastic_training.md L89-92, L107-113) runs 10 against 10
    # and asks only to "keep [them] consistent".
    losses = f"{t.survived} slice loss{'' if t.survived == 1 else 'es'}"
    replaced = f"{_n(p.slice_restarts, 'restart')} x {_n(p.slices, 'slice')}"
    out.warnings.append(("budget", f"{t.name} {_setting(t, t.budget_field, t.budget)} recovers "
                       f"from {losses}, but the JobSet replaces {p.losses} in-process "
                       f"({replaced}); {why}; then "
                       + ("the run fails (--max-restarts 0)" if p.max_restarts == 0 else
                          f"the whole JobSet restarts (--max-restarts {p.max_restarts})"),
                       f"set {_setting(t, t.budget_field, need)}, or lower --max-slice-restarts to "
                       f"{_restarts_for(t.survived, p.slices)}"))


def _resizes(p: Platform, t: Trainer) -> bool:
    """replica-resize: the trainer goes on with fewer slices than the workload has."""
    return t.min_slices is not None and t.min_slices < p.slices


def _setting(t: Trainer, name: str, value: Any) -> str:
    """How the trainer spells a setting: MaxText ``key=value``, elastix-train ``--flag value``."""
    return f"{name}={value}" if t.name == "MaxText" else f"{name} {value}"


def _n(n: int, word: str) -> str:
    """``1 slice``, ``3 slices``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def _restarts_for(survived: int, slices: int) -> int:
    return max(survived // max(slices, 1), 0)


def _wait(p: Platform, t: Trainer, out: Findings) -> None:
    # pause-resume waits for the replacement (pathwaysutils elastic_retry: wait_for_slices with
    # the timeout before each attempt, manager.py L373-380 of
    # https://pypi.org/project/pathwaysutils/0.1.13/; a TimeoutError there is not retried).
    # replica-resize goes on with the survivors instead.
    if not (p.elastic_slices and t.elastic) or t.timeout is None or _resizes(p, t):
        return
    where = f"{t.name} {_setting(t, t.timeout_field, f'{t.timeout:g}')}"
    # Warnings: the platform runs it; a pathwaysutils wait that times out is not retried
    # (manager.py L373-380), so a short wait only ends the run at a slice loss.
    if t.timeout < REPLACEMENT_WAIT_SECONDS:
        out.warnings.append(("wait-timeout", f"{where} s is shorter than a slice replacement (about "
                           f"{REPLACEMENT_WAIT_SECONDS:g} s in the published run, with the node "
                           "ready): every slice loss would fail the run",
                           f"set {_setting(t, t.timeout_field, 300)} (the default)"))
    elif t.timeout < REPLACEMENT_WARN_SECONDS:
        out.warnings.append(("wait-timeout", f"{where} s leaves little room for a replacement "
                             f"(about {REPLACEMENT_WAIT_SECONDS:g} s with the node ready, minutes "
                             "when GKE replaces a TPU VM)", f"e.g. {_setting(t, t.timeout_field, 300)}"))


def _maxtext_rules(p: Platform, t: Trainer, out: Findings) -> None:
    if t.name != "MaxText" or not t.elastic:
        return
    if t.single_controller is False:
        # MaxText 0.2.5 configs/types.py L4695-4696 raises at start-up: "Elastic training is only
        # supported with Pathways (`enable_single_controller=True`)".
        out.errors.append(("single-controller", "MaxText elastic_enabled=true needs "
                           "enable_single_controller=true (MaxText refuses to start without it)",
                           "add enable_single_controller=true"))
    if t.profiler and t.profiler.strip().lower() not in ("", "none", "''", '""'):
        # MaxText elastic guide (maxtext @ e591f30 run_maxtext_elastic_training.md L117): "Do not
        # enable profiling in an elastic run. An elastic event ... in the middle of a profile is
        # not supported".
        # MaxText starts and trains with it; only a loss during a profile is unsupported.
        out.warnings.append(("profiler", f"MaxText profiler={t.profiler} in an elastic run: a slice"
                             " loss in the middle of a profile is not supported (MaxText's "
                             "elastic guide: \"Do not enable profiling in an elastic run\")",
                             "drop profiler=; profile a separate, non-elastic run"))


def _min_slices(p: Platform, t: Trainer, out: Findings) -> None:
    # replica-resize trains on at least min slices (MaxText elastic_min_slice_count, configs/
    # types.py L2910-2913; elastix-train --min-slices); Pathways keeps going only while at most
    # --num_elastic_slices are missing ("Resilient training with Pathways", https://cloud.google.com/ai-hypercomputer/docs/workloads/pathways-on-cloud/resilient-training).
    if t.min_slices is None or not t.elastic:
        return
    have = f"{t.name} {_setting(t, t.min_field, t.min_slices)}"
    if t.min_slices < 1:
        out.warnings.append(("min-slices", f"{have} is not a slice "
                             "count (-1 waits for every slice)", f"use 1..{max(p.slices - 1, 1)}"))
    elif t.min_slices > p.slices:
        out.warnings.append(("min-slices", f"{have} is more than the "
                             f"workload's {p.slices} slices: every wait times out",
                             f"use {_setting(t, t.min_field, max(p.slices - 1, 1))}"))
    elif p.elastic_slices and p.slices - t.min_slices > p.elastic_slices:
        out.warnings.append(("min-slices", f"{have} would train "
                             f"on with {p.slices - t.min_slices} slices missing, but the proxy "
                             f"gives up past {p.elastic_slices} (--elastic-slices)",
                             f"raise --elastic-slices to {p.slices - t.min_slices}, or "
                             f"{_setting(t, t.min_field, p.slices - p.elastic_slices)}"))


def _elastic_off(p: Platform, t: Trainer, out: Findings) -> None:
    if p.elastic_slices == 0 and t.explicit_elastic:
        # Without --num_elastic_slices the proxy keeps no slice missing: a loss fails the
        # trainer and the JobSet restarts (xpk 1.16.0 src/xpk/commands/workload.py L277-281).
        out.warnings.append(("elastic-slices", f"{t.name} is set up to recover in-process, but "
                             "the workload is not elastic (--elastic-slices 0): a slice loss "
                             "restarts the whole JobSet", "add --elastic-slices N"))
    elif p.elastic_slices > 0 and t.name == "MaxText" and t.elastic is False:
        # MaxText applies elastic_retry only with elastic_enabled (get_train_func, trainers/pre_train/train.py
        # L1511-1513; utils/elastic_utils.py L221-227).
        out.warnings.append(("elastic-enabled", f"the workload is elastic (--elastic-slices "
                             f"{p.elastic_slices}) but MaxText's elastic_enabled is off: a slice "
                             "loss ends the trainer and restarts the JobSet",
                             "add elastic_enabled=true enable_single_controller=true"))


def _persistence(t: Trainer, out: Findings) -> None:
    # A warning: MaxText documents the format for Pathways (PATHWAYS_CHECKPOINT_KEYS), but
    # elastix cannot see where a save would fail; elastix-train turns OCDBT off itself
    # (trainer/elastix_trainer/state/manager.py).
    if t.name != "MaxText" or not t.persistence or not t.pathways_format:
        return
    want = " ".join(f"{k}=false" for k in PATHWAYS_CHECKPOINT_KEYS)
    out.warnings.append(("pathways-persistence", "ENABLE_PATHWAYS_PERSISTENCE=1 with MaxText's "
                         f"{' and '.join(k + '=true' for k in t.pathways_format)}: MaxText's "
                         "checkpointing guide says to set both to 0 for Pathways, and Orbax's "
                         "Pathways handler refuses OCDBT", f"add {want}"))


def _colocated(p: Platform, t: Trainer | None, out: Findings) -> None:
    # MaxText's colocated_python_* run on the TPU hosts through the workers' sidecar (base.yml
    # L103, L949 @ e591f30; neither MaxText nor xpk checks that the keys and the sidecar agree).
    on = t.colocated if t is not None and t.name == "MaxText" else None
    if on and not p.sidecar:
        out.warnings.append(("colocated-python", f"MaxText {', '.join(k + '=true' for k in on)} "
                             "but the workers run no colocated-python sidecar",
                             "add --colocated-python-sidecar-image IMAGE"))
    elif p.sidecar and t is not None and (on == () or t.name == "elastix-train"):
        what = "elastix-train has no colocated-Python path" if t.name == "elastix-train" else \
            f"no MaxText {' or '.join(COLOCATED_KEYS)} is on"
        out.warnings.append(("colocated-python", f"the workers run a colocated-python sidecar, but "
                             f"{what}: it idles on every TPU host",
                             "drop --colocated-python-sidecar-image"))
