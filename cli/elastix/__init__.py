"""elastix: a launcher for elastic JAX training with Pathways on GKE, and a local backend.

The launcher half (this package) never imports JAX. ``kubernetes`` and ``google.cloud`` are
imported lazily inside the functions that use them so that ``elastix --help`` stays fast.
The trainer half lives in :mod:`elastix_trainer`.
"""

__version__ = "0.1.0"
