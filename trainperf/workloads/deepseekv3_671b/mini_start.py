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
``benchmarks/deepseek_mini_start.py`` reruns it anywhere and prints its curve. The training, the manifest and its
check are the LLM minis' shared ones (``trainperf/workloads/common/llm/start.py``); this module gives their settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from trainperf.fileio import atomic_write_text
from trainperf.workloads.common.llm import start

GENERATOR = "trainperf.workloads.deepseekv3_671b.mini_start v1"
START_SEED = 671  # the weights, and the order of the training sequences (llama31_8b's mini order at this seed)
START_STEPS = 100  # 3,200 sequences of 128 tokens: 4 % of an epoch of the mini training split
START_LR, START_WARMUP = 3e-3, 10  # llama31_8b's mini rate, then flat: a checkpoint taken mid-pretraining
WEIGHTS, MANIFEST = "model.safetensors", start.MANIFEST
CALIBRATED_START_LOG_PERPLEXITY = 5.6478  # the checkpoint the mini target was set from (README.md)
FIX = "run `trainperf data prepare deepseekv3_671b` (it trains the mini's starting checkpoint, one to two minutes)"


def start_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "deepseekv3_671b" / "mini" / "start"


def _write(state: dict, out: Path) -> list[str]:
    """The reference's layout: one safetensors file in bf16 (the routers' biases fp32, as DeepSeek-V3's
    e_score_correction_bias is) by the reference's names, and config.json."""
    import torch
    from safetensors.torch import save_file

    from trainperf.workloads.deepseekv3_671b import checkpoint
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS

    a = FLAVOURS["mini"]
    tensors = {
        n: t if n.endswith("e_score_correction_bias") else t.to(torch.bfloat16)
        for n, t in checkpoint.to_reference(state, a).items()
    }
    save_file(tensors, str(out / WEIGHTS), metadata={"format": "pt"})
    atomic_write_text(out / "config.json", json.dumps(checkpoint.config_of(a), indent=1) + "\n")
    return [WEIGHTS, "config.json"]


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


def _start() -> start.Start:
    from trainperf.workloads.deepseekv3_671b.model import FLAVOURS
    from trainperf.workloads.llama31_8b import prose

    return start.Start(
        name="deepseekv3_671b mini",
        generator=GENERATOR,
        folder=start_dir,
        fix=FIX,
        args=FLAVOURS["mini"],
        corpus=prose.PROSE,
        seed=START_SEED,
        steps=START_STEPS,
        learning_rate=START_LR,
        warmup=START_WARMUP,
        write=_write,
        load=load,
        calibrated_log_perplexity=CALIBRATED_START_LOG_PERPLEXITY,
    )


def verify_start(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    """Problems with llama31_8b's mini files or the starting checkpoint (none: ready)."""
    return start.verify(_start(), data_dir, trust_cache=trust_cache)


def prepare_start(data_dir: Path) -> list[Path]:
    """llama31_8b's mini files (idempotent), then the starting checkpoint unless it verifies."""
    return start.prepare(_start(), data_dir)


def make_start(data_dir: Path, out: Path, *, steps: int = START_STEPS, report: Callable = print) -> list[Path]:
    """Train the starting checkpoint and write it, its config.json and its manifest in ``out``."""
    return start.make(_start(), data_dir, out, steps=steps, report=report)


def mini_data(data_dir: Path, seed: int = START_SEED):
    """llama31_8b's mini workload over the prepared files (its batches in the order of ``seed``, its evaluation)."""
    from trainperf.workloads.llama31_8b import prose

    return prose.open_prose(data_dir, seed)


log_perplexity = start.log_perplexity
train = start.train
