"""llama2_70b_lora's pieces on a CPU: the base checkpoint refused before the clock when it is not the reference's
(a wrong shape, a wrong name, another model's config, a pickle), the GovReport parquet files refused when their
tokens or labels are not the reference's kind, the checkpoint read into the decoder exactly (the adapters add nothing
at their start), the schedule of the rules and the reference's learning rate."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from trainperf.dist import DistContext
from trainperf.errors import DataError
from trainperf.harness.runner import dry_run_recipe
from trainperf.spec import RunConfig
from trainperf.workloads.common.llm.model import LLAMA2_70B, Decoder
from trainperf.workloads.llama2_70b_lora import REFERENCE, REFERENCE_RECIPE, checkpoint, reference
from trainperf.workloads.llama2_70b_lora.model import FLAVOURS
from trainperf.workloads.llama2_70b_lora.workload import LoraWorkload, lr_policy

DEBUG = FLAVOURS["debug"]


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora") / "llama2_70b_lora" / "reference"
    reference.write_smoke_fixture(root)
    return root


def _workload(data_dir, *, smoke=True):
    recipe = dry_run_recipe(LoraWorkload, REFERENCE, REFERENCE_RECIPE, DistContext())
    config = RunConfig(seed=5, smoke=smoke, dry_run=not smoke)
    return LoraWorkload(REFERENCE, recipe, config, data_dir=data_dir, dist=DistContext())


def test_the_70b_flavour_has_the_reference_checkpoints_tensors():
    want = checkpoint.expected(LLAMA2_70B)
    assert len(want) == 80 * 7 + 3 and want["model.layers.79.self_attn.qkv_proj.weight"] == (10240, 8192)
    assert sum(int(np.prod(s)) for s in want.values()) == 68_976_648_192  # Llama 2 70B's parameter count
    assert want["lm_head.weight"] == (32000, 8192) and LLAMA2_70B.rope_theta == 10_000.0
    assert LLAMA2_70B.rope_scaling is None


def test_the_checkpoint_is_read_into_the_decoder_exactly(fixture_dir):
    w = _workload(fixture_dir.parent.parent)
    w.prepare()
    model = w.parallelize(w.build_model())
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)
    assert {n.split(".")[3] for n in trained} == {"qkv", "out"}
    torch.manual_seed(70)  # the fixture's base model, as write_smoke_fixture made it
    base = Decoder(DEBUG)
    tokens = torch.randint(0, 32000, (2, 24))
    with torch.no_grad():  # LoRA's B starts at zero: the adapted model is the base model
        expected = base.eval()(tokens)
        torch.testing.assert_close(model.eval()(tokens), expected, rtol=2e-2, atol=2e-2)  # bf16 in the file


def _damaged(tmp_path, fixture_dir, change):
    import shutil

    root = tmp_path / "d" / "llama2_70b_lora" / "reference"
    shutil.copytree(fixture_dir, root)
    change(root / reference.MODEL)
    return root.parent.parent


def _reshape_one(folder):
    from safetensors.torch import load_file, save_file

    path = folder / "model-00001-of-00002.safetensors"
    tensors = load_file(str(path))
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"][:100]
    save_file(tensors, str(path))


def _rename_one(folder):
    index = json.loads((folder / checkpoint.INDEX).read_text())
    index["weight_map"]["model.layers.0.self_attn.q_proj.weight"] = index["weight_map"].pop(
        "model.layers.0.self_attn.qkv_proj.weight"
    )
    (folder / checkpoint.INDEX).write_text(json.dumps(index))


def _as_pickle(folder):
    for p in folder.iterdir():
        p.unlink()
    torch.save({"x": torch.zeros(1)}, folder / "pytorch_model.bin")


def _pickle_named_safetensors(folder):
    torch.save({"x": torch.zeros(1)}, folder / "model-00002-of-00002.safetensors")


def _other_config(folder):
    config = json.loads((folder / checkpoint.CONFIG).read_text())
    (folder / checkpoint.CONFIG).write_text(json.dumps(config | {"num_hidden_layers": 80}))


@pytest.mark.parametrize(
    "change, says, where",
    [
        (_reshape_one, "model.embed_tokens.weight has shape [100, 64], the model's is [32000, 64]", "00001-of"),
        (_rename_one, "no tensor model.layers.0.self_attn.qkv_proj.weight", reference.MODEL),
        (_as_pickle, "a PyTorch pickle, not safetensors; trainperf reads safetensors only", "pytorch_model.bin"),
        (_pickle_named_safetensors, "a PyTorch pickle (zip or pickle stream) named .safetensors", "00002-of"),
        (_other_config, "num_hidden_layers 80, the model has 2", "config.json"),
    ],
)
def test_a_checkpoint_that_is_not_the_references_is_refused_before_the_clock(
    tmp_path, fixture_dir, change, says, where
):
    w = _workload(_damaged(tmp_path, fixture_dir, change))
    with pytest.raises(DataError, match=None) as e:
        w.prepare()
    assert says in str(e.value) and where in str(e.value), str(e.value)


def _parquet(path, ids, labels):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"input_ids": ids, "labels": labels}), path)


@pytest.mark.parametrize(
    "ids, labels, says",
    [
        ([[1, 5, 40000]], [[-100, 5, 40000]], "token id 40000 lies outside the model's vocabulary of 32000"),
        ([[1, 5, 6]], [[-100, 6, 7]], "neither -100 nor its position's token id"),
        ([[1, 5, 6]], [[-100, 5, 6, 7]], "labels are not as long as its input_ids"),
        ([[1, 5, 6]], [[-100, -100, -100]], "row 0 has no scored token"),
        ([list(range(3, 300))], [list(range(3, 300))], "row 0 holds 297 tokens; the reference's sequences hold 2 to"),
    ],
)
def test_govreport_rows_not_of_the_references_kind_are_refused(tmp_path, ids, labels, says):
    _parquet(tmp_path / "t.parquet", ids, labels)
    with pytest.raises(DataError, match="t.parquet") as e:
        reference.read(tmp_path / "t.parquet", vocab_size=32000, max_len=256)
    assert says in str(e.value)


def test_govreport_rows_are_read_with_right_padding_dropped(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"input_ids": [[1, 7, 8, 9, 0]], "labels": [[-100, -100, 8, 9, -100]], "attention_mask": [[1, 1, 1, 1, 0]]}
    pq.write_table(pa.table(rows), tmp_path / "v.parquet")
    split = reference.read(tmp_path / "v.parquet", vocab_size=32000, max_len=8192)
    assert [list(split.ids[0]), list(split.labels[0])] == [[1, 7, 8, 9], [-100, -100, 8, 9]]
    (tmp_path / "x.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="x.parquet: not a parquet file"):
        reference.count_rows(tmp_path / "x.parquet")


def test_the_evaluation_schedule_and_the_learning_rate_are_the_references():
    assert REFERENCE.eval_points(REFERENCE_RECIPE)[:3] == [1536.0, 1920.0, 2304.0]  # 3 evaluations skipped at 8
    assert REFERENCE.eval_points(REFERENCE_RECIPE)[-1] == 8192.0  # max_steps 1,024 x 8
    import dataclasses

    big = dataclasses.replace(REFERENCE_RECIPE, global_batch_size=100)  # CEIL(384 / 100) x 100 = 400
    assert REFERENCE.interval(big) == 400.0 and REFERENCE.first(big) == 15 * 400.0  # FLOOR(12.5 + 2) skipped
    f = lr_policy(REFERENCE_RECIPE)  # cosine to 0 over 1,024 steps, no warm-up
    assert f(0) == 1.0 and f(512) == pytest.approx(0.5) and f(1024) == pytest.approx(0.0) and f(2000) == 0.0
    warm = lr_policy(dataclasses.replace(REFERENCE_RECIPE, opt_learning_rate_warmup_factor=0.1))  # 103 steps
    assert warm(0) == 0.0 and warm(103) == 1.0 and warm(51) == pytest.approx(51 / 103)


def test_both_scales_are_implemented():
    from trainperf import registry

    assert registry.benchmark("llama2_70b_lora").available_at("reference")
    assert "llama2_70b_lora" in registry.available("mini") and "llama2_70b_lora" in registry.available("reference")


def test_the_scored_positions_logits_give_the_loss_of_every_positions_logits():
    """The loss computes the output layer only where a label is scored; it is Hugging Face's loss over all positions."""
    import torch.nn.functional as F

    from trainperf.workloads.llama2_70b_lora.loss import causal_lm_loss

    torch.manual_seed(0)
    model = Decoder(DEBUG)
    model.reset_parameters()
    ids = torch.randint(0, DEBUG.vocab_size, (3, 40))
    labels = ids.clone()
    labels[:, :25] = reference.IGNORE
    labels[1, 30:] = reference.IGNORE  # right padding takes no loss
    every = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), labels[:, 1:].flatten(), ignore_index=reference.IGNORE)
    assert causal_lm_loss(model, ids, labels).item() == pytest.approx(every.item(), rel=1e-6)


