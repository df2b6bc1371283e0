"""A diverged run stops with a true hint, and no non-finite state is ever checkpointed."""

from __future__ import annotations

import math

import jax
import pytest
from trainer_helpers import make_cfg, make_trainer, run_cli, run_elastic

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer


@pytest.mark.parametrize("flag,value", [("--lr", "inf"), ("--lr", "nan"), ("--lr", "0"),
                                        ("--weight-decay", "inf"), ("--step-delay", "nan"),
                                        ("--slice-wait-timeout", "inf"),
                                        ("--checkpoint-timeout", "0")])
def test_non_finite_settings_are_input_errors(flag, value):
    from elastix_trainer.config import ConfigError, parse_args

    with pytest.raises(ConfigError) as e:
        parse_args([flag, value])
    assert e.value.problems[0][0] == flag[2:].replace("-", "_")


def test_cli_lr_inf_is_exit_2():
    proc = run_cli(["--lr", "inf"], timeout=60)
    assert proc.returncode == 2 and "error: lr: must be a positive, finite number" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_divergence_stops_the_run_and_checkpoints_stay_finite(tmp_path):
    # AdamW at lr 1e8 turns the tiny model's loss into NaN at step 4.
    cfg = make_cfg(lr=1e8, warmup_steps=0, checkpoint_dir=str(tmp_path / "ck"),
                   checkpoint_period=2)
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "failed"
    assert outcome.reason == ("the loss is nan at step 4: training diverged; nothing from step 4 "
                              "on is saved")
    assert "lower --lr" in outcome.hint and "re-run" not in outcome.hint
    ev = trainer.events
    assert all(math.isfinite(r["loss"]) for r in ev.of("step"))
    assert [r["step"] for r in ev.of("checkpoint_save_started")] == [2]
    # What is on storage restores to a finite state.
    ck = Checkpointer(cfg.checkpoint_dir, 2, EventLog(None))
    assert ck.committed_steps() == [2]
    fresh = make_trainer(cfg, EventLog(None))
    session = fresh.start(frozenset(fresh.slices))
    state, _, _ = ck.restore(2, session.fns.abstract)
    assert all(bool(jax.numpy.isfinite(x).all()) for x in jax.tree.leaves(state)
               if jax.numpy.issubdtype(x.dtype, jax.numpy.inexact))
