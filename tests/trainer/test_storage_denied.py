"""A checkpoint directory the trainer may not list (403): one line that says so, not gcsfs's."""

from __future__ import annotations

import pytest
from fake_gcs import emulator_env
from fault_proxy import Rule, fault_proxy
from trainer_helpers import run_cli


@pytest.fixture
def proxied(gcs, monkeypatch):
    with fault_proxy(gcs) as (url, proxy):
        for k, v in emulator_env(url).items():
            monkeypatch.setenv(k, v)
        yield proxy


def test_a_checkpoint_dir_that_cannot_be_listed_is_one_clear_line(proxied):
    proxied.add(Rule("GET", r"list403", "status", status=403, count=10_000))
    p = run_cli(["--preset", "tiny", "--steps", "2", "--batch-per-device", "1", "--seq-len", "16",
                 "--num-slices", "2", "--checkpoint-dir", "gs://ckpts/list403"])
    assert p.returncode == 1  # the environment, not the input
    err = [ln for ln in p.stderr.splitlines() if ln.startswith(("error:", "hint:"))]
    assert err[0].startswith("error: cannot read gs://ckpts/list403: permission denied (403)")
    assert "storage.objects" in err[1] or "roles/storage" in err[1]
    assert "Traceback" not in p.stderr
