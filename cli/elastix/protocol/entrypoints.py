"""What the launcher starts of the trainer's: the one place that names it, by module path.

The launcher never imports the trainer (``tests/test_layers.py``): it starts it, in another
process and often another Python (the MaxText environment's). Those ties are strings no import
graph can see, so they are declared here and ``tests/test_layers.py`` resolves each one to a
file of the tree and checks that no other launcher module spells a trainer module path.
"""

from __future__ import annotations

TRAINER_PACKAGE = "elastix_trainer"
"""The trainer's package: linked into a MaxText head's ``PYTHONPATH`` beside ``elastix``."""

TRAINER_SCRIPT = "elastix-train"
"""The trainer's console script (``pyproject.toml``: ``elastix_trainer.__main__:main``): the
head command of the image (``templates/Dockerfile.j2``) and of the local backend's demo."""

TRAINER_IMPORTS = (TRAINER_PACKAGE, "jax", "orbax.checkpoint", "optax", "grain")
"""What a Python must be able to import to run :data:`TRAINER_SCRIPT`: its package and the
``trainer`` extra's libraries it imports first. A launcher-only install (``pip install
elastix``) has the script but not these; the local backend checks them at submit."""

TRAINER_WARM = "elastix_trainer.warm"
"""A local head started before its run exists (``workload create --replace``): started by the
supervisor's ``--prestart`` (:data:`TRAINER_WARM_CODE`), it imports the trainer's modules and
then runs :data:`TRAINER_SCRIPT`'s entry point in its own process once the run is its own."""

TRAINER_WARM_CODE = ("import sys\n"
                     "if sys.path and sys.path[0] == '':\n"
                     "    del sys.path[0]\n"
                     "import runpy\n"
                     f"runpy.run_module({TRAINER_WARM!r}, run_name='__main__', alter_sys=True)\n")
"""``python -c`` code that runs :data:`TRAINER_WARM` as ``-m`` would, without the working
directory on ``sys.path`` (``-c`` and ``-m`` put it first; ``-P`` needs Python 3.11): a console
script such as ``elastix-train`` has its bin directory there instead, so a package in the
directory the head runs in must not be imported in its place."""

MAXTEXT_STANDIN = "elastix_trainer.elastic.local.maxtext"
"""The local Pathways stand-in for MaxText, run as ``python -m`` with ``--check`` in the MaxText
environment before a submit."""

MAXTEXT_SITECUSTOMIZE = ("elastic", "local", "maxtext_sitecustomize.py")
"""Inside :data:`TRAINER_PACKAGE`: linked as ``sitecustomize.py`` into a MaxText head's path,
so the stand-in is installed before MaxText imports anything."""

# The trainer's defaults the launcher judges a command line by (the elastic lint,
# ``elastix.workload.lint``): ``elastix_trainer.config.TrainConfig`` takes its defaults from
# here, so the two cannot drift apart.
MAX_SLICE_LOSSES = 10
"""``elastix-train --max-slice-losses`` when neither it nor ``ELASTIX_MAX_SLICE_LOSSES`` is
given (MaxText's ``elastic_max_retries`` default is 10 too)."""
SLICE_WAIT_TIMEOUT = 300.0
"""``elastix-train --slice-wait-timeout``, seconds (MaxText's ``elastic_timeout_seconds`` is 300)."""
ELASTIC_MODE = "pause-resume"
"""``elastix-train --elastic-mode``."""

FIT_CHECK = "fit-check"
"""``python -m elastix_trainer fit-check``: the trainer's step compiled for TPU slices without a
chip (``elastix_trainer.fitcheck``), started by the launcher's fit check
(``elastix.backends.gke.fitcheck``) in the launcher's own Python."""
FIT_CHECK_PROGRESS = "fit check:"
"""What each of its progress lines on stderr starts with (libtpu writes lines of its own
there)."""
FIT_CHECK_VERSION = 1
"""The version of the report it prints: the launcher reads this one only."""
