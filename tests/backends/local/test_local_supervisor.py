"""The local supervisor's JobSet semantics, with a stand-in controller (no JAX: fast).

Workloads are created through the real CLI; state is read back with the same ``LocalBackend``
the CLI uses. Every wait is on a condition (log line, state) with a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import psutil
from local_helpers import STANDIN, wait_until

from elastix.backends.base import LogOptions


def create(cli, name: str, *, slices: int = 2, tpu: str = "v5litepod-16", slice_restarts: int = 1,
           max_restarts: int = 0, steps: int = 100000, extra: str = "") -> None:
    cli("workload", "create", name, "--tpu-type", tpu, "--num-slices", str(slices),
        "--elastic-slices", str(slices), "--max-slice-restarts", str(slice_restarts),
        "--max-restarts", str(max_restarts),
        "--command", f"{sys.executable} {STANDIN} --steps {steps} --step-delay 0.05 {extra}")


def head_log(backend, name: str) -> str:
    return "\n".join(ev.text for ev in backend.logs(name, LogOptions()))


def test_killed_host_is_replaced_and_the_controller_recovers_in_place(cli, backend):
    create(cli, "solo")
    st = wait_until(lambda: "completed step: 3," in head_log(backend, "solo")
                    and backend.status("solo"), 60, "steps")
    head_pid = st.head.pid
    assert st.state == "Running" and st.num_slices == 2
    assert [len(s.pods) for s in st.slices] == [4, 4]  # v5litepod-16: 4 hosts per slice
    assert [s.backoff_limit for s in st.slices] == [4, 4]  # 1 slice restart x 4 hosts
    env = psutil.Process(head_pid).environ()
    assert env["JAX_PLATFORMS"] == "cpu" and env["PATHWAYS_HEAD"] == "127.0.0.1"
    assert env["XLA_FLAGS"].endswith("--xla_force_host_platform_device_count=4")
    assert env["ELASTIX_EVENTS_FILE"].startswith(str(backend.root))

    rec = backend.kill_worker("solo", slice=1, host=2)
    assert (rec.slice, rec.host) == (1, 2) and rec.pid not in (None, head_pid)
    assert rec.sent is not None and rec.time <= rec.sent  # before the signal, once it was sent
    wait_until(lambda: "slices lost [1]" in head_log(backend, "solo"), 30, "slice down")
    wait_until(lambda: head_log(backend, "solo").count("sufficient slices active") == 2, 30,
               "slices ready again")
    log = head_log(backend, "solo")
    n = int(log.rsplit("completed step: ", 1)[1].split(",")[0])
    wait_until(lambda: f"completed step: {n + 1}," in head_log(backend, "solo"), 30, "next step")
    st = backend.status("solo")
    assert st.head.pid == head_pid and st.jobset_restarts == 0
    # The whole slice went down and came back: 4 pod failures, one slice restart.
    assert [s.job_failures for s in st.slices] == [0, 4]
    assert [s.slice_restarts for s in st.slices] == [0, 1]
    new = st.slices[1].pods[2]
    assert new.phase == "Running" and new.pid != rec.pid
    assert not psutil.pid_exists(rec.pid) or psutil.Process(rec.pid).status() == "zombie"
    backend.delete("solo")
    assert backend.list() == []


def test_exceeding_the_slice_budget_restarts_then_fails_with_nothing_left(cli, backend, tag):
    from process_tags import tagged_pids

    create(cli, "budget", tpu="v5litepod-4", slices=2, slice_restarts=1, max_restarts=1)
    wait_until(lambda: "completed step: 1," in head_log(backend, "budget"), 60, "first step")
    first_head = backend.status("budget").head.pid

    def kill_slice0_until(restarts: int) -> None:
        while backend.status("budget").jobset_restarts < restarts:
            st = backend.status("budget")
            if st.state == "Failed":
                return
            pod = st.slices[0].pods[0]
            if pod.phase == "Running":
                backend.kill_worker("budget", slice=0, host=0)
            wait_until(lambda p=pod.pid: backend.status("budget").slices[0].pods[0].pid != p
                       or backend.status("budget").state in ("Failed", "Restarting")
                       or backend.status("budget").jobset_restarts >= restarts, 30, "replacement")

    kill_slice0_until(1)  # two failures of slice 0 > --max-slice-restarts 1: the JobSet restarts
    st = wait_until(lambda: (s := backend.status("budget")).state == "Running"
                    and s.head.pid != first_head and s, 30, "restarted workload")
    assert st.jobset_restarts == 1 and [s.job_failures for s in st.slices] == [0, 0]
    wait_until(lambda: "completed step: 1," in head_log(backend, "budget"), 60, "new head steps")
    kill_slice0_until(2)  # and again: the restart budget (1) is spent, the workload fails
    st = wait_until(lambda: (s := backend.status("budget")).state == "Failed" and s, 30, "Failed")
    assert "slice 0 failed 2 times, more than --max-slice-restarts 1 allows" in st.message
    assert "no workload restart left (--max-restarts 1, 1 used)" in st.message
    # Failed means stopped: no controller, no slice host is left running.
    wait_until(lambda: not tagged_pids(tag), 15, "every process of the failed workload to exit")
    out = cli("workload", "delete", "budget", check=False)
    assert out.returncode == 0, out.stderr
    assert backend.list() == []


def test_one_host_death_restarts_its_whole_slice_and_counts_one_slice_restart(cli, backend):
    """On TPU a host's death fails every pod of its slice: --max-slice-restarts 1 allows one
    restart of the slice, however many of its hosts are killed one by one."""
    create(cli, "unit", tpu="v5litepod-8", slices=2, slice_restarts=1)  # 2 hosts per slice
    st = wait_until(lambda: "completed step: 1," in head_log(backend, "unit")
                    and backend.status("unit"), 60, "first step")
    before = {(p.slice, p.host): p.pid for s in st.slices for p in s.pods}
    backend.kill_worker("unit", slice=0, host=0)
    st = wait_until(lambda: (s := backend.status("unit")).slices[0].state == "Ready"
                    and all(p.pid != before[(0, p.host)] for p in s.slices[0].pods) and s, 30,
                    "slice 0 recreated as a unit")
    assert st.state == "Running" and st.jobset_restarts == 0
    assert [s.slice_restarts for s in st.slices] == [1, 0]
    assert [s.job_failures for s in st.slices] == [2, 0]  # as GKE's Job counts them
    assert [p.pid for p in st.slices[1].pods] == [before[(1, 0)], before[(1, 1)]]
    assert not psutil.pid_exists(before[(0, 1)]) or \
        psutil.Process(before[(0, 1)]).status() == "zombie"
    # A second single-host kill is the slice's second restart: over the budget, and no JobSet
    # restart is left (--max-restarts 0), so the workload fails, naming the flag and the slice.
    backend.kill_worker("unit", slice=0, host=1)
    st = wait_until(lambda: (s := backend.status("unit")).state == "Failed" and s, 30, "Failed")
    assert st.message == ("slice 0 failed 2 times, more than --max-slice-restarts 1 allows; "
                          "no workload restart left (--max-restarts 0, 0 used)")
    out = cli("workload", "status", "unit")
    assert "more than --max-slice-restarts 1 allows" in out.stdout
    backend.delete("unit")


def test_head_failure_restarts_the_workload_and_logs_follow_the_new_head(cli, backend, tmp_path):
    # The heads fail once the log is followed (told by a file): a head that failed before the
    # follower started is history to it, not a restart it saw (so it was, on a loaded machine).
    fail = tmp_path / "fail"
    create(cli, "crashy", tpu="v5litepod-8", slices=1, max_restarts=1,
           extra=f"--fail-after 2 --fail-when {fail}")
    events = []
    for event in backend.logs("crashy", LogOptions(follow=True)):  # ends when the workload does
        events.append(event)
        if "completed step: 1," in event.text:
            fail.touch()
    texts = [e.text for e in events]
    notices = [e.text for e in events if e.notice]
    assert notices == ["head restarted (workload restart 1): following the new head"]
    assert sum("user code failed" in t for t in texts) == 2
    st = backend.status("crashy")
    assert st.state == "Failed" and st.jobset_restarts == 1 and st.max_restarts == 1
    assert "head exited (exit code 3)" in st.message
    assert backend.logs("crashy", LogOptions(tail_lines=1)).__next__().text.endswith(
        "user code failed")
    backend.delete("crashy")


def test_delete_after_the_supervisor_was_sigkilled_leaves_no_orphans(cli, backend, tag):
    from process_tags import tagged_pids

    create(cli, "orphan", tpu="v5litepod-16", slices=2)
    wait_until(lambda: "completed step: 1," in head_log(backend, "orphan"), 60, "first step")
    state = json.loads((backend.root / "orphan" / "state.json").read_text())
    os.kill(state["supervisor"]["pid"], signal.SIGKILL)
    st = wait_until(lambda: (s := backend.status("orphan")).state == "Failed" and s, 15,
                    "status to notice the dead supervisor")
    assert "supervisor is not running" in st.reasons[0]
    backend.delete("orphan")
    assert not tagged_pids(tag)
    assert not (backend.root / "orphan").exists()


def test_a_run_stopped_for_a_delete_reads_terminating_until_its_directory_goes(cli, backend):
    """Between the supervisor's exit and the directory's removal a delete (or a ``create
    --replace``) is still under way: the run reads Terminating, not Failed, so a chaos run
    measuring it does not take a replace for a death. Without the delete's lock, a stopped
    supervisor's run reads Failed, as before."""
    import psutil

    from elastix.backends.local.delete import _held

    create(cli, "going", tpu="v5litepod-8", slices=2)
    wait_until(lambda: "completed step: 1," in head_log(backend, "going"), 60, "first step")
    d = backend.root / "going"
    sup = json.loads((d / "state.json").read_text())["supervisor"]["pid"]
    with _held(d) as ours:
        assert ours
        os.kill(sup, signal.SIGTERM)  # what a delete does first, its lock held
        psutil.Process(sup).wait(60)
        st = backend.status("going")
        assert st.state == "Terminating", (st.state, st.reasons)
        assert any("being deleted" in r for r in st.reasons), st.reasons
    st = backend.status("going")
    assert st.state == "Failed" and "supervisor is not running" in st.reasons[0], st.reasons
    backend.delete("going")
    assert not d.exists()


