"""A byte-level tokenizer: no vocabulary file, no download, stable forever.

Ids 0-2 are special (pad, beginning and end of document); byte ``b`` is id ``b + 3``.
"""

from __future__ import annotations

import numpy as np

PAD, BOS, EOS = 0, 1, 2
_OFFSET = 3


class ByteTokenizer:
    """UTF-8 bytes as tokens."""

    vocab_size = 256 + _OFFSET

    def encode(self, text: str, *, bos: bool = True, eos: bool = True) -> np.ndarray:
        """Token ids (int32) of ``text``, framed by BOS/EOS."""
        body = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32) + _OFFSET
        parts = ([np.array([BOS], np.int32)] if bos else []) + [body]
        if eos:
            parts.append(np.array([EOS], np.int32))
        return np.concatenate(parts)

    def decode(self, ids) -> str:
        """Text of ``ids``; special ids are dropped."""
        arr = np.asarray(ids, dtype=np.int64)
        data = (arr[arr >= _OFFSET] - _OFFSET).astype(np.uint8).tobytes()
        return data.decode("utf-8", errors="replace")
