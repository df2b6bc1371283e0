"""``workload forecast --report`` refuses a number no run measures (issue 59, item 13).

A saved chaos report whose ``forecast_inputs`` held NaN, an infinity or a negative time was
taken as is: the forecast answered 0 % or 100 % goodput, with ``NaN`` in its JSON. Now each is
one line naming the field, exit 2. The report is ``chaos run -o json``'s, as test_forecast
builds it, with one value changed.
"""

from __future__ import annotations

import json

import pytest
from test_forecast import _report

from elastix.main import main

NAN, INF = float("nan"), float("inf")
CASES = [
    (("measured", "checkpoint_stall"), NAN, "measured.checkpoint_stall is nan"),
    (("measured", "downtime"), NAN, "measured.downtime is nan"),
    (("measured", "step"), INF, "measured.step is inf"),
    (("measured", "wall"), -5, "measured.wall -5 is negative"),
    (("measured", "snapshot_stall"), -0.5, "measured.snapshot_stall -0.5 is negative"),
    (("measured", "failures"), -3, "measured.failures -3 is negative"),
    (("measured", "saves"), 1.5, "measured.saves 1.5 is not a whole number"),
    (("measured", "checkpoint_period"), 0, "measured.checkpoint_period 0 is below 1"),
    (("measured", "wall"), 10**400, "measured.wall an integer of 401 digits is too large"),
    (("recoveries", 0, "wait"), NAN, "recoveries[0].wait is nan"),
    (("recoveries", 1, "downtime"), -INF, "recoveries[1].downtime is -inf"),
    (("startup",), NAN, "startup is nan"),
    (("slices",), 0, "slices 0 is below 1"),
]


@pytest.mark.parametrize(("path", "value", "message"), CASES,
                         ids=[f"{'.'.join(map(str, c[0]))}={str(c[1])[:12]}" for c in CASES])
def test_a_number_no_run_measures_is_refused_naming_its_field(tmp_path, capsys, path, value,
                                                              message):
    report = _report(tmp_path)
    d = json.loads(report.read_text())
    node = d["forecast_inputs"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    report.write_text(json.dumps(d))  # NaN and Infinity as Python's json writes them
    code = main(["workload", "forecast", "--report", str(report), "--days", "1", "--runs", "2",
                 "-o", "json"])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "", (code, out[:300])
    assert lines[0].startswith(f"error: report '{report}': forecast_inputs.{message}"), lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
