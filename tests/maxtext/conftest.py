"""One real MaxText training run for the whole suite: README's command made tiny, SIGKILLed
after a checkpoint, started again, its log stamped as the Kubernetes log API does.

MaxText takes about a minute to start on a quiet machine, so the session shares one run of
two processes (``maxtext_run``) between every test that needs it. Without the MaxText
environment (``bash .ci/setup-maxtext``) the tests skip and say so; in CI (``CI=true``) that
is a failure, never a skip.
"""

from __future__ import annotations

import mtrun
import pytest
import tiers
from mtsuite import PERIOD, SAVED, STEPS, THEN, Run, require_maxtext


@pytest.fixture(scope="session")
@tiers.slow
def maxtext_run(tmp_path_factory) -> Run:
    require_maxtext()
    out = tmp_path_factory.mktemp("maxtext")
    argv = [str(mtrun.maxtext_python()), *mtrun.tiny_run(
        mtrun.readme_command(), base_output_directory=str(out / "run"), run_name="suite",
        steps=str(STEPS), checkpoint_period=str(PERIOD), async_checkpointing="false")]
    log = out / "head.log"
    first = mtrun.Process(argv, log, cwd=out)
    try:
        mtrun.kill_after_checkpoint(first, saved=SAVED, then=THEN, timeout=900)
    finally:
        first.stop()
    second = mtrun.Process(argv, log, cwd=out)
    try:
        code = second.finish(900)
    finally:
        second.stop()
    return Run(argv, log, first.lines, second.lines, code)
