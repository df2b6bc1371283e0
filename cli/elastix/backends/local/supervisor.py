"""The local backend's stand-in for the JobSet and Job controllers.

Run detached as ``python -m elastix.backends.local.supervisor <workload-dir>``. It starts the head's main
container command as the controller process and one ``elastix.backends.local.host`` process per worker pod,
then plays the controllers' failure semantics:

- a worker pod that dies takes its whole slice down, as on TPU, where the runtime of the slice's
  other hosts errors out: the supervisor kills the slice's other hosts, which costs the slice's
  Job one failure per host (as GKE counts them), and recreates the slice as a unit after the
  scheduling delay (the other slices and the controller keep running: this is what elastic
  recovery rides on). So ``backoffLimit = max_slice_restarts x hosts`` (what ``render`` gives an
  elastic workload) allows exactly ``--max-slice-restarts`` restarts of one slice;
- past ``backoffLimit`` the Job fails, and so does a head that exits non-zero: as with JobSet's
  ``failurePolicy``, the whole workload is recreated (``status.restarts`` += 1) while
  ``maxRestarts`` allows, else it fails;
- the head exiting 0 completes the workload (JobSet ``successPolicy`` targets the head).

A MaxText head (``elastix.backends.local.maxtext``) runs in MaxText's environment with its
Pathways stand-in, and its output comes through a pipe that the same loop copies into its log,
each line after the time it was read (``elastix.backends.local.stamp``).

Single-threaded: SIGCHLD wakes a ``select`` through ``signal.set_wakeup_fd``, so a death is seen
at once without busy polling. SIGTERM tears everything down and exits. A forked guard
(:func:`start_guard`) kills whatever the supervisor leaves behind if it dies without doing so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from elastix.backends.local import channel
from elastix.backends.local import maxtext as maxtext_head
from elastix.backends.local.liveness import Liveness
from elastix.backends.local.plan import (
    Plan,
    compilation_cache_dir,
    data_dir,
    expand,
    pod_fields,
    resolve_env,
)
from elastix.backends.local.stamp import LineStamper
from elastix.backends.local.state import (
    PodRecord,
    SliceState,
    WorkloadState,
    create_time_of,
    die_with_parent,
    read_json,
    record_proc,
    sweep,
)
from elastix.backends.local.trainerhead import trainer_argv
from elastix.protocol import entrypoints, envvars, heartbeat, timefmt
from elastix.workload import labels

TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL when stopping a pod
HEAD_TERM_GRACE = 30.0
"""Seconds a deleted workload's head gets to commit its final step and exit before SIGKILL:
Kubernetes' default ``terminationGracePeriodSeconds`` (30 s), which the rendered JobSet's head
pod keeps, and more than the trainer's ``--term-save-timeout`` (20 s)."""


@dataclasses.dataclass
class Pod(PodRecord):
    """One local process standing in for a pod: its record plus the live process handle."""

    popen: subprocess.Popen | None = None
    stamper: LineStamper | None = None


