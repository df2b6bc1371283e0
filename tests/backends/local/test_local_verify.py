"""``chaos run --verify`` on the local backend with the real trainer: a pause-resume recovery
loses nothing (its losses equal an uninterrupted copy's bit for bit), and a restore made wrong
on purpose is caught at the first step it changed.

The wrong restore is not a hook in the product: the head runs a script of this test that builds
the trainer as ``elastix-train`` does and attaches a ``seams.Hooks`` that moves every parameter
by 1e-3 once a saved step was restored.
"""

from __future__ import annotations

import json
import sys
import textwrap

from local_helpers import tiny_trainer

from elastix.backends.local.plan import data_dir

POLICY = "--elastic-mode pause-resume --max-slice-losses 50 --slice-wait-timeout 120"
WRONG_RESTORE = '''
    """elastix-train, with every restore of a saved step made wrong (params + 1e-3)."""
    import sys

    import jax

    from elastix_trainer import __main__ as entry, program
    from elastix_trainer.seams import Hooks


    class WrongRestore(Hooks):
        pending = False

        def after_restore(self, source, step):
            self.pending = source != "init"

        def before_dispatch(self, session, n):
            if self.pending:
                self.pending = False
                params = jax.tree_util.tree_map(lambda p: p + 1e-3, session.state["params"])
                session.state = dict(session.state, params=params)


    build = program.build_trainer


    def build_trainer(cfg, events, health):
        trainer, standin = build(cfg, events, health)
        trainer.add_hooks(WrongRestore())
        return trainer, standin


    program.build_trainer = build_trainer
    sys.exit(entry.main())
'''


def _create(cli, name: str, command: str) -> None:
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "5", "--max-restarts", "0",
        "--command", command)


def _chaos(cli, name: str, *extra: str):
    return cli("chaos", "run", name, "--kills", "1", "--interval", "0", "--timeout", "5m",
               "-o", "json", *extra, check=False, timeout=900)


def test_a_pause_resume_recovery_loses_nothing(cli, backend, state_dir):
    name = "vfy"
    _create(cli, name, tiny_trainer(POLICY))
    try:
        # Bad input first: a reference that does not exist kills nothing.
        p = _chaos(cli, name, "--reference", "nope")
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.startswith("error: --reference nope: no such workload"), p.stderr
        assert len(p.stderr.strip().splitlines()) == 2  # the error and its hint

        p = _chaos(cli, name, "--verify")
        assert p.returncode == 0, p.stdout + p.stderr
        d = json.loads(p.stdout)
        (kill,) = d["kills"]
        assert kill["recovery"]["complete"] and kill["in_process"]
        v = d["verify"]
        assert v["ok"] is True and v["reference"] == "vfy-reference", v
        assert v["steps_compared"] > kill["recovery"]["restored_step"] > 0
        assert v["steps_compared"] == v["last_step"] >= kill["recovery"]["first_step"]
        assert v["first_mismatch"] is None and v["max_abs_diff"] == 0.0
        assert v["tolerance"] == 0.0 and v["source"] == "events"
        assert "started reference vfy-reference" in p.stderr
        # The reference was deleted with its data; the workload under test runs on.
        assert not (state_dir / "vfy-reference").exists()
        assert not data_dir(state_dir / "vfy-reference").exists()
        assert backend.status(name).state == "Running"
    finally:
        cli("workload", "delete", name, "--wait", check=False)


def test_a_wrong_restore_fails_at_the_first_step_it_changed(cli, tmp_path):
    name = "wrong"
    script = tmp_path / "wrong_restore.py"
    script.write_text(textwrap.dedent(WRONG_RESTORE))
    command = tiny_trainer(POLICY).replace("elastix-train", f"{sys.executable} {script}", 1)
    _create(cli, name, command)
    try:
        p = _chaos(cli, name, "--verify", "--junit", str(tmp_path / "chaos.xml"))
        assert p.returncode == 3, p.stdout + p.stderr
        d = json.loads(p.stdout)
        (kill,) = d["kills"]
        restored = kill["recovery"]["restored_step"]
        assert kill["recovery"]["complete"] and kill["ok"]  # its downtime and steps look fine
        v = d["verify"]
        m = v["first_mismatch"]
        assert v["ok"] is False and m["step"] == restored + 1, v
        assert m["run"] != m["reference"] and v["mismatches"] >= 1
        assert d["violations"] == [{"kill": 0, "bound": "verify", "limit": 0.0,
                                    "value": abs(m["run"] - m["reference"])}]
        err = p.stderr.strip().splitlines()
        assert err[-2].startswith("error: chaos run: the one kill done; 1 bound missed"), p.stderr
        assert err[-1].startswith(f"hint: verify: step {restored + 1} differs from reference "
                                  f"wrong-reference: loss {m['run']!r} (run) vs "
                                  f"{m['reference']!r}"), p.stderr
        xml = (tmp_path / "chaos.xml").read_text()
        assert 'testcase name="verify"' in xml and f"step {restored + 1} differs" in xml
    finally:
        cli("workload", "delete", name, "--wait", check=False)
