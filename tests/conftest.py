"""Suite-wide: keep tools' caches out of the user's home (tests leave nothing outside temp dirs).

Set at import, before any test module imports matplotlib, and inherited by every subprocess the
tests start (the CLI, the trainer, the local backend's processes).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_CACHES = tempfile.mkdtemp(prefix="elastix-test-caches-")
atexit.register(shutil.rmtree, _CACHES, ignore_errors=True)
os.environ["MPLCONFIGDIR"] = os.path.join(_CACHES, "matplotlib")
os.environ["XDG_CACHE_HOME"] = os.path.join(_CACHES, "xdg-cache")
os.environ["KUBECACHEDIR"] = os.path.join(_CACHES, "kube")
# The user's gcloud configuration (project, zone) must not leak into the tests' defaults.
os.environ["CLOUDSDK_CONFIG"] = os.path.join(_CACHES, "gcloud")
for _var in ("CLOUDSDK_CORE_PROJECT", "CLOUDSDK_COMPUTE_ZONE", "CLOUDSDK_COMPUTE_REGION",
             "CLOUDSDK_ACTIVE_CONFIG_NAME"):
    os.environ.pop(_var, None)