class Supervisor:
    """Runs one workload's processes from ``plan.json`` until it completes, fails or is stopped."""

    def __init__(self, workload_dir: Path, plan: Plan | None = None) -> None:
        self.dir = workload_dir
        self.plan = plan or Plan.from_json(read_json(workload_dir / "plan.json"))
        self.logs = workload_dir / "logs"
        self.state = "Starting"
        self.unwritable = False  # the last state.json write failed (a full disk)
        self.restarts = 0
        self.message: str | None = None
        self.head: Pod | None = None
        self.workers: dict[tuple[int, int], Pod] = {}
        self.due: dict[tuple[int, int], float] = {}  # replacement start times (monotonic)
        self.failures = [0] * self.plan.num_slices  # pod failures of each slice's Job
        self.slice_budget = self.plan.backoff_limit // max(1, self.plan.hosts_per_slice)
        self.flag: int | None = None  # read in run(): the directory may not exist yet
        self.generation = 0
        self.warm: subprocess.Popen | None = None  # a pre-started head (prestart_head)
        self.events: list[dict[str, str]] = []
        self.stopping = False
        self.guard: int | None = None
        self.me = {"pid": os.getpid(), "create_time": create_time_of(os.getpid())}
        self.liveness = Liveness(self.plan.hung_host_timeout)
        # The heartbeat channel's key: in this process's memory and its pods' environments
        # only (readable by this user alone), never in a file; one per supervisor, so a
        # workload's restart attempts share it and another workload's datagrams never count.
        self.key = heartbeat.new_key()

    # ------------------------------------------------------------------ bookkeeping
    def log(self, msg: str) -> None:
        ts = timefmt.iso_us()
        self.events.append({"ts": ts, "msg": msg})
        del self.events[:-100]
        try:
            print(f"{ts} {msg}", flush=True)
        except OSError:  # its log's disk is full: the line stays in state.json's events
            pass

    def write_state(self) -> None:
        """Write state.json. When its disk is full the workload goes on (its processes do
        not need the state directory to train): the supervisor says so once, keeps the last
        whole state.json, and writes again once it can; ``status`` tells why it is old."""
        try:
            self._write_state()
        except OSError as e:
            if not self.unwritable:
                self.unwritable = True
                self.log(f"cannot write state.json in {self.dir}: {e.strerror or e} (is its "
                         "disk full?); the workload goes on, its status stays as last written")
            return
        if self.unwritable:
            self.unwritable = False
            self.log("state.json written again")

    def _write_state(self) -> None:
        p = self.plan
        WorkloadState(
            supervisor=self.me, state=self.state, restarts=self.restarts,
            max_restarts=p.max_restarts, message=self.message, updated=timefmt.iso_us(),
            head=self.head,
            slices=[SliceState(s, self.failures[s], p.backoff_limit,
                               [self.workers[(s, h)] for h in range(p.hosts_per_slice)
                                if (s, h) in self.workers])
                    for s in range(p.num_slices)],
            events=self.events[-30:],
        ).write(self.dir)

    def _spawn(self, pod: Pod, cmd: list[str], env: dict[str, str], log: Path,
               stamp: bool = False) -> None:
        with open(log, "ab") as out:
            popen = subprocess.Popen(cmd, env=env, cwd=self.plan.cwd,
                                     stdout=subprocess.PIPE if stamp else out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=die_with_parent)
        if stamp:
            pod.stamper = LineStamper(os.dup(popen.stdout.fileno()), log)
            popen.stdout.close()
        self._adopt(pod, popen, log)

    def _adopt(self, pod: Pod, popen: subprocess.Popen, log: Path) -> None:
        """Record a started pod's process."""
        pod.log, pod.popen = str(log), popen
        pod.pid = pod.popen.pid
        pod.create_time = record_proc(self.dir, pod.pid, pod.role, slice=pod.slice,
                                      host=pod.host, name=pod.name)
        pod.phase, pod.started, pod.exit_code, pod.reason = "Running", timefmt.iso_us(), None, None

    def _base_env(self, fields: dict[str, str], container_env: list) -> tuple[dict, dict]:
        cenv = resolve_env(container_env, fields)
        env = dict(os.environ)
        env.update(cenv)
        bindir = os.path.dirname(sys.executable)  # the venv elastix runs from: elastix-train etc.
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        env[envvars.WORKLOAD_DIR] = str(self.dir)
        env[envvars.LOCAL_DATA_DIR] = str(data_dir(self.dir))
        # one cache for the state directory's workloads; a user's own value (their shell's,
        # or --env) wins, ``off`` included
        env.setdefault(envvars.LOCAL_COMPILATION_CACHE, str(compilation_cache_dir(self.dir)))
        env[envvars.LOCAL_HEALTH] = self.plan.health_address
        env[envvars.HEARTBEAT_KEY] = self.key
        env[envvars.HEALTH_TIMEOUT] = str(self.plan.health_timeout)
        env[envvars.HEARTBEAT_INTERVAL] = str(self.plan.heartbeat_interval)
        env[envvars.HOSTS_PER_SLICE] = str(self.plan.hosts_per_slice)
        return env, cenv

    def _head(self) -> tuple[list[str], dict[str, str]]:
        """The head's command and environment for this restart attempt."""
        p = self.plan
        fields = pod_fields(p.name, labels.HEAD_JOB, 1, 0, 0, self.restarts)
        env, cenv = self._base_env(fields, p.head_env)
        flags = [f for f in env.get("XLA_FLAGS", "").split()
                 if not f.startswith("--xla_force_host_platform_device_count")]
        if p.platform == "cpu":
            n = p.num_slices * p.devices_per_slice
            flags.append(f"--xla_force_host_platform_device_count={n}")
        env.pop(envvars.DEVICES_PER_SLICE, None)
        env.update({
            # the manifest says proxy: no Pathways server runs locally. On an accelerator the
            # host platform stays listed: the fault seam's io_callback runs on a CPU device,
            # and JAX finds none without it (the first step fails, seen on a v5e chip).
            "JAX_PLATFORMS": p.platform if p.platform == "cpu" else f"{p.platform},cpu",
            "XLA_FLAGS": " ".join(flags),
            envvars.NUM_SLICES: str(p.num_slices),
            envvars.EVENTS_FILE: p.events_file,
        })
        if p.devices_per_slice:  # on an accelerator, 0: its chips divided evenly
            env[envvars.DEVICES_PER_SLICE] = str(p.devices_per_slice)
        if p.maxtext:
            env.update(maxtext_head.head_env(self.dir, "" if p.maxtext == "none" else p.maxtext,
                                             env))
        return [expand(a, cenv) for a in p.head_command], env

    def prestart_head(self) -> None:
        """Start the head's imports before the workload's directory exists (``workload
        create --replace``, while the run it replaces makes its final save): when the head
        is ``elastix-train``, :mod:`elastix_trainer.warm` imports what it needs with the
        head's own environment and waits for :meth:`start_head`. Any other head (a
        ``--command``, MaxText) is started at that moment only: nothing says it would not
        read the checkpoints the old run is still writing."""
        if self.plan.maxtext:  # its environment is made in the directory
            return
        cmd, env = self._head()
        if trainer_argv(cmd, env) is None:
            return
        # its output until the log exists: an unnamed file it copies into the log at once
        with tempfile.TemporaryFile() as early:
            self.warm = subprocess.Popen(
                [sys.executable, "-c", entrypoints.TRAINER_WARM_CODE], env=env, cwd=self.plan.cwd,
                stdin=subprocess.PIPE, stdout=early, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=die_with_parent)

    def discard_warm(self) -> None:
        """The pre-started head was not used: end it (it has touched nothing)."""
        warm, self.warm = self.warm, None
        _end(warm)

    def start_head(self) -> None:
        p = self.plan
        cmd, env = self._head()
        self.head = Pod(f"{p.name}-{labels.HEAD_JOB}-0-0-{self.restarts}", "head", None, None)
        log = self.logs / f"head-{self.restarts}.log"
        warm, self.warm = self.warm, None
        argv = trainer_argv(cmd, env)
        if warm is not None and warm.poll() is None and self.restarts == 0 and argv:
            with open(log, "ab"):  # there from its start, as a spawned head's is
                pass
            try:
                warm.stdin.write(json.dumps({"argv": argv, "log": str(log)}).encode() + b"\n")
                warm.stdin.close()
            except OSError:  # it died since: started as any head is, below
                pass
            else:
                self._adopt(self.head, warm, log)
                self.log(f"started head (pid {self.head.pid}, restart attempt 0; its imports "
                         f"began while the run it replaces stopped): {' '.join(cmd)}"
                         + (f" ({p.head_note})" if p.head_note else ""))
                return
        _end(warm)
        self._spawn(self.head, cmd, env, log, p.stamped)
        self.log(f"started head (pid {self.head.pid}, restart attempt {self.restarts}): "
                 f"{' '.join(cmd)}" + (f" ({p.head_note})" if p.head_note else ""))

    def pump_head(self) -> None:
        """Copy a stamped head's output into its log (its pipe must never fill up)."""
        pod = self.head
        if pod is not None and pod.stamper is not None and not pod.stamper.pump():
            pod.stamper = None

    def start_worker(self, s: int, h: int) -> None:
        p = self.plan
        fields = pod_fields(p.name, labels.WORKER_JOB, p.num_slices, s, h, self.restarts)
        env, _ = self._base_env(fields, p.worker_env)
        env.update({envvars.SLICE: str(s), envvars.HOST: str(h), envvars.SUPERVISOR_PID: str(os.getpid())})
        self.generation += 1
        pod = Pod(f"{p.name}-{labels.WORKER_JOB}-{s}-{h}-{self.generation}", "worker", s, h)
        self.workers[(s, h)] = pod
        self._spawn(pod, [sys.executable, "-m", "elastix.backends.local.host"], env,
                    self.logs / f"worker-{s}-{h}.log")

    # ------------------------------------------------------------------ lifecycle
    def start_attempt(self) -> None:
        p = self.plan
        self.failures = [0] * p.num_slices
        self.due.clear()
        # The head first: its seconds of imports and compile are the start-up's critical path,
        # and it waits for the slices' heartbeats anyway (the hosts start in milliseconds).
        self.start_head()
        for s in range(p.num_slices):
            for h in range(p.hosts_per_slice):
                self.start_worker(s, h)
        self.state = "Running"

    def _all_pods(self) -> list[Pod]:
        return [pod for pod in [self.head, *self.workers.values()] if pod is not None]

    def stop_pods(self, reason: str, phase: str = "Failed", head_first: bool = False) -> None:
        """SIGTERM every running pod's process group, SIGKILL what is left after the grace.

        ``head_first`` (a deleted workload): the head alone first, with its own grace, and the
        slice hosts only once it has exited. A head that is told to stop commits its current
        step on the slices; stopped together, the hosts died first, the head saw a slice loss
        instead and was killed before its final save (the steps since the last checkpoint were
        lost). On GKE a JobSet's deletion sends SIGTERM to every pod at once; there the trainer
        saves its newest host snapshot when its slices go while it stops (docs/architecture.md).
        """
        if head_first and self.head is not None and self.head.popen is not None \
                and self.head.popen.poll() is None:
            self._stop([self.head], reason, phase, HEAD_TERM_GRACE)
        running = [pod for pod in self._all_pods() if pod.popen and pod.popen.poll() is None]
        self._stop(running, reason, phase, TERM_GRACE)
        self.due.clear()

    def _stop(self, running: list[Pod], reason: str, phase: str, grace: float) -> None:
        for pod in running:
            killpg(pod.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for pod in running:
            _await_exit(pod.popen, max(0.0, deadline - time.monotonic()))
            killpg(pod.pid, signal.SIGKILL)
            pod.popen.wait()
        for pod in running:
            pod.phase, pod.reason, pod.exit_code = phase, reason, pod.popen.returncode
            if pod.stamper is not None:
                pod.stamper.pump()
                pod.stamper.close()
                pod.stamper = None

    def workload_failed(self, reason: str) -> None:
        """A Job failed: recreate everything while maxRestarts allows, else fail for good."""
        if self.restarts < self.plan.max_restarts:
            self.restarts += 1
            self.state = "Restarting"
            self.message = f"restart {self.restarts}/{self.plan.max_restarts}: {reason}"
            self.log(f"restarting the workload ({self.message})")
            self.stop_pods("JobSetRestart")
            self.write_state()
            self.start_attempt()
        else:
            self.state = "Failed"
            # Name the budget that ran out: the trainer's own (in its error line), a slice's
            # (backoffLimit, in ``reason``) or the workload's restarts (--max-restarts).
            self.message = (f"{reason}; no workload restart left (--max-restarts "
                            f"{self.plan.max_restarts}, {self.restarts} used)")
            self.log(f"workload failed: {self.message}")
            self.stop_pods("JobSetFailed")

    def on_exit(self, pod: Pod, rc: int) -> None:
        if pod.stamper is not None:  # its last lines, before a restart opens the next log
            pod.stamper.pump()
            pod.stamper.close()
            pod.stamper = None
        pod.exit_code = rc
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
        if pod.role == "head":
            pod.phase = "Succeeded" if rc == 0 else "Failed"
            if rc == 0:
                self.log(f"head (pid {pod.pid}) completed")
                self.stop_pods("Completed", phase="Succeeded")
                self.state, self.message = "Completed", "the head completed"
            else:
                pod.reason = "Error"
                said = _last_error(pod.log)
                self.log(f"head (pid {pod.pid}) failed: {how}" + (f": {said}" if said else ""))
                self.workload_failed(f"head exited ({how})" + (f": {said}" if said else ""))
            return
        self.slice_down(pod.slice, pod.host, how)

    def slice_down(self, s: int, h: int, how: str) -> None:
        """Host ``h`` of slice ``s`` died: the slice is down (one slice restart, ``hosts`` pod
        failures of its Job); recreate it as a unit, or fail its Job past ``backoffLimit``."""
        hosts = self.plan.hosts_per_slice
        mates = [self.workers[(s, k)] for k in range(hosts) if (s, k) in self.workers]
        alive = [m for m in mates if m.phase == "Running" and m.popen and m.popen.poll() is None]
        for m in alive:  # the TPU runtime of the slice's other hosts errors out
            killpg(m.pid, signal.SIGKILL)
        for m in mates:
            if m.popen is not None:
                m.popen.wait()
            m.exit_code = m.popen.returncode if m.popen else None
            m.phase, m.reason = "Failed", how if m.host == h else f"slice {s} down with host {h}"
        self.failures[s] += hosts
        restarts = self.failures[s] // hosts
        pid = self.workers[(s, h)].pid
        self.log(f"worker slice {s} host {h} (pid {pid}) {how}: slice {s} is down"
                 + (f" (stopped its other {len(alive)} hosts, as on TPU)" if alive else "")
                 + f"; slice restarts {restarts}/{self.slice_budget}")
        if self.failures[s] > self.plan.backoff_limit:
            self.workload_failed(self._over_budget(s, restarts))
            return
        due = time.monotonic() + self.plan.scheduling_delay
        for m in mates:
            m.phase, m.reason = "Pending", f"replacing slice {s} ({m.reason})"
            self.due[(s, m.host)] = due

    def _over_budget(self, s: int, restarts: int) -> str:
        """Why slice ``s``'s Job failed, naming the flag that sets its budget."""
        limit = self.plan.backoff_limit
        if self.flag is not None and self.flag > 0 and self.flag == self.slice_budget:
            return (f"slice {s} failed {restarts} times, more than --max-slice-restarts "
                    f"{self.flag} allows")
        hosts = self.plan.hosts_per_slice
        how = (f"--max-slice-restarts {self.flag} sets it only when elastic and > 0"
               if self.flag is not None else "--max-slice-restarts N sets it when elastic")
        return (f"slice {s} failed {restarts} times, more than its Job's backoffLimit {limit} "
                f"allows ({self.slice_budget} restarts of its {hosts} hosts; {how})")

    def reap(self) -> None:
        if self.guard is not None:
            try:
                if os.waitpid(self.guard, os.WNOHANG)[0]:
                    self.guard = None  # killed: no zombie; the pods' PDEATHSIG remains
            except ChildProcessError:
                self.guard = None
        for pod in list(self._all_pods()):
            if self.state in ("Completed", "Failed"):
                return
            if pod.phase == "Running" and pod.popen is not None:
                rc = pod.popen.poll()
                if rc is not None:
                    self.on_exit(pod, rc)

    def replace_hung(self) -> None:
        """Kill and replace a slice host that made no progress for ``hung_host_timeout``
        seconds, as the platform evicts a hung host's pod (``elastix.backends.local.liveness``)."""
        running = {key: pod.pid for key, pod in self.workers.items()
                   if pod.phase == "Running" and pod.popen is not None
                   and pod.popen.poll() is None}
        for (s, h), stuck in self.liveness.hung(running):
            pod = self.workers[(s, h)]
            if pod.phase != "Running":  # its slice went down with an earlier host of this pass
                continue
            killpg(pod.pid, signal.SIGKILL)
            pod.popen.wait()
            self.liveness.forget((s, h))
            pod.exit_code = pod.popen.returncode
            self.slice_down(s, h, f"hung (no progress for {stuck:.0f} s, more than "
                            f"{envvars.LOCAL_HUNG_HOST_TIMEOUT}={self.plan.hung_host_timeout:g}): "
                            "killed, as the platform replaces a hung host's pod")

    def start_due(self) -> None:
        now = time.monotonic()
        for key, t in sorted(self.due.items(), key=lambda kv: kv[1]):
            if t <= now:
                del self.due[key]
                self.start_worker(*key)
                pod = self.workers[key]
                self.log(f"replaced worker slice {key[0]} host {key[1]} (pid {pod.pid})")

    def run(self) -> int:
        self.logs.mkdir(exist_ok=True)
        self.flag = _max_slice_restarts(self.dir)
        # the guard must not hold the pre-started head's stdin open (its end of file ends it)
        self.guard = start_guard(self.dir, self.plan.marker,
                                 close=[self.warm.stdin.fileno()] if self.warm else [])
        record_proc(self.dir, self.guard, "guard")
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._request_stop)
        self.log(f"supervisor {os.getpid()} starting {self.plan.name}")
        channel.prepare(self.plan.health_address)  # before any pod: none may bind elsewhere
        try:
            return self._loop(r)
        finally:
            channel.remove(self.plan.health_address, self.dir)

    def _loop(self, r: int) -> int:
        self.start_attempt()
        self.write_state()
        while self.state not in ("Completed", "Failed"):
            wait = min((t - time.monotonic() for t in self.due.values()), default=1.0)
            stamper = self.head.stamper if self.head is not None else None
            fds = [r] + ([stamper.fd] if stamper is not None else [])
            ready, _, _ = select.select(fds, [], [], max(0.0, min(wait, 1.0)))
            if r in ready:
                os.read(r, 4096)
            self.pump_head()
            if self.stopping:
                self.log("stop requested: terminating every process")
                self.state, self.message = "Terminating", "deleted"
                self.write_state()
                self.stop_pods("Deleted", head_first=True)
                sweep(self.dir, self.plan.marker)
                return 0
            self.reap()
            if self.state == "Running":
                self.replace_hung()
            self.start_due()
            self.write_state()
        self.write_state()
        sweep(self.dir, self.plan.marker)  # grandchildren of a finished head, if any
        return 0

    def _request_stop(self, *_: object) -> None:
        self.stopping = True