def _compound(cli, name: str, where) -> int:
    """A workload whose ``bash -c`` runs a compound command, so bash forks the controller rather
    than exec it; returns the controller's pid (a grandchild of the supervisor)."""
    cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--elastic-slices", "2", "--command", f"cd {where} && {sys.executable} {STANDIN} "
        "--steps 100000 --step-delay 0.05; echo controller exited")
    log = wait_until(lambda: "completed step: 1," in (t := head_log(cli.backend, name)) and t,
                     60, "first step")
    pid = int(log.split("controller pid ", 1)[1].split()[0])
    head = psutil.Process(cli.backend.status(name).head.pid)
    assert head.name() == "bash" and psutil.Process(pid).ppid() == head.pid  # not exec'd
    return pid


def _supervisor_and_guard(backend, name: str) -> tuple[int, int]:
    from elastix.backends.local.state import read_procs

    procs = read_procs(backend.root / name)
    return (next(r["pid"] for r in procs if r["role"] == "supervisor"),
            next(r["pid"] for r in procs if r["role"] == "guard"))


def test_no_process_outlives_a_sigkilled_supervisor(cli, backend, tag, tmp_path):
    """PDEATHSIG kills bash, not the controller bash forked: the guard kills that one."""
    from process_tags import tagged_pids

    cli.backend = backend
    controller = _compound(cli, "grand", tmp_path)
    supervisor, _ = _supervisor_and_guard(backend, "grand")
    os.kill(supervisor, signal.SIGKILL)
    wait_until(lambda: not tagged_pids(tag), 15, "every process of the workload to exit")
    assert not psutil.pid_exists(controller) or psutil.Process(controller).status() == "zombie"
    backend.delete("grand")


