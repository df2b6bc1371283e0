"""What the docs say a command does is what it does (issue 60): docs/maxtext.md's word on
MaxText's default retry budget (a note now, once a refusal) is checked against the lint."""

from __future__ import annotations

import re
from pathlib import Path

from elastix.workload.lint import lint
from elastix.workload.render import render
from elastix.workload.spec import build_spec

ROOT = Path(__file__).resolve().parents[2]


def test_maxtext_md_says_what_create_does_with_maxtexts_default_budget():
    text = " ".join((ROOT / "docs" / "maxtext.md").read_text(encoding="utf-8").split())
    said = re.search(r"MaxText's default of 10 would end the run at the tenth loss, and "
                     r"`workload create` ([^(]+)\(", text)
    assert said, "the sentence on MaxText's default budget is gone"
    # the doc's local run: 1 slice, the default 10 restarts; MaxText's default budget, 10
    mt = ("python -u -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r1 "
          "elastic_enabled=true enable_single_controller=true elastic_max_retries=10")
    found = lint(render(build_spec(None, {"name": "mt", "tpu_type": "v5litepod-8",
                                          "num_slices": 1, "elastic_slices": 1,
                                          "docker_image": "img:1", "command": mt})))
    assert found.errors == [] and [w[0] for w in found.warnings] == ["budget"]
    assert said.group(1).strip() == "runs it with a `budget` note saying so"
