"""The sample files README.md's commands use, run as a user would: ``docs/examples/spec.yaml``
creates the quickstart workload, and ``docs/examples/faults.yaml`` is a schedule ``chaos run``
takes for it (its plan, nothing killed: the faults themselves are the chaos tests')."""

from __future__ import annotations

from pathlib import Path

from local_helpers import workload_status

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "docs" / "examples" / "spec.yaml"
FAULTS = ROOT / "docs" / "examples" / "faults.yaml"


def test_the_sample_spec_and_schedule_run(cli):
    readme = (ROOT / "README.md").read_text()
    assert "--spec docs/examples/spec.yaml" in readme
    assert "--schedule docs/examples/faults.yaml" in readme
    cli("workload", "create", "demo", "--spec", str(SPEC))
    try:
        st = workload_status(cli, "demo")
        assert st["num_slices"] == 2 and st["labels"].get("team") == "research", st
        plan = cli("chaos", "run", "demo", "--schedule", str(FAULTS), "--dry-run")
        rows = [line.split() for line in plan.stdout.splitlines()
                if line.strip()[:1].isdigit()]
        assert [r[1] for r in rows] == ["kill", "term", "hang"], plan.stdout
        assert "nothing killed" in plan.stdout + plan.stderr
    finally:
        cli("workload", "delete", "demo", "--wait", "--delete-data", check=False)
