"""The fit check: the run's step compiled for the TPU slices it will run on, before they exist.

A user learns whether a run fits its chips, which remat policy it needs and how fast it will
step only once GKE has provisioned the slices, unless the step is compiled first. JAX compiles
for a TPU topology without a chip where libtpu is installed (``pip install 'elastix[tpu]'``).
What is compiled is the trainer's own step (``elastix-train fit-check``: its entry point, its
``auto`` choices; ``elastix_trainer.fitcheck``), started here in a process of the launcher's
own Python with the head's command line and environment, for the workload's TPU type and
every mesh its elastic policy can shrink to. The launcher never imports JAX.

Each report is kept (``<user cache>/elastix/fit-check/<key>.json``, private) under a key of
what it depends on: the trainer's flags and environment, the TPU type and slice count, the
versions of elastix, JAX, jaxlib and libtpu, the trainer's source, and a local
``--model-config`` file's bytes. ``workload create --dry-run`` runs the check; the real
``create`` of the same spec reuses its report instead of compiling again.

A MaxText head is compiled with MaxText's own ``train_compile.py`` in the MaxText environment
(``maxtext_fit``), into a report of the same shape.

Where nothing can be compiled the check is skipped in one line saying why (no libtpu, no
trainer, a command that is neither elastix-train nor MaxText's trainer, a MaxText environment
without libtpu); it never passes silently.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastix.backends.gke import maxtext_fit
from elastix.backends.gke.maxtext_fit import MaxTextPlan
from elastix.errors import ElastixError, UsageError
from elastix.protocol import entrypoints, envvars
from elastix.workload.trainer_command import TrainerCommand, flag, trainer_command

TPU_EXTRA = "pip install 'elastix[tpu]'"
"""What installs JAX's TPU compiler (libtpu) beside the trainer: the hint of a skipped check."""
ENV_PREFIXES = ("ELASTIX_",)
ENV_NAMES = ("ENABLE_PATHWAYS_PERSISTENCE", "LIBTPU_INIT_ARGS", "XLA_FLAGS")
"""The head's environment that changes what the trainer compiles or reports..."""
ENV_LEFT_OUT = (envvars.NUM_SLICES, envvars.DEVICES_PER_SLICE, envvars.EVENTS_FILE)
"""... less what describes the head's devices or files: the topology says the slices here."""
_SHELL_STOPS = {"&&", "||", ";", "|", "&"}


class FitRefused(UsageError):
    """A mesh the run can train on cannot hold its step (exit 2): nothing is created."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the check compiles: the trainer's flags and environment for a TPU target."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    tpu_type: str
    topology: str  # as JAX names it: v5e:4x4
    slices: int
    chips_per_host: str  # AxBxC
    model_config: str | None  # a local file's path, hashed into the key

    def key(self) -> str:
        """The cache key: everything the report depends on (module docstring)."""
        parts = {"argv": self.argv, "env": self.env, "topology": self.topology,
                 "slices": self.slices, "chips_per_host": self.chips_per_host,
                 "versions": versions(), "trainer": trainer_source_hash()}
        if self.model_config and os.path.isfile(self.model_config):
            parts["model_config"] = hashlib.sha256(
                Path(self.model_config).read_bytes()).hexdigest()
        text = json.dumps(parts, sort_keys=True, default=list)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Skip:
    """Why nothing was compiled, and what would change that."""

    why: str
    hint: str | None = None


def installed(module: str) -> bool:
    """Whether this Python can import ``module`` (found, not imported)."""
    return importlib.util.find_spec(module) is not None


def versions() -> dict[str, str]:
    """elastix, JAX, jaxlib and libtpu as installed (read without importing them)."""
    out = {}
    for dist in ("elastix", "jax", "jaxlib", "libtpu"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = ""
    return out


def trainer_source_hash() -> str:
    """A hash of the installed trainer's source: a change to it is a change to the step."""
    spec = importlib.util.find_spec(entrypoints.TRAINER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return ""
    h = hashlib.sha256()
    for folder in spec.submodule_search_locations:
        for path in sorted(Path(folder).rglob("*.py")):
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def trainer_argv(cmd: TrainerCommand) -> list[str] | None:
    """The flags the head's command gives ``elastix-train`` (or ``python -m elastix_trainer``),
    up to a shell operator; None when it does not run it."""
    words = cmd.words()
    package = entrypoints.TRAINER_PACKAGE
    for i, w in enumerate(words):
        start = None
        if os.path.basename(w) == entrypoints.TRAINER_SCRIPT:
            start = i + 1
        elif w in (package, f"{package}.__main__") and i and words[i - 1] == "-m":
            start = i + 1
        if start is not None:
            rest = words[start:]
            end = next((j for j, x in enumerate(rest) if x in _SHELL_STOPS), len(rest))
            return rest[:end]
    return None


def plan(spec, manifest: dict[str, Any]) -> Plan | MaxTextPlan | Skip:
    """What to compile for ``spec``'s rendered ``manifest``, or why nothing can be."""
    if spec.headless:
        return Skip("the workload is headless: its trainer runs outside the cluster",
                    "run elastix-train fit-check where the trainer runs")
    cmd = trainer_command(manifest)
    if cmd is None:
        return Skip("the head runs no trainer container")
    argv = trainer_argv(cmd)
    if argv is None:
        if cmd.maxtext:
            got = maxtext_fit.plan(spec, cmd)
            return got if isinstance(got, MaxTextPlan) else Skip(*got)
        return Skip("the command is not elastix-train: elastix compiles only its own step")
    if argv and argv[0] in (entrypoints.FIT_CHECK, "prepare-data"):
        return Skip(f"the command runs elastix-train {argv[0]}, not a training run")
    if not installed(entrypoints.TRAINER_PACKAGE) or not installed("jax"):
        return Skip("the trainer is not installed here", "pip install 'elastix[trainer,tpu]'")
    if not installed("libtpu"):
        return Skip("libtpu (JAX's TPU compiler) is not installed here",
                    f"{TPU_EXTRA}: it compiles for TPU slices without a chip")
    tpu = spec.tpu
    per_host = tpu.chips_per_host
    bounds = {1: "1x1x1", 4: "2x2x1"}.get(per_host, "2x2x1")
    env = tuple(sorted((k, v) for k, v in cmd.env.items()
                       if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES)
                       and k not in ENV_LEFT_OUT and not k.startswith("ELASTIX_LOCAL")))
    return Plan(argv=tuple(argv), env=env, tpu_type=tpu.name,
                topology=f"{tpu.generation}:{tpu.topology}",
                slices=spec.num_slices, chips_per_host=bounds,
                model_config=flag(argv, "--model-config"))


def cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("elastix")) / "fit-check"


def cached(p: Plan | MaxTextPlan) -> dict[str, Any] | None:
    """The kept report of the same plan, or None."""
    path = cache_dir() / f"{p.key()}.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or report.get("version") != entrypoints.FIT_CHECK_VERSION:
        return None
    return report


def keep(p: Plan | MaxTextPlan, report: dict[str, Any]) -> None:
    """Keep ``report`` for the same plan (private: 0600 in a 0700 directory); an unwritable
    cache only costs the next create a compile."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = folder / f".{p.key()}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(report, f)
        os.replace(tmp, folder / f"{p.key()}.json")
    except OSError:
        pass


class FitCheckFailed(UsageError):
    """The check could not compile the step (exit 2: nothing was created)."""


def run(p: Plan | MaxTextPlan, progress: Callable[[str], None] = lambda _: None,
        python: str | None = None) -> dict[str, Any]:
    """Compile ``p`` (``elastix-train fit-check`` in a process of its own; a MaxText plan with
    MaxText's ``train_compile.py``, ``maxtext_fit``) and return its report; ``progress`` gets
    each of its progress lines.

    Raises:
        UsageError: the trainer refused its flags or the topology (its line and hint).
        FitCheckFailed: the compile failed.
    """
    if isinstance(p, MaxTextPlan):
        t0 = time.monotonic()
        report = maxtext_fit.run(p, progress)
        report["wall_seconds"] = round(time.monotonic() - t0, 1)
        report["checked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return report
    cmd = [python or sys.executable, "-m", entrypoints.TRAINER_PACKAGE, entrypoints.FIT_CHECK,
           "--topology", p.topology, "--slices", str(p.slices), "--chips-per-host",
           p.chips_per_host, "--", *p.argv]
    # JAX's CPU client for all but the compile; no GCE metadata server asked; libtpu without
    # its machine-wide lock file (a second check beside the first failed on it)
    env = {**os.environ, **dict(p.env), "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1",
           "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("TPU_LIBRARY_PATH", None)  # the libtpu beside this JAX, the one the report names
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    other: list[str] = []
    try:
        assert proc.stderr is not None and proc.stdout is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            if line.startswith(entrypoints.FIT_CHECK_PROGRESS):
                progress(line[len(entrypoints.FIT_CHECK_PROGRESS):].strip())
            elif line.strip():
                other = (other + [line])[-40:]
        out = proc.stdout.read()
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if code != 0:
        said = {w: ln.split(": ", 1)[1] for ln in other for w in ("error", "hint")
                if ln.startswith(f"{w}: ")}
        message = said.get("error") or (other[-1] if other else f"exit code {code}")
        hint = said.get("hint") or "--no-fit-check skips the check"
        if code == 2:
            raise UsageError(f"fit check: {message}", hint=hint)
        raise FitCheckFailed(f"fit check: the step did not compile for {p.slices} x "
                             f"{p.tpu_type}: {message[:300]}",
                             hint="ELASTIX_DEBUG=1 shows the traceback; --no-fit-check "
                                  "skips the check")
    try:
        report = json.loads(out)
    except ValueError:
        raise FitCheckFailed("fit check: the trainer printed no report",
                             hint="--no-fit-check skips the check") from None
    if report.get("version") != entrypoints.FIT_CHECK_VERSION:
        raise FitCheckFailed(f"fit check: a report of version {report.get('version')!r} (this "
                             f"launcher reads {entrypoints.FIT_CHECK_VERSION})",
                             hint="install the launcher and the trainer of one elastix")
    report["tpu_type"] = p.tpu_type
    report["wall_seconds"] = round(time.monotonic() - t0, 1)
    report["checked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return report


def refusal(report: dict[str, Any]) -> ElastixError | None:
    """The one-line refusal of a report where a mesh cannot hold the step; None when each can."""
    bad = [m for m in report.get("meshes", []) if not m.get("fits")]
    if not bad:
        return None
    m = bad[0]
    where = (f"{m['slices']} slice{'s' if m['slices'] > 1 else ''} of {report['tpu_type']}"
             + ("" if len(bad) == len(report["meshes"]) else
                f" (of the {len(report['meshes'])} meshes the run can train on)"))
    hint = m.get("hint") or "try a smaller --batch-per-device"
    if "more devices" in hint:  # on a slice, more devices is a larger TPU type
        hint = hint.replace("more devices", "a --tpu-type with more chips a slice", 1)
    return FitRefused(f"{report['model']} does not fit {where}: {m.get('error')}", hint=hint)