def test_status_shows_and_delete_stops_what_outlived_supervisor_and_guard(cli, backend, tag,
                                                                          tmp_path):
    """Both killed (say by the OOM killer): status names the survivor, delete stops it."""
    from process_tags import tagged_pids

    cli.backend = backend
    controller = _compound(cli, "stray", tmp_path)
    supervisor, guard = _supervisor_and_guard(backend, "stray")
    os.kill(guard, signal.SIGKILL)
    os.kill(supervisor, signal.SIGKILL)
    said = f"1 process of stray outlived its supervisor and still run: pid {controller} ("

    def reasons() -> list[str]:
        return json.loads(cli("workload", "status", "stray", "-o", "json").stdout)["reasons"]

    why = wait_until(lambda: (r := reasons()) and any(said in x for x in r) and r, 15,
                     "status to show the controller alone (the hosts die with the supervisor)")
    assert "elastix workload delete stray --backend local stops them" in why[-1]
    assert psutil.Process(controller).status() != "zombie"
    cli("workload", "delete", "stray")
    assert not tagged_pids(tag)


def test_create_conflict_replace_and_default_backend_message(cli, backend):
    out = cli("workload", "create", "twice", "--tpu-type", "v5litepod-8", "--command",
              f"{sys.executable} {STANDIN}", env={"ELASTIX_BACKEND": ""})
    assert "no cluster configured: using the local backend" in out.stderr
    out = cli("workload", "create", "twice", "--tpu-type", "v5litepod-8", "--command", "true",
              check=False)
    assert out.returncode == 2 and "already exists" in out.stderr and "--replace" in out.stderr
    assert "Traceback" not in out.stderr
    old = backend.status("twice").head.pid
    cli("workload", "create", "twice", "--tpu-type", "v5litepod-8", "--replace", "--command",
        f"{sys.executable} {STANDIN} --steps 2")
    st = wait_until(lambda: (s := backend.status("twice")).state == "Completed" and s, 60,
                    "the replacement to complete")
    assert st.head.pid != old and st.head.phase == "Succeeded"
    assert all(p.phase == "Succeeded" for s in st.slices for p in s.pods)
    backend.delete("twice")


