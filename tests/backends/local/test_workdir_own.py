"""What the launcher counts as its own in a workload's state directory (``workdir.OWN``): the
default trainer's files are not reported as "what its command wrote" on every delete."""

from __future__ import annotations

from elastix.backends.local import workdir


def test_the_default_trainers_ml_goodput_records_are_the_runs_own(tmp_path):
    # The trainer writes <events>.ml-goodput.jsonl beside events.jsonl by default (issue 36):
    # a real delete of the quickstart workload listed it as the command's (2026-12-03).
    for name in ("events.jsonl", "events.ml-goodput.jsonl", "plan.json", "mine.ckpt"):
        (tmp_path / name).write_text("x")
    assert workdir.command_files(tmp_path) == ["mine.ckpt"]
