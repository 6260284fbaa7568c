"""Expert parallelism: the MoE layer's experts split over two CPU processes (gloo), tokens sent to them and back with
all_to_all, computes what one process computes with every expert: the outputs, the input gradients, each rank's
experts' gradients and the router's gradient summed over ranks, to 1e-5 (float32; only the order of sums differs)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainperf.workloads.common.llm.moe import MoE, MoEArgs

ARGS = MoEArgs(n_experts=4, top_k=2, expert_ffn_dim=8, score_function="sigmoid", n_shared_experts=1)
DIM, TOLERANCE = 16, 1e-5


def _layer() -> MoE:
    torch.manual_seed(0)
    layer = MoE(DIM, ARGS)
    for p in layer.parameters():
        torch.nn.init.normal_(p, 0.0, 0.3)
    return layer


def _tokens() -> torch.Tensor:
    return torch.randn(2, 2, 6, DIM, generator=torch.Generator().manual_seed(1))  # (rank, batch, sequence, dim)


def _rank(rank: int, init: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        layer = _layer()
        layer.shard_experts()
        x = _tokens()[rank].requires_grad_()
        y = layer(x)
        y.square().sum().backward()
        dist.all_reduce(layer.router.weight.grad)
        torch.save(
            {"y": y.detach(), "x": x.grad, "router": layer.router.weight.grad,
             "gate_up": layer.experts.gate_up.grad, "down": layer.experts.down.grad},
            out.format(rank),
        )  # fmt: skip
    finally:
        dist.destroy_process_group()


def test_two_expert_parallel_processes_compute_what_one_does(tmp_path):
    out = str(tmp_path / "rank{}.pt")
    mp.spawn(_rank, args=(f"file://{tmp_path / 'rendezvous'}", out), nprocs=2, join=True)
    layer = _layer()
    x = _tokens().flatten(0, 1).requires_grad_()  # both ranks' sequences in one batch
    y = layer(x)
    y.square().sum().backward()
    for rank in (0, 1):
        got = torch.load(out.format(rank))
        mine = slice(2 * rank, 2 * rank + 2)
        close = dict(rtol=TOLERANCE, atol=TOLERANCE)
        torch.testing.assert_close(got["y"], y.detach()[mine], **close)
        torch.testing.assert_close(got["x"], x.grad[mine], **close)
        torch.testing.assert_close(got["router"], layer.router.weight.grad, **close)
        experts = slice(2 * rank, 2 * rank + 2)  # rank r holds experts 2r and 2r+1
        torch.testing.assert_close(got["gate_up"], layer.experts.gate_up.grad[experts], **close)
        torch.testing.assert_close(got["down"], layer.experts.down.grad[experts], **close)
