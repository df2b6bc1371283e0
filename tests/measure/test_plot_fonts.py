"""Charts draw with matplotlib's bundled fonts: no scan of the system's (issue 39).

matplotlib's first import scanned every system font (minutes on some machines, on every run
where its cache is not kept), after a chaos run's last measurement. Run in a fresh
interpreter: the font manager loads once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DRAW = """
import json, sys
from measure_helpers import recorded_run, to_jsonl
from elastix.measure.events import events_from_jsonl, recoveries
from elastix.views.plot import plot_recovery

events = events_from_jsonl(to_jsonl(recorded_run()[0]))
plot_recovery(events, recoveries(events)[0], sys.argv[1])
from matplotlib import font_manager  # loaded by the plot, first
json.dump({"fc_list_ran": font_manager._get_fontconfig_fonts.cache_info().currsize > 0,
           "fonts": [f.fname for f in font_manager.fontManager.ttflist]}, sys.stdout)
"""


def _draw(tmp_path: Path, png: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path / "home"),
               PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    out = subprocess.run([sys.executable, "-c", DRAW, str(tmp_path / png)], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    assert (tmp_path / png).stat().st_size > 0
    return json.loads(out.stdout)


def test_a_chart_is_drawn_without_scanning_the_systems_fonts(tmp_path):
    import matplotlib

    bundled = Path(matplotlib.get_data_path(), "fonts", "ttf")
    first = _draw(tmp_path, "a.png")
    assert not first["fc_list_ran"]
    assert first["fonts"] and all(Path(f).parent == bundled for f in first["fonts"])
    # the list is kept (matplotlib's own format, bundled fonts only) and read next time
    (kept,) = (tmp_path / "cache" / "elastix" / "matplotlib").glob("fontlist-v*.json")
    saved = json.loads(kept.read_text())["ttflist"]
    assert saved and all(e["fname"].startswith("fonts/ttf/") for e in saved)
    before = kept.stat().st_mtime_ns
    second = _draw(tmp_path, "b.png")
    assert not second["fc_list_ran"] and second["fonts"] == first["fonts"]
    assert kept.stat().st_mtime_ns == before
    assert not (tmp_path / "home" / ".cache" / "matplotlib").exists()  # no scan's cache either
