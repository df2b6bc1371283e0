"""Checkpoint reads and format on Pathways, decided by the same code that runs there.

No Pathways server runs here; what these check is the decision: the controller reads one
replica of a state replicated over slices (it used to read it once per slice on Pathways unless
persistence was on), and with --pathways-persistence the save format is OCDBT-free.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from trainer_helpers import make_cfg, make_trainer

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer
from elastix_trainer.state.restore import one_replica


def _abstract():
    trainer = make_trainer(make_cfg(), EventLog(None))
    return trainer.start(frozenset(trainer.slices)).fns.abstract


def _slices(tree) -> set[int]:
    return {x.sharding.mesh.shape["slice"] for x in jax.tree.leaves(tree)}


def test_on_pathways_without_persistence_one_replica_is_read(monkeypatch):
    abstract = _abstract()
    monkeypatch.setenv("JAX_PLATFORMS", "proxy")
    monkeypatch.delenv("ENABLE_PATHWAYS_PERSISTENCE", raising=False)
    one, full = one_replica(abstract)
    assert _slices(one) == {1} and full is not None  # read once, then copied device to device
    monkeypatch.setenv("ENABLE_PATHWAYS_PERSISTENCE", "1")
    one, full = one_replica(abstract)
    assert one is abstract and full is None  # hosts read their own shards


def test_persistence_saves_without_ocdbt_and_restores(monkeypatch, tmp_path):
    monkeypatch.setenv("ENABLE_PATHWAYS_PERSISTENCE", "1")
    trainer = make_trainer(make_cfg(), EventLog(None))
    session = trainer.start(frozenset(trainer.slices))
    ck = Checkpointer(str(tmp_path / "ck"), 1, EventLog(None))
    ck.save(1, session.state, {"next_index": 3})
    assert ck.settle(timeout=120) is True
    names = {n for _, dirs, files in os.walk(tmp_path / "ck" / "1") for n in dirs + files}
    assert not [n for n in names if "ocdbt" in n], sorted(names)
    state, data, _ = ck.restore(1, session.fns.abstract)
    assert data == {"next_index": 3}
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(session.state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ck.close()
