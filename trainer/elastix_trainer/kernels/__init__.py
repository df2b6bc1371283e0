"""The model's kernels, each beside its plain reference, chosen in one place by config.

- ``attention``: ``dot_product`` (the plain einsum over materialised ``[seq, seq]`` scores, the
  reference, and the CPU path) and ``flash`` (JAX's Pallas TPU splash-attention kernel, which
  never materialises the scores); ``autoselected`` picks ``flash`` on TPU where the kernel
  runs, else ``dot_product`` (MaxText's ``attention`` config, same names:
  ``maxtext@e591f30:src/maxtext/configs/base.yml:392``).
- ``loss``: next-token cross-entropy from the final hidden states and the output projection,
  whole (the reference: ``[tokens, vocab]`` float32 logits) or in ``num_vocab_tiling`` tiles
  of the vocabulary, each tile's logits computed again in the backward pass rather than kept
  (MaxText's name: ``base.yml:702-705``).
- ``remat``: the rematerialisation policies, by MaxText's ``remat_policy`` names
  (``src/maxtext/layers/decoders.py:346-433``), over the names ``model.py`` gives its
  intermediate values with ``checkpoint_name``.

This module holds only the names (no JAX): the config validates against them, and
``elastix-train --help`` lists them without importing JAX.
"""

ATTENTIONS = ("autoselected", "dot_product", "flash")
"""``--attention`` choices; ``autoselected`` resolves per platform (``attention.resolve``)."""

REMAT_POLICIES = ("auto", "none", "minimal_with_context", "minimal", "save_dot_except_mlpwi",
                  "save_dot_except_mlp", "save_qkv_proj", "save_out_proj", "full")
"""``--remat-policy`` choices, fastest (most memory) first as MaxText orders them, then
``full``; ``auto`` resolves per platform and batch (``remat.resolve``)."""

SAVED_NAMES = ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1",
               "mlpwo", "context")
"""The intermediate values ``model.py`` names for the policies (MaxText's names)."""
