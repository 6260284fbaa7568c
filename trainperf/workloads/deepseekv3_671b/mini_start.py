"""The mini's starting checkpoint: the ``mini`` flavour trained from scratch for ``START_STEPS`` steps on llama31_8b's
mini training split (never on the validation documents the evaluation scores), written in the reference's Hugging
Face layout (``checkpoint.py``) under ``<data-dir>/deepseekv3_671b/mini/start``, as the reference continues from
DeepSeek-V3's checkpoint.

Made by ``trainperf data prepare deepseekv3_671b`` rather than shipped in the package: the checkpoint holds 4.4 M
parameters (the 4,096-token embedding and output layer alone are 1.6 M), 8.7 MB in bf16, twice what a file of the
package should weigh at most, and training it takes one to two minutes on two cores. Its SHA-256 goes into
``manifest.json`` beside it, which every mini run checks before the clock (with the names and shapes of its tensors);
the manifest also records the tokenizer it was trained with and the log-perplexity it scores on the evaluation
sequences. The training is seeded (weights and the order of the sequences), in fp32 on the CPU (two trainings in
separate processes on one machine wrote the same file, SHA-256 and all); another machine's
floating point may round differently and make slightly different weights, so prepare compares their log-perplexity
with the one the mini target was set from and says when they differ.
``benchmarks/deepseek_mini_start.py`` reruns it anywhere and prints its curve.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text
from trainperf.workloads.llama31_8b import mini

GENERATOR = "trainperf.workloads.deepseekv3_671b.mini_start v1"
START_SEED = 671  # the weights, and the order of the training sequences (llama31_8b's mini order at this seed)
START_STEPS = 100  # 3,200 sequences of 128 tokens: 4 % of an epoch of the mini training split
START_LR, START_WARMUP = 3e-3, 10  # llama31_8b's mini rate, then flat: a checkpoint taken mid-pretraining
WEIGHTS, MANIFEST = "model.safetensors", "manifest.json"
CALIBRATED_START_LOG_PERPLEXITY = 5.6478  # the checkpoint the mini target was set from (README.md)
TOLERANCE = 0.02  # log-perplexity: two machines' checkpoints closer than this start the same race
FIX = "run `trainperf data prepare deepseekv3_671b` (it trains the mini's starting checkpoint, one to two minutes)"


def start_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "deepseekv3_671b" / "mini" / "start"


def _header(steps: int = START_STEPS) -> dict:
    return {"generator": GENERATOR, "seed": START_SEED, "steps": steps, "learning_rate": START_LR}


def verify_start(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with llama31_8b's mini files or the starting checkpoint (none: ready)."""
    if problems := mini.verify_mini(data_dir, trust_cache=trust_cache):
        return problems
    root = start_dir(data_dir)
    try:
        manifest = verified.read_manifest(root / MANIFEST, FIX)
    except DataError as e:
        return [str(e).split(": run")[0]]
    if {k: manifest.get(k) for k in _header()} != _header():
        return [f"{root / MANIFEST} was written by another generator version or settings"]
    tokenizer = mini.read_manifest(data_dir)["files"][mini.TOKENIZER]["sha256"]
    if manifest.get("tokenizer_sha256") != tokenizer:
        return [f"{root / MANIFEST}: trained on another tokenizer than {mini.mini_dir(data_dir) / mini.TOKENIZER}"]
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != {WEIGHTS, "config.json"}:
        return [f"{root / MANIFEST} does not list the checkpoint's files"]
    expected = {n: verified.Expected(sha256=e.get("sha256", ""), size=e.get("bytes")) for n, e in files.items()}
    return verified.check_files(root, expected, trust_cache=trust_cache)


def prepare_start(data_dir: Path) -> list[Path]:
    """llama31_8b's mini files (idempotent), then the starting checkpoint unless it verifies."""
    written = mini.prepare_mini(data_dir)
    if not verify_start(data_dir):
        return written
    return [*written, *make_start(data_dir, start_dir(data_dir))]


