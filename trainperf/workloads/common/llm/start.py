"""A mini's starting checkpoint, trained at ``trainperf data prepare``: a decoder trained from scratch for a fixed
number of seeded steps on a prose corpus (never on the documents the mini evaluates), written as safetensors in its
benchmark's checkpoint layout, with ``manifest.json`` beside it (the settings, the tokenizer's SHA-256, the training
curve, the checkpoint's own evaluation and every file's size and SHA-256), which each mini run checks before the
clock. deepseekv3_671b's mini continues from one as the reference continues from DeepSeek-V3's checkpoint;
llama2_70b_lora's mini fine-tunes one as the reference fine-tunes Llama 2 70B.

Made at prepare rather than shipped in the package: a few megabytes of weights made by one to a few minutes on two
cores. The training is seeded (weights and the order of the sequences) and in fp32 on the CPU, so two trainings on
one machine write the same bytes; another machine's floating point may round differently, so :func:`make` compares
the new checkpoint's evaluation with the one its mini's target was set from and says when they differ.

What is generic lives here (the training loop, the manifest, its check); a benchmark gives a :class:`Start` (its
sizes, its seed and schedule, how its layout writes and reads the weights) and a :class:`Corpus` (where the
training sequences come from: llama31_8b's mini prose for both minis so far).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text

MANIFEST = "manifest.json"


@dataclass(frozen=True, kw_only=True)
class Corpus:
    """The text a starting checkpoint is trained on: ``prepare(data_dir)`` and ``verify(data_dir, trust_cache=)``
    its files, ``tokenizer_sha256(data_dir)``, and ``open(data_dir, seed, seq_len)``: an object with seeded
    ``train_batches()`` (tensors of token ids, one row a sequence), ``evaluate(model)`` (a mapping with
    ``log_perplexity``) and ``close()``."""

    prepare: Callable[[Path], list[Path]]
    verify: Callable[..., list[str]]
    tokenizer_sha256: Callable[[Path], str]
    open: Callable[[Path, int, int], Any]


@dataclass(frozen=True, kw_only=True)
class Start:
    """One mini's starting checkpoint: what trains it and how it is stored."""

    name: str  # in messages: "deepseekv3_671b mini"
    generator: str  # recorded in the manifest; a new version makes prepare train again
    folder: Callable[[Path], Path]  # data_dir -> the checkpoint's folder
    fix: str  # the command that makes it
    args: Any  # the decoder's DecoderArgs
    corpus: Corpus
    seed: int
    steps: int
    learning_rate: float
    warmup: int
    decay: bool = False  # cosine to 0 over ``steps`` after the warm-up (a finished pretraining); else flat
    seq_len: int = 128
    every: int = 25  # steps between the training curve's evaluations
    # (state dict by the decoder's names, folder) -> the names of the files it wrote there in the benchmark's layout
    write: Callable[[dict, Path], list[str]]
    load: Callable[[Path], Any]  # folder -> the decoder filled from it (names and shapes checked)
    # (the checkpoint as written, loaded; data_dir) -> more figures for the manifest (the mini's own evaluation of it)
    extra: Callable[[Any, Path], dict] | None = None
    calibrated_log_perplexity: float | None = None  # the checkpoint its mini's target was set from
    tolerance: float = 0.02  # log-perplexity: two machines' checkpoints closer than this start the same race

    def header(self, steps: int | None = None) -> dict:
        out = {"generator": self.generator, "seed": self.seed, "steps": steps or self.steps}
        out["learning_rate"] = self.learning_rate
        return out | ({"schedule": "cosine"} if self.decay else {})


def read_manifest(s: Start, data_dir: Path) -> dict:
    return verified.read_manifest(s.folder(data_dir) / MANIFEST, s.fix)


