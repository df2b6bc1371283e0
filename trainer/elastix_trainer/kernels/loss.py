"""Next-token cross-entropy from hidden states and the output projection.

:func:`cross_entropy` with ``tiles=1`` is the reference: the ``[tokens, vocab]`` float32 logits,
whole (for Qwen3's 151,936-entry vocabulary, 0.6 GB per thousand-token sequence). With
``tiles=n`` the vocabulary is cut into ``n`` tiles (MaxText's ``num_vocab_tiling``:
``maxtext@e591f30:src/maxtext/configs/base.yml:702-705``, which tiles the batch-sequence axis
instead): a ``lax.scan`` computes one tile's logits at a time for every token, keeping a running
log-sum-exp, and the backward pass (a ``custom_vjp``) computes each tile's logits again and
from them that tile's share of both gradients. So the peak holds one tile's logits, the
output projection's gradient is written once per tile (never accumulated over the tiles:
tiling the tokens instead accumulated the whole ``[d_model, vocab]`` gradient once per tile,
which ran at a third of the matmuls' speed on a v5e chip), and what accumulates is the hidden
states' gradient, ``[tokens, d_model]``. The cost is one more matmul of the output projection
per step (its forward, computed again).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def _nll(h: jax.Array, head: jax.Array, targets: jax.Array) -> jax.Array:
    """Summed negative log-likelihood, logits whole: ``h`` [t, d], ``targets`` [t]."""
    logits = jnp.dot(h, head, preferred_element_type=jnp.float32)
    picked = jnp.take_along_axis(logits, targets[:, None], axis=-1)[:, 0]
    return jnp.sum(jax.nn.logsumexp(logits, axis=-1) - picked)


def _tiles_of(head: jax.Array, tiles: int) -> tuple[jax.Array, int]:
    """``head`` [d, vocab] as [tiles, d, width], padded with zero columns to whole tiles of a
    width that is a multiple of 128 (the MXU's); returns it and the width."""
    d, vocab = head.shape
    width = -(-vocab // tiles)
    width = -(-width // 128) * 128
    padded = jnp.pad(head, ((0, 0), (0, width * tiles - vocab)))
    return padded.reshape(d, tiles, width).transpose(1, 0, 2), width


def _tile_logits(h, w, c, width, vocab):
    """Tile ``c``'s float32 logits, its padding columns at -inf."""
    logits = jnp.dot(h, w, preferred_element_type=jnp.float32)
    cols = c * width + jnp.arange(width)
    return jnp.where(cols[None, :] < vocab, logits, -jnp.inf)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _tiled_nll(h: jax.Array, head: jax.Array, targets: jax.Array, tiles: int) -> jax.Array:
    return _tiled_fwd(h, head, targets, tiles)[0]


def _tiled_fwd(h, head, targets, tiles):
    vocab = head.shape[1]
    ws, width = _tiles_of(head, tiles)
    t = h.shape[0]

    def step(carry, xs):
        m, s, picked = carry
        w, c = xs
        logits = _tile_logits(h, w, c, width, vocab)
        m_new = jnp.maximum(m, jnp.max(logits, axis=-1))
        s = s * jnp.exp(m - m_new) + jnp.sum(jnp.exp(logits - m_new[:, None]), axis=-1)
        local = targets - c * width
        inside = (local >= 0) & (local < width)
        got = jnp.take_along_axis(logits, jnp.clip(local, 0, width - 1)[:, None], axis=-1)[:, 0]
        return (m_new, s, picked + jnp.where(inside, got, 0.0)), None

    init = (jnp.full((t,), -jnp.inf, jnp.float32), jnp.zeros((t,), jnp.float32),
            jnp.zeros((t,), jnp.float32))
    (m, s, picked), _ = jax.lax.scan(step, init, (ws, jnp.arange(tiles)))
    lse = m + jnp.log(s)
    return jnp.sum(lse - picked), (h, head, targets, lse)


def _tiled_bwd(tiles, res, g):
    h, head, targets, lse = res
    vocab = head.shape[1]
    ws, width = _tiles_of(head, tiles)

    def step(dh, xs):
        w, c = xs
        logits = _tile_logits(h, w, c, width, vocab)
        p = jnp.exp(logits - lse[:, None])  # the padding columns: exp(-inf) = 0
        local = targets - c * width
        onehot = (jnp.arange(width)[None, :] == local[:, None]).astype(jnp.float32)
        dlogits = ((p - onehot) * g).astype(h.dtype)
        dw = jnp.dot(h.T, dlogits, preferred_element_type=jnp.float32).astype(head.dtype)
        dh = dh + jnp.dot(dlogits, w.T, preferred_element_type=jnp.float32)
        return dh, dw

    dh, dws = jax.lax.scan(step, jnp.zeros(h.shape, jnp.float32), (ws, jnp.arange(tiles)))
    dhead = dws.transpose(1, 0, 2).reshape(head.shape[0], -1)[:, :vocab]
    return dh.astype(h.dtype), dhead, None


_tiled_nll.defvjp(_tiled_fwd, _tiled_bwd)


def cross_entropy(h: jax.Array, head: jax.Array, targets: jax.Array, tiles: int = 1
                  ) -> jax.Array:
    """Mean cross-entropy of ``targets`` [batch, seq] under logits ``h @ head``.

    Args:
        h: final hidden states [batch, seq, d_model] (the activation dtype).
        head: the output projection [d_model, vocab], in the activation dtype.
        tiles: how many tiles to cut the vocabulary into (1: the logits whole).
    """
    d = h.shape[-1]
    tokens, flat = h.reshape(-1, d), targets.reshape(-1)
    if tiles <= 1:
        return _nll(tokens, head, flat) / tokens.shape[0]
    return _tiled_nll(tokens, head, flat, tiles) / tokens.shape[0]


def default_tiles(batch_per_device: int, seq_len: int, vocab: int,
                  target_bytes: int = 256 << 20) -> int:
    """Tiles enough that one tile's float32 logits take about ``target_bytes`` per device or
    less (1 when the whole fits)."""
    whole = batch_per_device * seq_len * vocab * 4
    return max(1, -(-whole // target_bytes))
