"""Training data: grain's ArrayRecord source (production) or a synthetic source, in a
deterministic order whose whole state is one integer.

Order: position ``p`` reads record ``perm_e[p mod N]`` of epoch ``e = p div N``, where ``perm_e``
is a permutation seeded by (seed, e). The iterator state saved with every checkpoint is
``{"next_index": p}`` (grain's own iterator-state key), so a resumed run reads exactly the records
an uninterrupted run would, whatever global batch each step used (the batch shrinks on a resize).
Reads go through ``ArrayRecordDataSource.__getitems__`` (one batched read per step); grain's
per-element ``MapDataset`` iterator measured ~1 ms per record here, a step's worth of time for the
tiny CI model.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence

import numpy as np

from elastix.errors import UsageError
from elastix.protocol import envvars
from elastix_trainer.tokenizer import ByteTokenizer

RECORD_DTYPE = np.int32


class SyntheticSource:
    """Learnable random documents: a short random motif repeated, from a 64-token alphabet.

    A model learns the alphabet within a few steps and the copying later, so loss goes down
    reliably even for the tiny CI model. Record ``i`` depends only on (seed, i).
    """

    def __init__(self, record_len: int, vocab_size: int, seed: int, size: int = 1 << 20) -> None:
        self.record_len, self.seed, self.size = record_len, seed, size
        self.alphabet = min(64, vocab_size)

    def __len__(self) -> int:
        return self.size

    def __getitems__(self, indices: Sequence[int]) -> list[np.ndarray]:
        out = []
        for i in indices:
            rng = np.random.default_rng([self.seed, int(i)])
            motif = rng.integers(3, self.alphabet, size=int(rng.integers(3, 9)))
            reps = -(-self.record_len // len(motif))
            out.append(np.tile(motif, reps)[: self.record_len].astype(RECORD_DTYPE))
        return out


class ArrayRecordSource:
    """Fixed-length token records (int32) in ArrayRecord shards, read through grain."""

    def __init__(self, pattern: str) -> None:
        import grain

        paths = _shard_paths(pattern)
        self._source = grain.sources.ArrayRecordDataSource(paths)
        first = np.frombuffer(self._source.__getitems__([0])[0], RECORD_DTYPE)
        self.record_len = int(first.shape[0])

    def __len__(self) -> int:
        return len(self._source)

    def __getitems__(self, indices: Sequence[int]) -> list[np.ndarray]:
        raw = self._source.__getitems__([int(i) for i in indices])
        return [np.frombuffer(r, RECORD_DTYPE) for r in raw]


def _gcs_shard_paths(pattern: str) -> list[str]:
    """Shards at a ``gs://`` directory or glob, copied once into a local cache.

    ArrayRecord readers want local files (random access per record); a run reads its shards
    many times, so each is downloaded once (to a temporary name, then renamed: a half-copied
    shard is never read) under ``$ELASTIX_DATA_CACHE`` (default: the temp dir), keyed by the
    source, and reused while its size matches the object's.
    """
    import hashlib
    import tempfile

    from elastix_trainer.storage import epath

    root = epath(pattern)
    try:
        if root.is_dir():
            remote = sorted(root.glob("*.array_record"))
        else:
            remote = sorted(epath(pattern.rsplit("/", 1)[0]).glob(pattern.rsplit("/", 1)[1]))
    except Exception as e:  # noqa: BLE001 - storage errors become one line
        raise UsageError(f"cannot list ArrayRecord shards at {pattern!r}: {_first_line(e)}",
                         hint="check the bucket, the path and the credentials") from None
    if not remote:
        return []
    base = os.environ.get(envvars.DATA_CACHE) or tempfile.gettempdir()
    cache = os.path.join(base, "elastix-data", hashlib.sha1(pattern.encode()).hexdigest()[:16])
    os.makedirs(cache, exist_ok=True)
    local = []
    for obj in remote:
        path = os.path.join(cache, obj.name)
        try:
            size = obj.stat().length
            if not (os.path.exists(path) and os.path.getsize(path) == size):
                tmp = f"{path}.part-{os.getpid()}"
                with open(tmp, "wb") as f:
                    f.write(obj.read_bytes())
                os.replace(tmp, path)
        except OSError as e:
            raise UsageError(f"cannot copy {obj} to {path}: {e.strerror or e}",
                             hint=f"free space in {base} or set {envvars.DATA_CACHE}") from None
        except Exception as e:  # noqa: BLE001 - storage errors become one line
            raise UsageError(f"cannot read {obj}: {_first_line(e)}",
                             hint="check the bucket, the path and the credentials") from None
        local.append(path)
    return local


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _shard_paths(pattern: str) -> list[str]:
    if pattern.startswith("gs://"):
        paths = _gcs_shard_paths(pattern)
    elif os.path.isdir(pattern):
        paths = sorted(glob.glob(os.path.join(pattern, "*.array_record")))
    else:
        paths = sorted(glob.glob(pattern))
    if not paths:
        raise UsageError(
            f"no ArrayRecord shards at {pattern!r}",
            hint="make some with `python -m elastix_trainer prepare-data --input FILE --output DIR`"
            " or use --data synthetic",
        )
    return paths


class DataIterator:
    """Deterministic batches from a source; ``state()``/``restore()`` round-trip exactly."""

    def __init__(self, source, seq_len: int, seed: int, shuffle: bool = True) -> None:
        if seq_len + 1 > source.record_len:
            raise UsageError(
                f"--seq-len {seq_len} needs records of {seq_len + 1} tokens, the data has "
                f"{source.record_len}",
                hint=f"use --seq-len {source.record_len - 1} or less, or re-run prepare-data",
            )
        self.source, self.seq_len, self.seed, self.shuffle = source, seq_len, seed, shuffle
        self.next_index = 0
        self._perm_epoch, self._perm = -1, None

    def _record_ids(self, positions: np.ndarray) -> np.ndarray:
        n = len(self.source)
        if not self.shuffle:
            return positions % n
        out = np.empty_like(positions)
        for k, p in enumerate(positions):
            epoch = int(p) // n
            if epoch != self._perm_epoch:
                self._perm = np.random.default_rng([self.seed, epoch]).permutation(n)
                self._perm_epoch = epoch
            out[k] = self._perm[int(p) % n]
        return out

    def next_batch(self, global_batch: int) -> np.ndarray:
        """The next ``global_batch`` records as int32 [global_batch, seq_len + 1]."""
        pos = np.arange(self.next_index, self.next_index + global_batch, dtype=np.int64)
        records = self.source.__getitems__(self._record_ids(pos).tolist())
        self.next_index += global_batch
        return np.stack([r[: self.seq_len + 1] for r in records]).astype(np.int32)

    def state(self) -> dict:
        """JSON-able position (saved with each checkpoint and snapshot)."""
        return {"next_index": int(self.next_index)}

    def restore(self, state: dict) -> None:
        """Continue from a saved ``state()``."""
        self.next_index = int(state["next_index"])


def make_iterator(data: str, seq_len: int, vocab_size: int, seed: int) -> DataIterator:
    """``data`` is ``synthetic`` or an ArrayRecord directory/glob."""
    if data == "synthetic":
        # Synthetic records are already random per index: no shuffle needed.
        return DataIterator(SyntheticSource(seq_len + 1, vocab_size, seed), seq_len, seed, False)
    return DataIterator(ArrayRecordSource(data), seq_len, seed, shuffle=True)


def _read_documents(path: str) -> list[str]:
    try:
        return _parse_documents(path)
    except UnicodeDecodeError as e:
        raise UsageError(f"{path} is not UTF-8 text (byte {e.start})",
                         hint="convert it to UTF-8 (e.g. iconv -t UTF-8)") from None


def _parse_documents(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        if path.endswith(".jsonl"):
            docs = []
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)["text"]
                except (ValueError, KeyError, TypeError):
                    text = None
                if not isinstance(text, str):  # a number or a list is not a document
                    raise UsageError(
                        f"{path}:{n}: not a JSON object with a string 'text' field",
                        hint='JSONL input needs one {"text": "..."} object per line',
                    )
                docs.append(text)
            return docs
        return [f.read()]


def prepare_data(inputs: Sequence[str], output: str, seq_len: int, num_shards: int = 4) -> dict:
    """Tokenize text/JSONL files into ArrayRecord shards of ``seq_len + 1``-token records.

    Returns:
        ``{"records": n, "shards": [paths], "tokens": n}``.
    """
    from array_record.python.array_record_module import ArrayRecordWriter

    if seq_len < 1 or num_shards < 1:
        raise UsageError("--seq-len and --shards must be positive")
    missing = [p for p in inputs if not os.path.isfile(p)]
    if missing or not inputs:
        if not inputs:
            what = "no input files given"
        elif os.path.isdir(missing[0]):
            what = f"--input {missing[0]} is a directory, not a file"
        else:
            what = f"input file not found: {missing[0]}"
        raise UsageError(what, hint="pass one or more .txt or .jsonl files with --input "
                                    "(e.g. --input data/*.txt)")
    if os.path.exists(output) and not os.path.isdir(output):
        raise UsageError(f"--output {output} is a file, not a directory",
                         hint="point --output at a new directory")
    old = glob.glob(os.path.join(output, "*.array_record"))
    if old:  # training reads every shard in the directory: two sets would mix
        raise UsageError(f"--output {output} already holds {len(old)} ArrayRecord shards",
                         hint="use a new --output directory, or delete the old shards first")
    tok = ByteTokenizer()
    stream = np.concatenate([tok.encode(d) for p in inputs for d in _read_documents(p)])
    rec = seq_len + 1
    n = len(stream) // rec
    if n == 0:
        raise UsageError(f"the input has {len(stream)} tokens, fewer than one record of {rec}",
                         hint="give more text or a smaller --seq-len")
    os.makedirs(output, exist_ok=True)
    num_shards = min(num_shards, n)  # an empty shard is not a valid ArrayRecord source
    paths = [os.path.join(output, f"data-{i:05d}-of-{num_shards:05d}.array_record")
             for i in range(num_shards)]
    writers = [ArrayRecordWriter(p, "group_size:1") for p in paths]
    for i in range(n):
        writers[i % num_shards].write(stream[i * rec:(i + 1) * rec].astype(RECORD_DTYPE).tobytes())
    for w in writers:
        w.close()
    return {"records": n, "shards": paths, "tokens": int(n * rec)}
