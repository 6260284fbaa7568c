"""bert's model: BERT-large's size and tensor names checked on the meta device, and the same outputs as Hugging
Face's BertForPreTraining from the same weights (loaded through the reference checkpoint loader)."""

from __future__ import annotations

import re

import mlperf_logging
import pytest
import torch

from trainperf.workloads.bert import reference
from trainperf.workloads.bert.model import (
    BERT_LARGE,
    BertConfig,
    BertForPreTraining,
    count_parameters,
    pretraining_loss,
    tf_name,
)
from trainperf.workloads.bert.workload import FLAVOURS


def test_bert_large_has_the_reference_size_and_tensor_names():
    with torch.device("meta"):
        model = BertForPreTraining(BERT_LARGE)
    # BERT-large uncased with its pretraining heads (the decoder shares the word embeddings): 336,226,108
    assert count_parameters(model) == 336_226_108
    rules = mlperf_logging.__file__.replace("__init__.py", "compliance_checker/training_2.0.0/closed_bert.yaml")
    official = re.findall(r'"((?:bert|cls)/[^"]+)"', open(rules).read())
    names = [tf_name(n) for n, _ in model.named_parameters()]
    assert len(names) == len(official) == 398 and sorted(names) == sorted(official)


def test_mini_model_size():
    assert count_parameters(BertForPreTraining(FLAVOURS["mini"].model)) == 1_495_554


# Hugging Face's names of the two GELU forms: "gelu_new" is the tanh form (the reference's), "gelu" the exact one.
@pytest.mark.parametrize(("gelu", "hidden_act"), [("tanh", "gelu_new"), ("none", "gelu")])
def test_same_outputs_as_hugging_face_bert_for_pretraining(tmp_path, gelu, hidden_act):
    import transformers

    c = BertConfig(
        vocab_size=300, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, dropout=0.0,
        gelu_approximate=gelu,
    )  # fmt: skip
    hf_config = transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size, hidden_act=hidden_act,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=c.max_position_embeddings,
        type_vocab_size=2, layer_norm_eps=c.layer_norm_eps,
    )  # fmt: skip
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(hf_config).eval()
    torch.save(hf.state_dict(), tmp_path / "hf.pt")
    ours = BertForPreTraining(c).eval()
    reference.load_checkpoint(ours, tmp_path / "hf.pt")  # Hugging Face names load as they are
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, c.vocab_size, (3, 16), generator=g)
    mask = torch.ones(3, 16, dtype=torch.long)
    mask[1, 12:] = 0  # padding is not attended to
    segments = (torch.arange(16) >= 8).long().expand(3, 16)
    positions = torch.tensor([[1, 4, 9], [2, 3, 0], [5, 6, 7]])
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask, token_type_ids=segments)
        mlm, nsp = ours(ids, segments, mask, positions)
    expected = out.prediction_logits.gather(1, positions[..., None].expand(-1, -1, c.vocab_size))
    torch.testing.assert_close(mlm, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(nsp, out.seq_relationship_logits, rtol=1e-4, atol=1e-4)


def test_padded_prediction_slots_do_not_count_in_the_loss():
    torch.manual_seed(0)
    c = BertConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, dropout=0.0)
    model = BertForPreTraining(c)
    batch = {
        "input_ids": torch.randint(5, 50, (2, 8)),
        "segment_ids": torch.zeros(2, 8, dtype=torch.long),
        "input_mask": torch.ones(2, 8, dtype=torch.long),
        "masked_lm_positions": torch.tensor([[1, 2, 0], [3, 0, 0]]),
        "masked_lm_ids": torch.tensor([[7, 8, 0], [9, 0, 0]]),
        "next_sentence_labels": torch.tensor([0, 1]),
    }
    other = dict(batch, masked_lm_ids=torch.tensor([[7, 8, 44], [9, 31, 12]]))  # only padded slots differ
    assert torch.equal(pretraining_loss(model, batch), pretraining_loss(model, other))
