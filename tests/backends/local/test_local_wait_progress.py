"""Waits say what they wait for on stderr, phase by phase, on a real local workload (issue 39):
``workload wait`` and ``chaos kill-worker --measure``, their stdout left as it was (the JSON
report parses). Off a terminal, as in a CI log: a line per phase."""

from __future__ import annotations

import itertools
import json
import re

from local_helpers import tiny_trainer

POLICY = "--elastic-mode pause-resume --max-slice-losses 100 --slice-wait-timeout 120 " \
         "--snapshot-period 3"
ORDER = ["starting", "starting the trainer", "compiling", "waiting for the first save"]


def _phases(stderr: str, prefix: str) -> list[str]:
    """The phases of the lines ``PREFIX: PHASE (since HH:MM:SS, N s)``, in order; lines in a
    row of one phase count once: past 30 s in a phase (a busy machine) the wait says it again,
    ``still PHASE``."""
    got = [re.fullmatch(rf"{re.escape(prefix)}: (?:still )?(.+) \(since \d\d:\d\d:\d\d, "
                        r"[\d a-z]+\)", ln) for ln in stderr.splitlines()]
    return [phase for phase, _ in itertools.groupby(m.group(1) for m in got if m)]


def test_wait_and_a_measured_kill_say_their_phases(cli):
    name = "talk"
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "50",
        # the head starts 15 s late (a slow image pull, say): on a busy machine the wait's own
        # start-up once outlasted the trainer's warm start to its first save, and saw nothing
        "--command", "sleep 15 && " + tiny_trainer(POLICY),
        # the killed slice's replacement starts 12 s late: its recovery waits for slices for
        # several of the measurement's 1 s polls, so a recovering line is sure to be seen even
        # when a loaded machine delays the detection (a CI run saw none with 6 s)
        env={"ELASTIX_LOCAL_SCHEDULING_DELAY": "12"})
    try:
        # the CLI's own timeouts (240 s, 200 s) end these, not the helper's (120 s by default)
        waited = cli("workload", "wait", name, "--for", "stepping", "--timeout", "240s",
                     timeout=300)
        assert waited.stdout == ""
        phases = _phases(waited.stderr, f"waiting for {name} to be stepping")
        assert phases and phases == sorted(set(phases), key=ORDER.index), waited.stderr
        assert "starting the trainer" in phases, waited.stderr
        assert waited.stderr.splitlines()[-1] == f"workload {name}: stepping"

        killed = cli("chaos", "kill-worker", name, "--slice", "1", "--measure", "-o", "json",
                     "--timeout", "200s", timeout=300)
        report = json.loads(killed.stdout)  # stdout is the report alone
        (m,) = report["kills"]
        (kill,) = m["kills"]
        phases = _phases(killed.stderr, name)
        # the first report names the kill, unless a loaded machine's first report came after
        # the trainer had already detected it (a busy CI run: "recovering: cleanup" first)
        assert phases[0] == f"killed {kill['pod']}" or phases[0].startswith("recovering: "), \
            killed.stderr
        assert any(p.startswith("recovering: ") for p in phases), (killed.stderr,
                                                                       m["recovery"])
        assert m["recovery"]["complete"], m

        # --replace says what it waits for before the new run starts: the old one's stop
        replaced = cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices",
                       "2", "--elastic-slices", "2", "--command", tiny_trainer(POLICY),
                       "--replace")
        assert _phases(replaced.stderr, f"replacing {name}") == [
            "stopping the previous run (its trainer's last save, then its pods)"], \
            replaced.stderr
        assert f"created workload {name}" in replaced.stderr
    finally:
        cli("workload", "delete", name, check=False)