def test_a_failed_submit_leaves_nothing_behind(cli, tmp_path):
    """A state dir that cannot be created: one line with a hint, exit 2 (the state root is
    checked as input before anything starts, issue 59 item 3), no directory left."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = cli("workload", "create", "nowhere", "--tpu-type", "v5litepod-8", "--command", "true",
              check=False, env={"ELASTIX_STATE_DIR": str(blocker / "sub")})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "Not a directory" in out.stderr and "nothing was started" in out.stderr
    assert "--state-dir" in out.stderr
    assert blocker.read_text() == "not a directory"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "state") == ["a-file"]


def test_a_failed_head_names_its_own_error_and_the_workloads_budget(cli, backend):
    """Issue 34: the trainer gave up on its slice-loss budget and the status said only
    "restart budget used (0/0 restarts)", the wrong budget. The head's own last error line is
    the reason; the workload's restarts are named as the flag that sets them."""
    said = "error: slice-loss budget exhausted: 3 losses > --max-slice-losses 2"
    cli("workload", "create", "gives-up", "--tpu-type", "v5litepod-8", "--num-slices", "1",
        "--command", f"{sys.executable} -c \"import sys; print('step 1'); "
                     f"print('{said}', file=sys.stderr); sys.exit(1)\"")
    st = wait_until(lambda: (s := backend.status("gives-up")).state == "Failed" and s, 60,
                    "Failed")
    assert st.message == (f"head exited (exit code 1): {said}; no workload restart left "
                          "(--max-restarts 0, 0 used)")
    assert backend.status("gives-up").to_json()["message"] == st.message
    cli("workload", "delete", "gives-up")
