"""The MaxText head's ``sitecustomize`` on the local backend (linked in by the supervisor).

Python imports ``sitecustomize`` from ``sys.path`` at start-up; the local backend puts a
directory holding a link to this file first on the head's ``PYTHONPATH`` so the Pathways
stand-in (:mod:`elastix_trainer.elastic.local.maxtext`) is installed before MaxText imports
anything, with MaxText's command left exactly as the user wrote it. Inert unless
``ELASTIX_MAXTEXT_STANDIN`` is set.
"""

from elastix_trainer.elastic.local import maxtext as maxtext_standin

maxtext_standin.activate_from_env()