def make_start(data_dir: Path, out: Path, *, steps: int = START_STEPS, report: Callable = print) -> list[Path]:
    """Train the starting checkpoint and write it, its config.json and its manifest in ``out``."""
    import torch
    from safetensors.torch import save_file

    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.deepseekv3_671b import checkpoint
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS

    a = FLAVOURS["mini"]
    data = mini_data(data_dir)
    torch.set_flush_denormal(True)  # as the mini's runs (llama31_8b's TORCH_STATE); the harness's default after
    try:
        torch.manual_seed(START_SEED)
        model = Decoder(a)
        curve = train(model, data, steps=steps, lr=START_LR, warmup=START_WARMUP, report=report)
        state = {n: p.detach() for n, p in model.named_parameters()}
        state |= {n: b for n, b in model.named_buffers() if n.endswith("router.expert_bias")}
        # bf16 as the reference's checkpoint; the routers' biases fp32 (DeepSeek-V3's e_score_correction_bias is)
        tensors = {
            n: t if n.endswith("e_score_correction_bias") else t.to(torch.bfloat16)
            for n, t in checkpoint.to_reference(state, a).items()
        }
        out.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
        atomic_write_text(out / "config.json", json.dumps(checkpoint.config_of(a), indent=1) + "\n")
        own = log_perplexity(load(out), data)  # the weights as written (bf16), as a run reads them
    finally:
        torch.set_flush_denormal(False)
        data.close()
    names = (WEIGHTS, "config.json")
    manifest = {
        **_header(steps),
        "tokenizer_sha256": mini.read_manifest(data_dir)["files"][mini.TOKENIZER]["sha256"],
        "training_curve": curve,
        "log_perplexity": round(own, 4),
        "files": {n: {"bytes": (out / n).stat().st_size, "sha256": verified.sha256(out / n)} for n in names},
    }
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    report(
        f"deepseekv3_671b mini: starting checkpoint written ({steps} steps; log-perplexity {own:.4f} on the "
        f"evaluation sequences, untrained {curve[0][1]:.4f})"
    )
    calibrated = CALIBRATED_START_LOG_PERPLEXITY
    if calibrated is not None and abs(own - calibrated) > TOLERANCE:
        report(
            f"deepseekv3_671b mini: note: the calibration's checkpoint scored {calibrated:.4f}, this one differs by "
            f"more than {TOLERANCE} (another floating-point rounding?): the README's calibration does not apply as is"
        )
    return [out / n for n in (*names, MANIFEST)]


def mini_data(data_dir: Path, seed: int = START_SEED):
    """llama31_8b's mini workload over the prepared files: its seeded batches of the training split (in the order
    of ``seed``) and its evaluation of the 512 validation sequences (the mini's own)."""
    from trainperf.dist import DistContext
    from trainperf.spec import RunConfig
    from trainperf.workloads.llama31_8b import MINI, MINI_RECIPE
    from trainperf.workloads.llama31_8b.workload import LlamaWorkload

    data = LlamaWorkload(MINI, MINI_RECIPE, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
    data.prepare()
    data.load_data()
    return data


def load(folder: Path):
    """A ``mini`` decoder filled from the checkpoint in ``folder`` (names and shapes checked first)."""
    import torch

    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.deepseekv3_671b import checkpoint
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS

    a = FLAVOURS["mini"]
    ckpt = checkpoint.check(folder, a)
    model = Decoder(a)
    biases = [(n, b) for n, b in model.named_buffers() if n.endswith("router.expert_bias")]
    with torch.no_grad():
        for name, t in [*model.named_parameters(), *biases]:
            t.copy_(checkpoint.read(ckpt, name, a).float())
    return model


def log_perplexity(model, data) -> float:
    return float(data.evaluate(model)["log_perplexity"])


def train(model, data, *, steps: int, lr: float, warmup: int, report: Callable, every: int = 25) -> list:
    """``steps`` steps of the mini's training step on ``data``'s batches: the next-token loss (and the prediction
    layer's x its scale where the flavour has one; the auxiliary loss through its gradient), AdamW 0.9 / 0.95,
    epsilon 1e-8, weight decay 0.1 off the norms, clip 1.0, the experts' biases moved after each step, at ``lr``
    after a linear warm-up from 0 and flat after it; the curve of [samples, log-perplexity] every ``every`` steps."""
    import torch
    import torch.nn.functional as F

    from trainperf.workloads.common.llm.moe import update_expert_bias

    a = model.args
    decay = [p for p in model.parameters() if p.ndim > 1]
    plain = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / warmup) if warmup else 1.0)
    batches = data.train_batches()
    curve = [[0, round(log_perplexity(model, data), 4)]]
    for step in range(1, steps + 1):
        batch = next(batches)
        if a.mtp_layers:
            logits, mtp = model(batch[:, :-1], batch[:, 1:])
            loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten()) + a.mtp_loss_scale * mtp
        else:
            loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        update_expert_bias(model)
        if step % every == 0 or step == steps:
            curve.append([step * len(batch), round(log_perplexity(model, data), 4)])
            report(f"  step {step}: {curve[-1][0]} samples, validation log-perplexity {curve[-1][1]:.4f}")
    return curve