def start_guard(workload_dir: Path, marker: str, close: list[int] | None = None) -> int:
    """Fork a guard that kills what a dead supervisor leaves behind; returns its pid.

    ``PR_SET_PDEATHSIG`` reaches only the supervisor's children: a head whose ``bash -c`` runs a
    compound command forks the trainer, and a SIGKILLed supervisor would orphan it (bash dies, the
    trainer is re-parented and trains on). The guard, in a session of its own, blocks on a pipe
    only the supervisor can write: end of file means the supervisor is gone, however it ended,
    and the guard SIGKILLs every process carrying the workload's marker. Forked before any pod
    starts, so no pod holds the pipe open. ``close``: the supervisor's descriptors the guard
    must not keep open (a pre-started head's stdin, which must end with the supervisor).
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(r)
        # w stays open, in the supervisor alone (os.pipe fds are not inherited), until it dies
        return pid
    try:  # the guard
        os.close(w)
        for fd in close or ():
            os.close(fd)
        os.setsid()  # out of the supervisor's group: a signal to that group spares the guard
        for sig in (signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        while os.read(r, 1):
            pass
        try:  # the directory may hold a replacement workload by now: then by marker alone
            same = Plan.from_json(read_json(workload_dir / "plan.json")).marker == marker
        except (OSError, ValueError, KeyError, TypeError):
            same = False
        sweep(workload_dir if same else None, marker)
    finally:
        os._exit(0)


def _max_slice_restarts(workload_dir: Path) -> int | None:
    """The ``--max-slice-restarts`` the manifest was rendered with (its annotation), if known."""
    try:
        manifest = read_json(workload_dir / "manifest.json")
        return int(manifest["metadata"]["annotations"][labels.MAX_SLICE_RESTARTS])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a user's template without the annotation: name the backoffLimit only


def _end(popen: subprocess.Popen | None) -> None:
    """Kill and reap a child that is not to be used (a pre-started head), if any."""
    if popen is not None:
        popen.kill()
        popen.wait()


def _await_exit(popen: subprocess.Popen, timeout: float) -> None:
    """Wait up to ``timeout`` for a child to exit, woken by its exit (a pidfd, Linux), not by
    ``Popen.wait``'s poll, which sleeps up to 50 ms between looks: every stop of a head, then of
    its hosts, paid it (a delete, a ``--replace``, a workload restart)."""
    if popen.poll() is not None:
        return
    try:
        fd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: Popen's poll
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)


def killpg(pid: int | None, sig: int) -> None:
    """Signal a pod's process group (its containers die together), else the process."""
    if pid is None:
        return
    try:
        os.killpg(pid, sig)
    except OSError:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