def verify(s: Start, data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with the corpus's files or the starting checkpoint (none: ready)."""
    if problems := s.corpus.verify(data_dir, trust_cache=trust_cache):
        return problems
    root = s.folder(data_dir)
    try:
        manifest = read_manifest(s, data_dir)
    except DataError as e:
        return [str(e).split(": run")[0]]
    if {k: manifest.get(k) for k in s.header()} != s.header():
        return [f"{root / MANIFEST} was written by another generator version or settings"]
    if manifest.get("tokenizer_sha256") != s.corpus.tokenizer_sha256(data_dir):
        return [f"{root / MANIFEST}: trained with another tokenizer than the prepared one"]
    files = manifest.get("files")
    if not isinstance(files, dict) or not files or not all(isinstance(e, dict) for e in files.values()):
        return [f"{root / MANIFEST} does not list the checkpoint's files"]
    expected = {n: verified.Expected(sha256=e.get("sha256", ""), size=e.get("bytes")) for n, e in files.items()}
    return verified.check_files(root, expected, trust_cache=trust_cache)


def prepare(s: Start, data_dir: Path) -> list[Path]:
    """The corpus's files (idempotent), then the starting checkpoint unless it verifies."""
    written = s.corpus.prepare(data_dir)
    if not verify(s, data_dir):
        return written
    return [*written, *make(s, data_dir, s.folder(data_dir))]


def make(s: Start, data_dir: Path, out: Path, *, steps: int | None = None, report: Callable = print) -> list[Path]:
    """Train the starting checkpoint and write it and its manifest in ``out``."""
    import torch

    from trainperf.workloads.common.llm.model import Decoder

    steps = steps or s.steps
    data = s.corpus.open(data_dir, s.seed, s.seq_len)
    torch.set_flush_denormal(True)  # as the minis' runs (their TORCH_STATE); the harness's default after
    try:
        torch.manual_seed(s.seed)
        model = Decoder(s.args)
        curve = train(
            model, data, steps=steps, lr=s.learning_rate, warmup=s.warmup, decay=s.decay, report=report, every=s.every
        )
        out.mkdir(parents=True, exist_ok=True)
        state = {n: p.detach() for n, p in model.named_parameters()}
        state |= {n: b for n, b in model.named_buffers() if n.endswith("router.expert_bias")}
        names = s.write(state, out)
        written = s.load(out)  # the weights as written, as a run reads them
        own = log_perplexity(written, data)
        more = s.extra(written, data_dir) if s.extra is not None else {}
    finally:
        torch.set_flush_denormal(False)
        data.close()
    manifest = {
        **s.header(steps),
        "tokenizer_sha256": s.corpus.tokenizer_sha256(data_dir),
        "training_curve": curve,
        "log_perplexity": round(own, 4),
        **more,
        "files": {n: {"bytes": (out / n).stat().st_size, "sha256": verified.sha256(out / n)} for n in names},
    }
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    report(
        f"{s.name}: starting checkpoint written ({steps} steps; log-perplexity {own:.4f} on the corpus's evaluation "
        f"sequences, untrained {curve[0][1]:.4f})"
    )
    calibrated = s.calibrated_log_perplexity
    if calibrated is not None and abs(own - calibrated) > s.tolerance:
        report(
            f"{s.name}: note: the calibration's checkpoint scored {calibrated:.4f}, this one differs by more than "
            f"{s.tolerance} (another floating-point rounding?): the README's calibration does not apply as is"
        )
    return [out / n for n in (*names, MANIFEST)]


def log_perplexity(model, data) -> float:
    return float(data.evaluate(model)["log_perplexity"])


def schedule(lr_steps: int, warmup: int, decay: bool) -> Callable[[int], float]:
    """The factor of the learning rate at a step: linear from 0 over ``warmup``, then flat, or a cosine to 0 at
    ``lr_steps``."""

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return step / warmup
        if not decay:
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, lr_steps - warmup))))

    return factor


def train(model, data, *, steps: int, lr: float, warmup: int, report: Callable, decay: bool = False, every=25) -> list:
    """``steps`` steps of the LLM minis' training step on ``data``'s batches: the next-token loss (and the
    prediction layer's x its scale where the decoder has one; an MoE's auxiliary loss through its gradient), AdamW
    0.9 / 0.95, epsilon 1e-8, weight decay 0.1 off the norms, clip 1.0, bias-balanced experts' biases moved after
    each step, at :func:`schedule`'s rate; the curve of [samples, log-perplexity] every ``every`` steps."""
    import torch
    import torch.nn.functional as F

    from trainperf.workloads.common.llm.moe import update_expert_bias

    a = model.args
    decayed = [p for p in model.parameters() if p.ndim > 1]
    plain = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule(steps, warmup, decay))
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
