"""Google's ml-goodput-measurement, driven offline: the one place the suite reaches into its
private parts (the library only talks to Cloud Logging).

- :class:`Entries` stands in for the library's ``_CloudLogger``: the recorders write into it and
  the calculator reads from it. It goes in through ``cloud_logger=``, which
  ``GoodputRecorder.__init__`` / ``GoodputCalculator.__init__`` (goodput.py L305-360, L610-646
  of 0.2.3) document as "Should never be passed directly by the user": it is the library's own
  tests' seam and the only way to use it without Cloud Logging.
- :func:`library_report` pins ``goodput.datetime`` for one call: ``get_job_goodput`` ends a job
  that recorded no end at *now* (L1254-1294); a recorded run without ``run_end`` is measured up
  to its last event.
"""

from __future__ import annotations

import datetime
import socket
import types
from pathlib import Path


class Entries:
    """Stands in for the library's ``_CloudLogger``: hands over the entries once."""

    def __init__(self, job: str, entries: list[dict]):
        self.job_name, self.job_start_time = job, None
        self._entries = entries

    def write_cloud_logging_entry(self, entry):  # what the recorders write
        self._entries.append(entry)

    def flush(self):
        pass

    def read_cloud_logging_entries(self, start_time=None, end_time=None, last_entry_info=None):
        out, self._entries = self._entries, []
        return out, (None, None)


def library_report(entries: list[dict], now: float, cache_dir: Path, monkeypatch) -> dict:
    """The real library's goodput, breakdown and details for ``entries`` (the module says
    which private parts it uses, and why)."""
    from ml_goodput_measurement.src import goodput as gp
    from ml_goodput_measurement.src import goodput_elastic

    class _Now(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(now, tz)

    monkeypatch.setattr(gp, "datetime", types.SimpleNamespace(
        datetime=_Now, timezone=datetime.timezone, timedelta=datetime.timedelta))
    calc = goodput_elastic.ElasticGoodputCalculator(
        "elastix-run", "elastix", cloud_logger=Entries("elastix-run", list(entries)),
        cache_dir=str(cache_dir))
    pct, breakdown, max_step = calc.get_job_goodput(include_badput_breakdown=True)
    details = calc.get_job_goodput_details()
    return {"goodput": pct, "breakdown": {k.name: v for k, v in breakdown.items()},
            "max_step": max_step, "details": details}


def refuse_network(monkeypatch) -> None:
    """Refuse every connection that is not loopback (the library would reach Cloud Logging)."""
    real = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") \
                and self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"the cross-check tried to reach {address}")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
