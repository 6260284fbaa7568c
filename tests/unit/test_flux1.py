"""flux1's arithmetic against small hand-computed cases (the reference's latent draw, noising, velocity target, 2x2
patches, RoPE ids, learning rate, the 8-timestep validation loss, the evaluation cadence), its initialization, and
the reader of the reference's preprocessed files refusing bad input by file and field."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch

from trainperf.errors import DataError
from trainperf.workloads.flux1 import REFERENCE_RECIPE, eval_interval, fixture, flow, reference
from trainperf.workloads.flux1.model import FLAVOURS, SCHNELL_PARAMETERS, init_rule
from trainperf.workloads.flux1.workload import lr_policy


def test_latent_noising_and_target_by_hand():
    mean, logvar, eps = torch.tensor([1.0]), torch.tensor([math.log(4.0)]), torch.tensor([0.5])
    # z = 1 + 2 x 0.5 = 2; x0 = (2 - 0.1159) x 0.3611
    assert flow.latent(mean, logvar, eps).item() == pytest.approx((2.0 - 0.1159) * 0.3611)
    x0, noise = torch.tensor([[2.0], [2.0]]), torch.tensor([[-1.0], [-1.0]])
    xt = flow.noised(x0, noise, torch.tensor([0.25, 1.0]))
    assert xt.flatten().tolist() == pytest.approx([0.75 * 2 - 0.25, -1.0])  # t = 1 is pure noise
    assert flow.velocity(x0, noise).flatten().tolist() == [-3.0, -3.0]
    assert flow.sample_losses(torch.tensor([[1.0, 3.0]]), torch.tensor([[0.0, 0.0]])).tolist() == [5.0]


def test_patches_are_the_references_unfold_and_round_trip():
    x = torch.arange(2 * 16 * 4 * 6, dtype=torch.float32).reshape(2, 16, 4, 6)
    packed = flow.pack(x)
    b, c, h, w = x.shape
    ref = x.unfold(2, 2, 2).unfold(3, 2, 2).permute(0, 2, 3, 1, 4, 5).reshape(b, (h // 2) * (w // 2), c * 4)
    assert packed.shape == (2, 6, 64) and torch.equal(packed, ref)  # torchtitan utils.py pack_latents
    assert torch.equal(flow.unpack(packed, h, w), x)
    assert flow.image_ids(4, 6).tolist() == [[0, r, c] for r in range(2) for c in range(3)]
    assert not flow.text_ids(5).any()


def test_validation_loss_is_the_mean_of_the_timesteps_means():
    sums = torch.tensor([2.0, 1.0, 3.0, 0.0, 4.0, 1.0, 1.0, 8.0])
    counts = torch.tensor([2.0, 1.0, 1.0, 1.0, 4.0, 1.0, 1.0, 4.0])
    # per timestep 1, 1, 3, 0, 1, 1, 1, 2 -> mean 10/8 (the plain mean over samples would be 20/15)
    assert flow.validation_loss(sums, counts) == pytest.approx(1.25)
    with pytest.raises(ValueError, match="every timestep 0..7"):
        flow.validation_loss(sums, torch.tensor([1.0, 1, 1, 1, 1, 1, 1, 0]))


def test_learning_rate_and_evaluation_cadence():
    f = lr_policy(4)
    assert [f(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]  # torchtitan warm-up, then stable
    assert lr_policy(0)(0) == 1.0
    assert eval_interval(REFERENCE_RECIPE) == 262_144  # 512 divides it
    assert eval_interval(REFERENCE_RECIPE.with_overrides({"global_batch_size": 768})) == 342 * 768  # CEIL(262144/768)
    assert REFERENCE_RECIPE.with_overrides({"global_batch_size": 3}).evaluation_frequency == 262_146


def test_schnell_size_and_the_references_initialization():
    from trainperf.workloads.flux1.model import build

    with torch.device("meta"):
        schnell = build(FLAVOURS["schnell"])
    assert sum(p.numel() for p in schnell.parameters()) == SCHNELL_PARAMETERS
    a = FLAVOURS["schnell"]
    assert (a.num_layers, a.num_single_layers, a.hidden_size, a.num_attention_heads) == (19, 38, 3072, 24)
    rules = {n: init_rule(n, a) for n, _ in schnell.named_parameters()}  # every parameter has one
    assert rules["proj_out.weight"][0] == rules["norm_out.linear.weight"][0] == "zeros"  # LastLayer
    assert rules["transformer_blocks.0.norm1.linear.weight"][0] == "zeros"  # Modulation
    assert rules["time_text_embed.text_embedder.linear_1.weight"][0] == "normal"  # vector_in
    assert rules["single_transformer_blocks.3.attn.to_q.weight"] == ("xavier", (3072, 4 * 3072 + 3 * 3072))  # linear1
    assert rules["transformer_blocks.0.attn.add_k_proj.weight"] == ("xavier", (3072, 3 * 3072))  # txt_attn.qkv
    assert rules["single_transformer_blocks.0.attn.norm_k.weight"][0] == "ones"
    assert all(r == "zeros" for n, (r, _) in rules.items() if n.endswith(".bias"))


def _rows(n=2, *, timesteps=True):
    return fixture.encoding_rows(np.random.default_rng(0), n, timesteps=timesteps, t5_len=4)


def test_reader_decodes_the_references_serialization(tmp_path):
    rows = _rows(3)
    fixture.write_split(tmp_path / "coco", rows)
    split = reference.load(tmp_path / "coco", validation=True)
    assert len(split) == 3 and len(split.paths) == 2 and split.timesteps.tolist() == [0, 1, 2]
    got = reference.rows(split, np.array([2, 0]), t5_dim=4096)
    assert got["t5_encodings"].shape == (2, 4, 4096) and got["mean"].shape == (2, 16, 32, 32)
    bits = np.load(io.BytesIO(rows["clip_encodings"][2]))
    assert np.array_equal(got["clip_encodings"][0], bits) and got["timestep"].tolist() == [2, 0]


def test_a_header_seen_before_is_not_parsed_again_and_reads_the_same_values():
    """decode's cached headers: the second array of a header is numpy's own reading of it, value for value (C and
    Fortran order, version 2 headers), and a payload cut short under a known header is still refused as np.load
    refuses it."""
    rng = np.random.default_rng(1)
    for version, order in (((1, 0), "C"), ((2, 0), "F")):
        arrays = [np.asarray(rng.integers(0, 2**16, (3, 5)), dtype=np.uint16, order=order) for _ in range(2)]
        blobs = []
        for a in arrays:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, a, version=version)
            blobs.append(buf.getvalue())
        first = reference.decode(blobs[0], "x", (3, None))
        assert reference._cached(blobs[1]) is not None  # the first read kept the header
        second = reference.decode(blobs[1], "x", (3, None))
        for blob, got in ((blobs[0], first), (blobs[1], second)):
            want = np.load(io.BytesIO(blob))
            assert got.dtype == want.dtype and np.array_equal(got, want) and got.flags.f_contiguous == (order == "F")
        with pytest.raises(DataError, match="x: not a .npy array"):
            reference.decode(blobs[1][:-2], "x", (3, None))


def test_bad_files_are_refused_naming_file_and_field(tmp_path):
    rows = _rows(2)
    rows["mean"][1] = fixture.to_npy_bytes(np.zeros((16, 32)))  # a 2-D posterior
    fixture.write_split(tmp_path / "a", rows, shards=1)
    split = reference.load(tmp_path / "a", validation=True)
    with pytest.raises(DataError, match=r"data-00000-of-00001.arrow: row 1 \('000000001'\), mean: shape \(16, 32\)"):
        reference.rows(split, np.array([0, 1]), t5_dim=4096)
    rows = _rows(1)
    buf = io.BytesIO()
    np.save(buf, np.zeros((4, 4096), dtype=np.float32))
    rows["t5_encodings"][0] = buf.getvalue()
    fixture.write_split(tmp_path / "b", rows, shards=1)
    with pytest.raises(DataError, match="t5_encodings: dtype float32; the reference stores bf16 bits as uint16"):
        reference.rows(reference.load(tmp_path / "b", validation=True), np.array([0]), t5_dim=4096)
    bad = _rows(1)
    bad["timestep"] = [9]
    fixture.write_split(tmp_path / "c", bad, shards=1)
    with pytest.raises(DataError, match="timestep 9; a validation sample's timestep index is 0..7"):
        reference.load(tmp_path / "c", validation=True)
    fixture.write_split(tmp_path / "d", _rows(1, timesteps=False), shards=1)
    with pytest.raises(DataError, match="no column 'timestep'"):
        reference.load(tmp_path / "d", validation=True)
    (tmp_path / "d" / "state.json").write_text(json.dumps({"_data_files": [{"filename": "gone.arrow"}]}))
    with pytest.raises(DataError, match=r"gone.arrow: listed in .*state.json but missing"):
        reference.load(tmp_path / "d", validation=False)
    (tmp_path / "d" / "data-00000-of-00001.arrow").write_bytes(b"not arrow")
    (tmp_path / "d" / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    with pytest.raises(DataError, match="not an Arrow stream as datasets writes it"):
        reference.load(tmp_path / "d", validation=False)
    with pytest.raises(DataError, match="no flux1 reference data"):
        reference.find(tmp_path / "nowhere")


@pytest.fixture
def without_mini(monkeypatch):
    """flux1 as it was before its mini scale: a benchmark implemented at the reference scale only."""
    import dataclasses

    import trainperf.workloads.flux1 as flux1
    from trainperf import registry

    b = flux1.BENCHMARK
    monkeypatch.setattr(flux1, "BENCHMARK", dataclasses.replace(
        b, specs={"reference": b.specs["reference"]}, recipes={"reference": b.recipes["reference"]}, mini_data=None,
        closed_rules={"reference": b.closed_rules["reference"]},
    ))  # fmt: skip
    registry.benchmark.cache_clear()
    yield
    registry.benchmark.cache_clear()


def test_a_benchmark_without_a_mini_says_where_it_runs(without_mini):
    from trainperf import registry
    from trainperf.errors import NotAvailableError

    assert registry.benchmark("flux1").available_at("reference")
    with pytest.raises(NotAvailableError, match="no 'mini' scale yet; it runs at --scale reference"):
        registry.get_spec("flux1", "mini")
    assert "flux1" not in registry.available("mini") and "flux1" in registry.available("reference")


def test_a_log_claiming_a_mini_run_of_it_is_told_there_is_none(without_mini):
    from trainperf.errors import NotAvailableError
    from trainperf.rules import compliance

    with pytest.raises(NotAvailableError, match="no mini scale yet in trainperf: it is not a trainperf mini log"):
        compliance._config_of(None, "mini", "flux1")


def test_under_a_cpus_bf16_autocast_attention_takes_the_plain_kernel():
    """PyTorch's CPU flash-attention backward is several times slower in bf16 than its plain kernel at the mini's
    shapes, so trainperf's FLUX attention takes the plain one under a CPU's bf16 autocast (and PyTorch's choice,
    flash, in fp32); the bf16 step's loss agrees with the fp32 one to bf16's precision. Every model a process builds
    shares the processor's class, which torch.compile's guards hold on to."""
    from trainperf.workloads.flux1 import model as flux_model

    args = FLAVOURS["debug"]
    torch.manual_seed(0)
    net = flux_model.build(args)
    [kind] = {type(p) for p in net.attn_processors.values()}
    assert {type(p) for p in flux_model.build(args).attn_processors.values()} == {kind}  # one class: compile's guards
    g = torch.Generator().manual_seed(1)
    xt, t = torch.randn(2, args.in_channels // 4, 4, 4, generator=g), torch.rand(2, generator=g)  # 2x2 patches
    t5 = torch.randn(2, 3, args.joint_attention_dim, generator=g)
    clip = torch.randn(2, args.pooled_projection_dim, generator=g)
    losses, kernels = [], []
    for autocast in (False, True):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = flow.predict(net, xt, t, t5, clip).float().square().mean()
            loss.backward()
        losses.append(float(loss))
        kernels.append({e.key for e in prof.key_averages() if "attention" in e.key and "flash" in e.key})
    assert kernels[0] and not kernels[1]
    assert losses[1] == pytest.approx(losses[0], rel=0.05)
