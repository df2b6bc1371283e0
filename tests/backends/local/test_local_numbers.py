"""One number per measurement (issue 39): one real local kill, and every view of its recovery.

``chaos kill-worker --measure`` (JSON, Markdown summary, JUnit), ``workload goodput -o json``,
the trainer's TensorBoard ``recovery/*`` scalars and what ``--plot`` draws must give the same
detection, cleanup, waiting for slices, restore, first step, downtime and steps lost, to the
millisecond (or to the rounding a view prints). One run showed detection 0.508 s in the table
against 0.490 s in goodput (one counted from the kill, the other from the loss) and restore
0.145 s against TensorBoard's 0.068 s (the phase against the checkpoint's own read).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from local_helpers import tiny_trainer, wait_until
from local_helpers import workload_events as _events

from elastix.measure.events import assign_kills, events_from_records, ms_of, recoveries
from elastix.protocol.timefmt import parse

TRAIN = tiny_trainer("--elastic-mode pause-resume --max-slice-losses 10 --slice-wait-timeout 120 "
                     "--tensorboard-dir $ELASTIX_WORKLOAD_DIR/tb")
PHASES = ("detection", "cleanup", "waiting_for_slices", "restore", "first_step")
NUMBERS = (*(f"{p}_seconds" for p in PHASES), "downtime_seconds", "steps_lost")


def _numbers(rec: dict) -> dict[str, float]:
    """A recovery's JSON (kill-worker's or goodput's) as TensorBoard's tag names."""
    out = {f"{p}_seconds": rec["phases"][p] for p in PHASES}
    out.update(downtime_seconds=rec["downtime_seconds"], steps_lost=rec["steps_lost"])
    return out


def _tensorboard(directory) -> dict[str, float] | None:
    """The ``recovery/*`` scalars as TensorBoard shows them, once the writer has flushed them
    all (a read may fall between two of them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    if not all(f"recovery/{name}" in tags for name in NUMBERS):
        return None
    out = {}
    for name in NUMBERS:
        (point,) = acc.Scalars(f"recovery/{name}")
        out[name] = point.value
    return out


def test_every_view_of_one_kill_gives_the_same_numbers(cli, backend, state_dir, tmp_path):
    name = "nums"
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "5", "--max-restarts", "0",
        "--command", TRAIN)
    try:
        _compare(cli, backend, state_dir / name / "tb", name, tmp_path)
    finally:
        cli("workload", "delete", name, check=False)


def _compare(cli, backend, board_dir, name: str, tmp_path) -> None:
    md, junit, png = tmp_path / "summary.md", tmp_path / "junit.xml", tmp_path / "rec.png"
    cli("workload", "wait", name, "--for", "running", "--timeout", "200s", timeout=300)
    dry = json.loads(cli("chaos", "kill-worker", name, "--seed", "11", "--dry-run", "-o",
                         "json").stdout)
    p = cli("chaos", "kill-worker", name, "--seed", "11", "--measure", "-o", "json",
            "--timeout", "200s", "--summary", str(md), "--junit", str(junit), "--plot", str(png),
            timeout=300)
    (kill,) = json.loads(p.stdout)["kills"]
    # --seed picks one victim, measured or not (the measurement used to draw its own)
    assert [k["pod"] for k in kill["kills"]] == [dry["pod"]], (dry, kill)
    rec = kill["recovery"]
    assert rec["complete"] and rec["kind"] == "in-process", kill
    assert rec["detection_from"] == "loss", rec  # the local trainer dates the loss
    want = _numbers(rec)
    assert None not in want.values(), want
    # the kill came before the loss the trainer dated: named apart, in no phase
    assert rec["kill_to_loss_seconds"] is not None, rec

    # workload goodput: the same recovery from the events alone, no kill time
    good = json.loads(cli("workload", "goodput", name, "-o", "json").stdout)
    (g,) = [r for r in good["recoveries"] if r["start"] == rec["start"]]
    assert _numbers(g) == want, (g, rec)
    assert g["detection_from"] == "loss"

    # Markdown summary and JUnit: the same numbers as they print them (3 and 6 digits)
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    printed = dict(zip([*(f"{p}_seconds" for p in PHASES), "downtime_seconds", "steps_lost"],
                       cells[3:10], strict=True))
    assert printed == {k: f"{v:.3f} s" if k != "steps_lost" else str(v) for k, v in want.items()}
    props = {e.get("name"): e.get("value") for e in ET.parse(junit).iter("property")}
    for p in PHASES:
        assert float(props[f"kill.1.{p}_seconds"]) == want[f"{p}_seconds"], (p, props)
    assert float(props["kill.1.downtime_seconds"]) == want["downtime_seconds"]

    # the plot: --plot draws Recovery.phases() of the recovery rebuilt from the events
    assert png.read_bytes()[:4] == b"\x89PNG"
    recs = recoveries(events_from_records(_events(backend, name)))
    (drawn,) = [r for r in recs if r.start == ms_of(parse(rec["start"]))]
    assign_kills(recs, [ms_of(parse(kill["kills"][0]["time"]))])
    got = {f"{p.replace(' ', '_')}_seconds": (b - a) / 1000 for p, a, b in drawn.phases()}
    assert {k: got[k] for k in want if k.endswith("_seconds") and k != "downtime_seconds"} \
        == {k: v for k, v in want.items() if k not in ("downtime_seconds", "steps_lost")}

    # TensorBoard: written by the trainer from its own events (float32 in the file)
    board = wait_until(lambda: _tensorboard(board_dir), 60, "the recovery's TensorBoard scalars")
    assert {k: round(v, 3) for k, v in board.items()} == want, (board, want)
