"""matplotlib without its system font scan: elastix's charts draw with its bundled DejaVu Sans.

On first import matplotlib scans every font on the system (``fc-list``, the font
directories; on macOS ``system_profiler``) and caches the list in ``fontlist-vX.json``.
With many fonts, or a cache directory that is not kept (a CI runner, a read-only home: then
every run scans again), that took minutes, after a chaos run's last measurement and before
it could exit. The charts need none of those fonts (they use matplotlib's default, DejaVu
Sans, which ships with it), so elastix gives matplotlib its own config directory whose font
list holds only the bundled fonts, written without a scan: read at the next import as
matplotlib reads its own. A user's ``MPLCONFIGDIR`` is left alone (their fonts, their scan).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

# matplotlib's fontlist format version (FontManager.__version__), read from its source: the
# font list's file is named after it, and only a matching one is read instead of a scan.
_VERSION = re.compile(r"^\s+__version__ = ['\"]([^'\"]+)['\"]", re.M)


def config_dir() -> Path:
    """Where elastix keeps matplotlib's config and font list: the user's cache, per user."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "elastix" / "matplotlib"


def _fontlist_version() -> str | None:
    spec = importlib.util.find_spec("matplotlib.font_manager")
    try:
        m = _VERSION.search(Path(spec.origin).read_text()) if spec and spec.origin else None
    except OSError:
        return None
    return m.group(1) if m else None


def _complete(fontlist: Path) -> bool:
    """A font list saved with fonts in it (not the empty one a process died after writing)."""
    try:
        return bool(json.loads(fontlist.read_text()).get("ttflist"))
    except (OSError, ValueError, AttributeError):
        return False


def bundled_fonts_only() -> None:
    """Before ``matplotlib.font_manager`` is first imported: point matplotlib at elastix's
    config directory, seeded (once per matplotlib version) with a font list of the fonts
    matplotlib ships, so no import scans the system's. Does nothing when ``MPLCONFIGDIR``
    is set, the font manager is loaded already, or the directory cannot be written (then
    matplotlib does as it always did)."""
    import sys

    if os.environ.get("MPLCONFIGDIR") or "matplotlib.font_manager" in sys.modules:
        return
    version = _fontlist_version()
    d = config_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        if not os.access(d, os.W_OK | os.X_OK):
            return
    except OSError:
        return
    os.environ["MPLCONFIGDIR"] = str(d)
    if version is None:
        return
    fontlist = d / f"fontlist-v{version}.json"
    if _complete(fontlist):
        return
    # An empty list matplotlib accepts as its cache (so importing it scans nothing), then
    # the bundled fonts added through its public addfont and the list saved for next time.
    try:
        fontlist.write_text(json.dumps({
            "_version": version, "_FontManager__default_weight": "normal", "default_size": None,
            "defaultFamily": {"ttf": "DejaVu Sans", "afm": "Helvetica"}, "afmlist": [],
            "ttflist": [], "__class__": "FontManager"}))
    except OSError:  # a full disk, say: matplotlib builds its list as it always did
        fontlist.unlink(missing_ok=True)
        return
    import matplotlib
    from matplotlib import font_manager

    fm = font_manager.fontManager
    for f in sorted((Path(matplotlib.get_data_path()) / "fonts" / "ttf").glob("*.ttf")):
        try:
            fm.addfont(f)
        except Exception:  # noqa: BLE001 (a font it cannot read is left out, as matplotlib does)
            continue
    font_manager.json_dump(fm, fontlist)  # logs and carries on when it cannot write
