"""bert's packed HDF5 layout: written and read back, every kind of bad file refused with the file and the field
named, the masking and next-sentence rules, the mini split, and the reference checkpoint's names."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from trainperf.errors import DataError
from trainperf.workloads.bert import data, mini, reference
from trainperf.workloads.bert.data import FIELDS, Masking, make_examples, read_examples, write_examples
from trainperf.workloads.bert.model import BertConfig, BertForPreTraining, tf_is_transposed, tf_name

SPECIAL = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
VOCAB = 500


def documents(rng, n=40, sentences=5):
    return [[list(rng.integers(5, VOCAB, int(rng.integers(4, 12)))) for _ in range(sentences)] for _ in range(n)]


SMALL = Masking(max_seq_length=32, max_predictions=5)


def examples(seed=0, n=40, masking=SMALL):
    rng = np.random.default_rng(seed)
    return make_examples(documents(rng, n), masking=masking, special=SPECIAL, vocab_size=VOCAB, rng=rng)


def test_examples_round_trip_through_the_reference_layout(tmp_path):
    ex = examples()
    path = write_examples(tmp_path / "part-00000.hdf5", ex)
    with h5py.File(path) as f:
        assert sorted(f) == sorted(FIELDS)
        assert f["input_ids"].shape == (len(ex), 32) and f["masked_lm_positions"].shape == (len(ex), 5)
    back = read_examples(path, vocab_size=VOCAB)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(back, name), getattr(ex, name))
    assert data.check_file(path, vocab_size=VOCAB) == len(ex)
    # the same examples give the same bytes (the mini manifest's checksums)
    again = write_examples(tmp_path / "again.hdf5", ex)
    assert path.read_bytes() == again.read_bytes()


def test_masking_follows_bert_rules():
    masking = Masking(max_seq_length=64, max_predictions=10)
    ex = examples(seed=1, n=400, masking=masking)
    valid = ex.masked_lm_positions != 0
    # [CLS] and [SEP] are never masked; every real slot points at a real token
    rows = np.nonzero(valid)[0]
    pos = ex.masked_lm_positions[valid]
    original = ex.masked_lm_ids[valid]
    shown = ex.input_ids[rows, pos]
    assert not np.isin(original, [SPECIAL["[CLS]"], SPECIAL["[SEP]"], 0]).any()
    assert (ex.input_mask[rows, pos] == 1).all()
    masked, kept = (shown == SPECIAL["[MASK]"]).mean(), (shown == original).mean()
    assert 0.76 < masked < 0.84 and 0.07 < kept < 0.14  # 80% [MASK], 10% kept (and 10% random)
    share = valid.sum() / ex.input_mask.sum()
    assert 0.12 < share < 0.17  # 15% of the tokens
    assert 0.4 < ex.next_sentence_labels.mean() < 0.6  # half the B segments are random
    # segment ids: 0 on [CLS] A [SEP], 1 on B [SEP], 0 on padding
    assert (ex.segment_ids[:, 0] == 0).all() and (ex.segment_ids[ex.input_mask == 0] == 0).all()


def _write_raw(path, **overrides):
    ex = examples()
    arrays = {name: getattr(ex, name) for name in FIELDS}
    arrays.update(overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        for name, value in arrays.items():
            if value is not None:
                f.create_dataset(name, data=value)
    return path


@pytest.mark.parametrize(
    "case,overrides,says",
    [
        ("missing field", {"masked_lm_ids": None}, "field 'masked_lm_ids' is missing"),
        ("inconsistent lengths", {"segment_ids": np.zeros((3, 32), np.int8)}, "field 'segment_ids' holds 3 examples"),
        ("not integers", {"input_mask": np.zeros((10, 32), np.float32)}, "field 'input_mask' holds float32"),
        ("token id outside the vocabulary", {}, "field 'input_ids', example 2: token id 500 is outside the vocabulary"),
    ],
)
def test_bad_files_are_refused_naming_the_file_and_the_field(tmp_path, case, overrides, says):
    if case == "token id outside the vocabulary":
        ids = examples().input_ids.copy()
        ids[2, 3] = VOCAB
        overrides = {"input_ids": ids}
    if case == "not integers":
        overrides = {"input_mask": np.zeros((len(examples()), 32), np.float32)}
    path = _write_raw(tmp_path / "bad.hdf5", **overrides)
    with pytest.raises(DataError, match=str(path)) as e:
        read_examples(path, vocab_size=VOCAB)
    assert says in str(e.value)


def test_a_corrupt_file_is_refused(tmp_path):
    path = write_examples(tmp_path / "part.hdf5", examples())
    blob = bytearray(path.read_bytes())
    path.write_bytes(b"\0" * 64 + blob[64 : len(blob) // 2])  # a damaged header, truncated
    with pytest.raises(DataError, match="not a readable HDF5 file"):
        data.check_file(path, vocab_size=VOCAB)


def test_reference_files_are_checked_before_the_clock(tmp_path):
    root = tmp_path / "bert" / "reference"
    with pytest.raises(DataError, match="bert reference data not found"):
        reference.find(tmp_path, vocab_size=VOCAB)
    write_examples(root / "training" / "part-0.hdf5", examples())
    ids = examples().input_ids.copy()
    ids[0, 1] = -1
    _write_raw(root / "eval" / "eval.hdf5", input_ids=ids)
    with pytest.raises(DataError, match="checkpoint not found"):
        reference.find(tmp_path, vocab_size=VOCAB)
    (root / "checkpoint").mkdir()
    (root / reference.CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match=r"eval\.hdf5: field 'input_ids', example 0: token id -1"):
        reference.find(tmp_path, vocab_size=VOCAB)


TINY = BertConfig(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dropout=0.0)


def test_a_checkpoint_with_tensorflow_names_loads_transposed(tmp_path):
    torch.manual_seed(0)
    source = BertForPreTraining(TINY)
    state = {
        tf_name(n): (p.detach().t() if tf_is_transposed(n) else p.detach()).clone()
        for n, p in source.named_parameters()
    }
    assert "bert/encoder/layer_1/attention/self/query/kernel" in state
    assert state["bert/encoder/layer_1/attention/self/query/kernel"].shape == (32, 32)
    assert state["cls/seq_relationship/output_weights"].shape == (2, 32)  # stored [out, in], as TensorFlow's BERT does
    torch.save(state, tmp_path / "tf.pt")
    target = BertForPreTraining(TINY)
    reference.load_checkpoint(target, tmp_path / "tf.pt")
    for (n, a), (_, b) in zip(source.named_parameters(), target.named_parameters(), strict=True):
        assert torch.equal(a, b), n
    del state["bert/pooler/dense/bias"]
    torch.save(state, tmp_path / "short.pt")
    with pytest.raises(DataError, match="'bert/pooler/dense/bias'.*missing"):
        reference.load_checkpoint(target, tmp_path / "short.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(DataError, match="not a readable PyTorch checkpoint"):
        reference.load_checkpoint(target, tmp_path / "junk.pt")


def test_the_mini_split_keeps_evaluation_text_out_of_training():
    shared = "This sentence appears in every even document of the corpus."
    docs = {
        "src": [
            [f"Document {i} says something of its own.", shared if i % 2 == 0 else f"And {i} more."] for i in range(400)
        ]
    }
    train, evaluation, sources = mini.split_documents(docs)
    assert sources["src"]["documents"] == 400 and len(train) + len(evaluation) < 400  # even ones held out are dropped
    assert evaluation and all(shared not in d for d in evaluation)
    seen = {s for d in train for s in d}
    assert not any(s in seen for d in evaluation for s in d)


def test_a_mini_run_without_prepared_data_stops_before_the_clock(tmp_path):
    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig

    spec, recipe = registry.get_spec("bert", "mini"), registry.default_recipe("bert", "mini")
    w = registry.workload_class("bert")(spec, recipe, RunConfig(seed=1), data_dir=tmp_path, dist=DistContext())
    with pytest.raises(DataError, match=r"bert mini data: .*manifest.json is missing.*trainperf data prepare bert"):
        w.prepare()


def test_a_trained_vocabulary_is_numbered_specials_first_then_sorted():
    docs = [
        [f"the {w} of the {v} runs over {u} fields" for w, v, u in zip(a, a[1:], a[2:], strict=False)]
        for a in [["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]] * 3
    ]
    vocab = mini.vocabulary_tokens(mini.train_vocabulary(docs))
    n = len(data.SPECIAL_TOKENS)
    assert vocab[:n] == list(data.SPECIAL_TOKENS) and vocab[n:] == sorted(vocab[n:]) and "the" in vocab


def test_prepare_tokenizes_with_the_shipped_vocabulary(tmp_path):
    """The shipped file is what prepare numbers tokens by (a trained one can differ between processes)."""
    shipped = mini.SHIPPED_VOCAB.read_text().splitlines()
    assert len(shipped) == mini.VOCAB_SIZE and shipped[:5] == list(data.SPECIAL_TOKENS)
    tok = mini.load_vocabulary(mini.SHIPPED_VOCAB)
    assert mini.vocabulary_tokens(tok) == shipped
    ids = tok.encode("the definition of a word", add_special_tokens=False).ids
    assert [shipped[i] for i in ids] == ["the", "definition", "of", "a", "word"]
    bad = tmp_path / "vocab.txt"
    bad.write_text("hello\n[PAD]\n")
    with pytest.raises(DataError, match="vocab.txt"):
        mini.load_vocabulary(bad)
