"""Reading a committed step back: onto the target shardings, one replica read, shapes checked.

Only a step the store calls committed is ever read (``Checkpointer.restore`` checks), so a
manager's memory of a save whose background write later failed is never trusted.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding

from elastix.errors import UsageError
from elastix_trainer import storage
from elastix_trainer.state.manager import pathways_persistence


def read(mgr, directory: str, step: int, abstract_state: Any) -> tuple[Any, dict, int]:
    """Read ``step`` with ``mgr`` onto the shardings in ``abstract_state``.

    Returns:
        (state, data_state, bytes read).
    """
    import orbax.checkpoint as ocp

    one, full = one_replica(abstract_state)
    if pathways_persistence():
        item = ocp.args.StandardRestore(one)
    else:
        # Each device shard is read straight into its own host buffer and placed (Orbax's
        # ArrayHandler). On CPU the cost is the kernel faulting in the state's fresh pages,
        # not the copies; restoring as numpy and placing it ourselves faulted in the state
        # twice, and Orbax's handler gives us no say over TensorStore's context
        # (docs/benchmarks.md, "Restore throughput").
        item = ocp.args.PyTreeRestore(
            one, restore_args=ocp.checkpoint_utils.construct_restore_args(one))
    args = ocp.args.Composite(state=item, data=ocp.args.JsonRestore())
    restored = mgr.restore(step, args=args)
    state = restored["state"]
    if full is not None:
        # Read each shard once (onto the first slice), then copy device to device: reading
        # straight onto the replicated target made Orbax read the data once per slice.
        state = jax.device_put(state, full)
    nbytes = storage.tree_bytes(storage.epath(directory) / str(step))
    return state, dict(restored["data"]), nbytes


def check_matches(directory: str, step: int, shapes: Any) -> None:
    """Raise UsageError when committed ``step`` holds a state of other shapes than ``shapes``.

    Restoring it would fail deep in Orbax, be retried as a user-code error and end with
    "re-run with the same --checkpoint-dir", which fails the same way.
    """
    import orbax.checkpoint as ocp

    stored = ocp.StandardCheckpointHandler().metadata(storage.epath(directory) / str(step) / "state")
    have = jax.tree_util.tree_leaves_with_path(stored)
    want = jax.tree.leaves(shapes)
    pairs = zip(have, want, strict=False)  # a count mismatch is reported below
    diff = next(((jax.tree_util.keystr(p), tuple(m.shape), tuple(w.shape))
                 for (p, m), w in pairs if tuple(m.shape) != tuple(w.shape)), None)
    if diff is None and len(have) == len(want):
        return
    what = (f"{diff[0]} is {diff[1]} there, {diff[2]} here" if diff
            else f"{len(have)} arrays there, {len(want)} here")
    raise UsageError(f"the checkpoint at step {step} in {directory} holds a different model "
                     f"({what})",
                     hint="resume with the --preset it was trained with, or use a new "
                          "--checkpoint-dir")


def one_replica(abstract_state: Any) -> tuple[Any, Any]:
    """(target on the first slice only, full shardings) - or (abstract_state, None) when the
    state is not replicated over a 'slice' axis."""
    from elastix_trainer.mesh import on_pathways

    if on_pathways() and pathways_persistence():  # each TPU host reads its own shards
        return abstract_state, None
    # Otherwise (on CPU, and on Pathways without persistence, its default) the controller reads
    # the checkpoint: reading straight onto a state replicated over N slices reads it N times,
    # so read one replica and copy it device to device.
    leaves = jax.tree.leaves(abstract_state)
    shardings = [getattr(x, "sharding", None) for x in leaves]
    if not leaves or not all(isinstance(sh, NamedSharding) for sh in shardings):
        return abstract_state, None
    mesh = shardings[0].mesh
    if "slice" not in mesh.axis_names or mesh.shape["slice"] == 1 or any(
            sh.mesh != mesh or "slice" in _spec_axes(sh.spec) for sh in shardings):
        return abstract_state, None
    sub = Mesh(mesh.devices[:1], mesh.axis_names)
    one = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                      sharding=NamedSharding(sub, x.sharding.spec)),
                       abstract_state)
    return one, jax.tree.map(lambda x: x.sharding, abstract_state)


def _spec_axes(spec) -> set:
    out = set()
    for entry in spec:
        if isinstance(entry, tuple):
            out.update(entry)
        elif entry is not None:
            out.add(entry)
    return out
