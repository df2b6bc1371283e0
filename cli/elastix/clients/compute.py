"""The Compute Engine API, for the one read elastix needs from it: a reservation.

``GET compute/v1/projects/P/zones/Z/reservations/R`` through google-auth's ``AuthorizedSession``
(the ``requests`` transport google-auth already brings), not through ``google-cloud-compute``:
one JSON read does not justify a client library of that size (docs/dependencies.md).
``ELASTIX_COMPUTE_API_ENDPOINT`` points it at another server (tests run a local one).
"""

from __future__ import annotations

import os
from typing import Any

from elastix.errors import BackendError

ENDPOINT_ENV = "ELASTIX_COMPUTE_API_ENDPOINT"
DEFAULT_ENDPOINT = "https://compute.googleapis.com"


def endpoint() -> str:
    return (os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")


def get_json(path: str, creds: Any = None, timeout: float = 30.0) -> dict | None:
    """The resource at ``path`` (under the endpoint), or None when the API answers 404.

    Args:
        path: e.g. ``compute/v1/projects/P/zones/Z/reservations/R``.
        creds: google-auth credentials; None for the application-default ones.
    """
    import requests
    from google.auth.exceptions import GoogleAuthError
    from google.auth.transport.requests import AuthorizedSession

    from elastix.clients import gke

    if creds is None:
        creds, _ = gke.credentials()
    url = f"{endpoint()}/{path}"
    try:
        with AuthorizedSession(creds) as session:
            r = session.get(url, timeout=timeout)
    except GoogleAuthError as err:  # the token could not be had: credentials, not the network
        raise BackendError(f"Google Cloud rejected the application-default credentials: {err}",
                           hint=gke.ADC_HINT) from None
    except (requests.RequestException, OSError) as err:
        raise BackendError(f"cannot reach the Compute Engine API: {err}",
                           hint=f"check the network (or {ENDPOINT_ENV})") from None
    if r.status_code == 404:
        return None
    if r.status_code in (401, 403):
        raise BackendError(f"permission denied reading {path}: {_message(r)}",
                           hint="the credentials need compute.reservations.get on the "
                                "reservation's project (roles/compute.viewer)")
    if r.status_code >= 400:
        raise BackendError(f"the Compute Engine API failed reading {path}: HTTP "
                           f"{r.status_code} {_message(r)}", hint="try again later")
    return r.json()


def _message(r: Any) -> str:
    try:
        return str(r.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return r.text[:200]
