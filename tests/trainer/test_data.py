"""Data: prepare-data to ArrayRecord, grain reads, deterministic resumable order, tokenizer."""

from __future__ import annotations

import json

import numpy as np
import pytest
from trainer_helpers import make_cfg, run_cli, run_elastic

from elastix.errors import UsageError
from elastix_trainer.data import make_iterator, prepare_data
from elastix_trainer.tokenizer import ByteTokenizer


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    (d / "a.txt").write_text("The quick brown fox jumps over the lazy dog. " * 40)
    with open(d / "b.jsonl", "w") as f:
        for i in range(30):
            f.write(json.dumps({"text": f"document {i}: caf\u00e9 " * 5}) + "\n")
    proc = run_cli(["prepare-data", "--input", str(d / "a.txt"), str(d / "b.jsonl"),
                    "--output", str(d / "shards"), "--seq-len", "32", "--shards", "3"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "records" in proc.stdout
    return d / "shards"


def test_tokenizer_round_trip():
    tok = ByteTokenizer()
    ids = tok.encode("héllo")
    assert ids[0] == 1 and ids[-1] == 2 and ids.max() < tok.vocab_size
    assert tok.decode(ids) == "héllo"


def test_iterator_state_round_trips_with_changing_batch(shards):
    it = make_iterator(str(shards), 32, 512, seed=3)
    assert len(it.source) > 10
    it.next_batch(4)
    saved = it.state()
    after = [it.next_batch(b) for b in (3, 5, 2)]  # a resize changes the global batch
    again = make_iterator(str(shards), 32, 512, seed=3)
    again.restore(json.loads(json.dumps(saved)))
    for want, b in zip(after, (3, 5, 2), strict=True):
        np.testing.assert_array_equal(again.next_batch(b), want)
    # Past one epoch the order is reshuffled but still deterministic.
    n = len(it.source)
    a, b = make_iterator(str(shards), 32, 512, 3), make_iterator(str(shards), 32, 512, 3)
    a.restore({"next_index": n - 1})
    b.restore({"next_index": n - 1})
    np.testing.assert_array_equal(a.next_batch(4), b.next_batch(4))


def test_train_on_array_record(shards, tmp_path):
    cfg = make_cfg(data=str(shards), steps=3, checkpoint_dir=str(tmp_path / "ck"),
                   checkpoint_period=2)
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "completed"
    assert [r["step"] for r in trainer.events.of("checkpoint_committed")] == [2, 3]
    assert all(np.isfinite(r["loss"]) for r in trainer.events.of("step"))


def test_prepare_data_errors(tmp_path):
    with pytest.raises(UsageError, match="input file not found"):
        prepare_data([str(tmp_path / "nope.txt")], str(tmp_path / "o"), 32)
    with pytest.raises(UsageError, match="is a directory, not a file"):
        prepare_data([str(tmp_path)], str(tmp_path / "o"), 32)
    (tmp_path / "bad.jsonl").write_text("not json\n")
    with pytest.raises(UsageError, match="bad.jsonl:1"):
        prepare_data([str(tmp_path / "bad.jsonl")], str(tmp_path / "o"), 32)
    (tmp_path / "num.jsonl").write_text('{"text": "ok"}\n{"text": 1}\n')
    with pytest.raises(UsageError, match="num.jsonl:2: not a JSON object with a string 'text'"):
        prepare_data([str(tmp_path / "num.jsonl")], str(tmp_path / "o"), 32)
    with pytest.raises(UsageError, match="no ArrayRecord shards"):
        make_iterator(str(tmp_path / "empty"), 32, 512, 0)


def test_seq_len_longer_than_records(shards):
    with pytest.raises(UsageError, match="needs records of 65 tokens"):
        make_iterator(str(shards), 64, 512, 0)


def test_prepare_data_bad_output_and_input(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("hello world, " * 40)
    # A second run into the same directory with other --shards left the first run's shards
    # beside the new ones, and training read both sets.
    out = tmp_path / "o"
    prepare_data([str(text)], str(out), 16, 4)
    with pytest.raises(UsageError, match="already holds 4 ArrayRecord shards"):
        prepare_data([str(text)], str(out), 16, 2)
    assert len(list(out.glob("*.array_record"))) == 4
    with pytest.raises(UsageError, match="is a file"):  # was FileExistsError, exit 1
        prepare_data([str(text)], str(text), 16)
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe" + b"x" * 100)
    with pytest.raises(UsageError, match="bin.txt is not UTF-8 text"):  # was UnicodeDecodeError
        prepare_data([str(tmp_path / "bin.txt")], str(tmp_path / "o2"), 16)
