"""Host memory that cannot hold the state's host copies is one line before the first step
(issue 58): the bytes, each copy and the flags that change them. What is available is read
from real files laid out as ``/proc`` and ``/sys/fs/cgroup`` are (v1 and v2)."""

from __future__ import annotations

import jax
import pytest
from trainer_helpers import make_cfg, make_trainer

from elastix.errors import UsageError
from elastix.protocol.presets import state_bytes as estimated_bytes
from elastix_trainer import program
from elastix_trainer.state import hostmem
from elastix_trainer.step import OptConfig, init_state

GB = 10**9


def _root(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path)


def _meminfo(kb: int) -> str:
    return f"MemTotal:       99999999 kB\nMemFree:  1 kB\nMemAvailable:   {kb} kB\n"


def test_meminfo_alone(tmp_path):
    got = hostmem.available(_root(tmp_path, {"proc/meminfo": _meminfo(8_000_000)}))
    assert got == hostmem.Available(8_000_000 * 1024, "MemAvailable in /proc/meminfo")


@pytest.mark.parametrize(("files", "want", "named"), [
    pytest.param({"memory.max": f"{10 * GB}\n", "memory.current": f"{4 * GB}\n",
                  "memory.stat": f"anon {3 * GB}\nfile {GB}\ninactive_file {GB}\n"},
                 7 * GB, "memory.max", id="v2"),
    pytest.param({"memory/memory.limit_in_bytes": f"{6 * GB}\n",
                  "memory/memory.usage_in_bytes": f"{2 * GB}\n",
                  "memory/memory.stat": f"cache 5\ninactive_file {GB // 2}\n"},
                 4 * GB + GB // 2, "limit_in_bytes", id="v1")])
def test_a_cgroup_limit_below_it_wins_and_its_reclaimable_cache_is_not_use(tmp_path, files,
                                                                          want, named):
    root = _root(tmp_path, {"proc/meminfo": _meminfo(64_000_000),
                            **{f"sys/fs/cgroup/{k}": v for k, v in files.items()}})
    got = hostmem.available(root)
    assert got.bytes == want and named in got.source


def test_no_cgroup_limit_leaves_meminfo(tmp_path):
    v2 = _root(tmp_path / "v2", {"proc/meminfo": _meminfo(1000),
                                 "sys/fs/cgroup/memory.max": "max\n",
                                 "sys/fs/cgroup/memory.current": "5\n"})
    v1 = _root(tmp_path / "v1", {  # what this machine's v1 reads when there is no limit
        "proc/meminfo": _meminfo(1000),
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/memory.usage_in_bytes": "1774600192\n"})
    for root in (v2, v1):
        assert hostmem.available(root).source == "MemAvailable in /proc/meminfo"


def test_nothing_readable_checks_nothing(tmp_path):
    assert hostmem.available(str(tmp_path)) is None
    need = hostmem.copies(make_cfg(snapshot_period=2), 10**15)
    hostmem.check(make_cfg(snapshot_period=2), need, None)  # unknown: never refused


def test_the_copies_a_run_holds_follow_its_flags(tmp_path):
    ck = str(tmp_path / "ck")
    count = {}
    for name, cfg, kw in (
            ("nothing kept", make_cfg(snapshot_period=0), {}),
            ("snapshots", make_cfg(snapshot_period=5), {}),
            ("checkpoints", make_cfg(checkpoint_dir=ck, checkpoint_period=10), {}),
            ("aligned", make_cfg(snapshot_period=5, checkpoint_dir=ck, checkpoint_period=10), {}),
            ("not aligned", make_cfg(snapshot_period=4, checkpoint_dir=ck, checkpoint_period=10),
             {}),
            ("persistence", make_cfg(checkpoint_dir=ck, checkpoint_period=10),
             {"persistence": True}),
            ("continuous", make_cfg(snapshot_period=5, checkpoint_dir=ck, checkpoint_period=10,
                                    continuous_checkpointing=True), {}),
            ("cpu", make_cfg(snapshot_period=5), {"cpu_replicas": 4})):
        count[name] = hostmem.copies(cfg, 100, **kw).count
    assert count == {"nothing kept": 0, "snapshots": 2, "checkpoints": 1, "aligned": 2,
                     "not aligned": 3, "persistence": 0, "continuous": 3, "cpu": 6}


def test_too_little_is_one_line_naming_the_bytes_the_copies_and_the_flags(tmp_path):
    cfg = make_cfg(snapshot_period=4, checkpoint_dir=str(tmp_path / "ck"), checkpoint_period=10)
    need = hostmem.copies(cfg, 7_150_000_000)
    with pytest.raises(UsageError) as err:
        hostmem.check(cfg, need, hostmem.Available(20 * GB, "MemAvailable in /proc/meminfo"))
    msg, hint = str(err.value), err.value.hint
    assert "\n" not in msg and "\n" not in hint
    assert "3 x the 7.15 GB state" in msg and "= 21.45 GB" in msg
    assert "--snapshot-period 4" in msg and "--checkpoint-period 10 is no multiple" in msg
    assert "20.00 GB available (MemAvailable in /proc/meminfo)" in msg
    assert "--snapshot-period 0" in hint and "multiple of --snapshot-period" in hint
    hostmem.check(cfg, need, hostmem.Available(22 * GB, "x"))  # enough: nothing said


def test_the_state_is_sized_from_its_shapes():
    from elastix_trainer.model import PRESETS

    shapes = jax.eval_shape(lambda: init_state(PRESETS["qwen3-0.6b"], OptConfig(), 0))
    got = hostmem.tree_bytes(shapes)  # nothing allocated
    assert 0 <= got - estimated_bytes("qwen3-0.6b") <= 64


def test_the_trainer_refuses_before_its_first_step(tmp_path):
    """The trainer's own check, as ``elastix-train`` runs it: with the 4 CPU replicas and two
    snapshots of the tiny state, 6 copies; a host with room for 5 is refused."""
    cfg = make_cfg(snapshot_period=2)
    trainer = make_trainer(cfg)
    one = hostmem.tree_bytes(trainer.state_shapes)
    assert jax.default_backend() == "cpu" and len(trainer.slices) == 4
    short = _root(tmp_path / "short", {"proc/meminfo": _meminfo(5 * one // 1024)})
    with pytest.raises(UsageError, match=r"6 x the .* state \(tiny\)"):
        program.check_host_memory(cfg, trainer, short)
    assert trainer.last_completed == 0
    enough = _root(tmp_path / "enough", {"proc/meminfo": _meminfo(7 * one // 1024)})
    program.check_host_memory(cfg, trainer, enough)
