"""The project, zone and region of the user's gcloud configuration, read from its files.

xpk and gcloud users set these once (``gcloud config set project P``) and expect every tool to
follow. elastix never runs gcloud, so it reads the files gcloud writes: the directory is
``$CLOUDSDK_CONFIG`` or ``~/.config/gcloud``; ``active_config`` names the configuration
(``$CLOUDSDK_ACTIVE_CONFIG_NAME`` wins, ``default`` when absent); ``configurations/config_NAME``
is an INI file with ``[core] project`` and ``[compute] zone`` / ``region``. The environment
overrides gcloud honours (``CLOUDSDK_CORE_PROJECT``, ``CLOUDSDK_COMPUTE_ZONE``,
``CLOUDSDK_COMPUTE_REGION``) win over the file, as they do for gcloud (Google Cloud SDK docs,
"gcloud topic configurations" and "gcloud config": properties from environment variables
take precedence over the active configuration).

A missing or unreadable file is no configuration: every value is then None.
"""

from __future__ import annotations

import configparser
import dataclasses
import os
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class GcloudDefaults:
    project: str | None = None
    zone: str | None = None
    region: str | None = None
    source: str | None = None
    """Where they were read (the file, or the environment), for messages."""

    @property
    def location(self) -> str | None:
        """A zone where one is set (a zonal cluster is the common case), else the region."""
        return self.zone or self.region


def config_dir(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CLOUDSDK_CONFIG"):
        return Path(env["CLOUDSDK_CONFIG"])
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".config" / "gcloud"


def read_defaults(env: dict[str, str] | None = None) -> GcloudDefaults:
    """The active configuration's project, zone and region (each None when unset)."""
    env = dict(os.environ if env is None else env)
    root = config_dir(env)
    name = env.get("CLOUDSDK_ACTIVE_CONFIG_NAME")
    if not name:
        try:
            name = (root / "active_config").read_text(encoding="utf-8").strip() or "default"
        except OSError:
            name = "default"
    path = root / "configurations" / f"config_{name}"
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
        found = str(path)
    except (OSError, UnicodeDecodeError, configparser.Error):
        parser, found = None, None

    def get(section: str, key: str, var: str) -> str | None:
        if env.get(var):
            return env[var]
        if parser is None:
            return None
        value = parser.get(section, key, fallback="").strip()
        return value or None

    project = get("core", "project", "CLOUDSDK_CORE_PROJECT")
    zone = get("compute", "zone", "CLOUDSDK_COMPUTE_ZONE")
    region = get("compute", "region", "CLOUDSDK_COMPUTE_REGION")
    return GcloudDefaults(project, zone, region, found or ("environment" if project else None))