@pytest.mark.parametrize("window", [None, 5])
def test_the_last_block_computed_at_the_scored_positions_alone_gives_the_full_blocks_numbers(window):
    """With ``scored``, the decoder computes its last block's queries, attention, output projection and feed-forward
    at the scored positions only: the logits and the adapters' gradients are those of the full forward's rows there,
    whatever the positions (not contiguous, a row with none, a row with all), with or without a sliding window."""
    import dataclasses

    import peft

    torch.manual_seed(0)
    args = dataclasses.replace(DEBUG, sliding_window=window, window_layers=(1,) if window else ())
    model = Decoder(args)
    model.reset_parameters()
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["qkv", "out"])
    model = peft.inject_adapter_in_model(config, model)
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
        if "lora_B" in name:
            torch.nn.init.normal_(p, 0.0, 0.1)  # B starts at zero; the test wants the adapters to change the output
    assert model.layers[-1].scored_at
    ids = torch.randint(0, args.vocab_size, (4, 30))
    scored = torch.zeros(4, 30, dtype=torch.bool)
    scored[0, 20:] = True
    scored[1, [2, 7, 8, 29]] = True
    scored[3, :] = True  # row 2 scores nothing
    target = torch.randn(int(scored.sum()), args.vocab_size)

    def run(**kw):
        model.zero_grad(set_to_none=True)
        logits = model(ids, **kw) if kw else model(ids)[scored]
        (logits * target).sum().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    few, few_grads = run(scored=scored)
    every, every_grads = run()
    assert few.shape == every.shape
    torch.testing.assert_close(few, every, rtol=1e-5, atol=1e-5)
    for name, grad in every_grads.items():
        torch.testing.assert_close(few_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_adapters_dropout_is_nn_dropouts_distribution(tmp_path):
    """The LoRA layers' dropout (model.py ``Dropout``, put in place of peft's ``nn.Dropout``): in training each element
    is zeroed with probability p and the rest scaled by 1 / (1 - p), the gradient through the same mask; in evaluation
    the input itself."""
    import peft

    from trainperf.workloads.llama2_70b_lora.model import Dropout

    torch.manual_seed(0)
    drop, n, p = Dropout(0.1), 400_000, 0.1
    x = torch.ones(n, requires_grad=True)
    y = drop(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 4 * (p * (1 - p) / n) ** 0.5  # 4 standard errors
    torch.testing.assert_close(y[kept], torch.full((int(kept.sum()),), 1 / (1 - p)))
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # d(x * mask / (1 - p)) / dx: the same mask
    drop.eval()
    assert drop(x) is x
    model = _workload(tmp_path, smoke=False).build_model()  # the workload puts it in each LoRA layer
    dropouts = [m for layer in model.modules() if isinstance(layer, peft.tuners.lora.LoraLayer)
                for m in layer.lora_dropout.values()]  # fmt: skip
    assert dropouts and all(isinstance(m, Dropout) and m.p == REFERENCE_RECIPE.lora_dropout for m in dropouts)