_ERROR_LINE = re.compile(r"^(?:error: .+|[A-Za-z_][\w.]*(?:Error|Exception|Failed): .+)$")


def _last_error(log: str | None, tail: int = 16384) -> str | None:
    """The last error line a failed head printed (``error: ...`` from elastix-train, or a
    Python exception's last line), from the end of its log: what the status then says."""
    if not log:
        return None
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - tail))
            lines = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        # A stamped log line leads with the time the supervisor read it.
        text = text.split(" ", 1)[1] if text[:4].isdigit() and " " in text else text
        if _ERROR_LINE.match(text):
            return text[:300]
    return None


PRIVATE_UMASK = 0o077
"""What a local workload writes (its state, logs, events, checkpoints, what its command makes)
is its user's alone, whatever the launcher's umask: the supervisor and every process it starts
create files 0600 and directories 0700."""


def prestarted(workload_dir: Path) -> int:
    """``--prestart``: started by ``workload create --replace`` before the run it replaces
    has stopped, so the new run's imports overlap that stop. Reads the new run's plan (one
    JSON line on stdin), starts its head's imports (:meth:`Supervisor.prestart_head`), then
    waits for ``go``: by then ``workload_dir`` is the new run's, and the supervisor runs as
    any does, its output into its log there. End of file before ``go`` (the create failed or
    was interrupted, however it ended): it exits, having touched nothing on disk."""
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    sup = Supervisor(workload_dir, Plan.from_json(json.loads(line)))
    try:
        sup.prestart_head()
        if sys.stdin.readline() != "go\n":
            sup.discard_warm()
            return 0
        fd = os.open(workload_dir / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                     0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except BaseException:
        sup.discard_warm()
        raise
    return sup.run()


def main(argv: list[str] | None = None) -> int:
    os.umask(PRIVATE_UMASK)
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--prestart":
        return prestarted(Path(argv[1]))
    if len(argv) != 1:
        sys.stderr.write("usage: python -m elastix.backends.local.supervisor [--prestart] "
                         "<workload-dir>\n")
        return 2
    return Supervisor(Path(argv[0])).run()


if __name__ == "__main__":
    sys.exit(main())
