"""A head's output, each line after the time the supervisor read it.

What the kubelet does for a container (and the log API's ``timestamps=true`` returns), for heads
whose own lines carry no date: MaxText logs through absl, whose prefix has a month, day and local
time only. The supervisor reads the head's pipe in its ``select`` loop, so the time is when the
line reached it, as on GKE.
"""

from __future__ import annotations

import os
from pathlib import Path

from elastix.protocol import timefmt


class LineStamper:
    """A head's output read from a pipe and written to its log, each line after the time it
    was read (RFC3339, UTC), as the kubelet records a container's lines and the log API's
    ``timestamps=true`` returns them. For heads whose lines carry no date of their own
    (MaxText's absl prefix has month, day and local time only)."""

    def __init__(self, fd: int, log: Path) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.out = open(log, "ab", buffering=0)  # noqa: SIM115 - closed at end of file
        self.buf = b""
        self.dropped = 0  # lines a full disk did not take (the head runs on regardless)

    def pump(self) -> bool:
        """Copy what the pipe holds now; False once it reached end of file (and is closed)."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                chunk = b""
            if not chunk:
                self.close()
                return False
            stamp = timefmt.iso_us().encode()
            *whole, self.buf = (self.buf + chunk).split(b"\n")
            self._write(b"".join(stamp + b" " + line + b"\n" for line in whole), len(whole))

    def _write(self, data: bytes, lines: int) -> None:
        try:
            self.out.write(data)
        except OSError:  # a full disk: the lines are lost, as a node's would be
            self.dropped += lines

    def close(self) -> None:
        if self.out.closed:
            return
        if self.buf:
            self._write(timefmt.iso_us().encode() + b" " + self.buf + b"\n", 1)
            self.buf = b""
        self.out.close()
        os.close(self.fd)
