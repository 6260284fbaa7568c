"""The mini's base model, as the reference fine-tunes a pretrained Llama 2 70B: the ``mini`` flavour (llama31_8b's mini
decoder) pretrained from scratch at ``trainperf data prepare llama2_70b_lora`` on llama31_8b's mini prose (Debian's
dict-gcide, wordnet-base and python3-doc: other text than the manual pages the mini fine-tunes and evaluates on),
``BASE_STEPS`` steps of 32 sequences of 128 tokens with a warm-up and a cosine to 0 (a finished pretraining), in fp32
on the CPU and seeded. It is written in the reference's checkpoint layout (``config.json``, a safetensors file of
bf16 tensors with fused qkv under the reference's names, the index; ``checkpoint.py`` reads it as it reads the
70B's) under ``<data-dir>/llama2_70b_lora/mini/base``, with a manifest (every file's SHA-256, the tokenizer's, the
training curve) that every mini run checks before the clock. The training, the manifest and its check are the LLM
minis' shared ones (``trainperf/workloads/common/llm/start.py``). ``benchmarks/lora_mini_base.py`` reruns it
anywhere and prints its curve and the base model's own evaluation loss on the mini's validation pages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trainperf.errors import DataError
from trainperf.workloads.common.llm import start
from trainperf.workloads.llama2_70b_lora import mini
from trainperf.workloads.llama2_70b_lora.reference import Files
from trainperf.workloads.llama31_8b import mini as llama_mini

GENERATOR = "trainperf.workloads.llama2_70b_lora.base v1"
BASE_SEED = 70
BASE_STEPS = 200  # 6,400 sequences of 128 tokens: a twelfth of an epoch of llama31_8b's mini training split
BASE_LR, BASE_WARMUP = 3e-3, 20  # llama31_8b's mini recipe: its rate, warm-up and a cosine over the steps
CALIBRATED_BASE_LOG_PERPLEXITY = 5.4734  # the base model the mini target was calibrated on (README.md)


def base_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "llama2_70b_lora" / "mini" / "base"


def _write(state: dict, out: Path) -> list[str]:
    import torch

    from trainperf.workloads.llama2_70b_lora import checkpoint
    from trainperf.workloads.llama2_70b_lora.model import FLAVOURS

    tensors = {n: t.to(torch.bfloat16) for n, t in checkpoint.to_reference(state).items()}
    checkpoint.write(out, tensors, checkpoint.config_of(FLAVOURS["mini"]), shards=1)
    return [checkpoint.CONFIG, checkpoint.INDEX, "model-00001-of-00001.safetensors"]


def load(folder: Path):
    """The ``mini`` decoder filled from the checkpoint in ``folder`` (names and shapes checked first), in fp32."""
    import torch

    from trainperf.workloads.common.llm.model import Decoder
    from trainperf.workloads.llama2_70b_lora import checkpoint
    from trainperf.workloads.llama2_70b_lora.model import FLAVOURS

    ckpt = checkpoint.check(folder, FLAVOURS["mini"])
    model = Decoder(FLAVOURS["mini"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(checkpoint.full_tensor(ckpt, name).float())
    return model


def summary_loss(model, data_dir: Path) -> dict:
    """The base model's own evaluation loss on the mini's validation pages (no fine-tuning: what a run that trains
    nothing scores), as the mini's evaluation computes it."""
    from trainperf.workloads.llama2_70b_lora import MINI, reference
    from trainperf.workloads.llama2_70b_lora.loss import mean_sequence_loss

    valid = reference.read(
        mini.mini_dir(data_dir) / mini.FILES[1], vocab_size=model.args.vocab_size, max_len=mini.SEQ_LEN
    )
    loss = mean_sequence_loss(model, valid)
    print(
        f"llama2_70b_lora mini: the base model's own evaluation loss {loss:.4f} (no fine-tuning); the mini's target: "
        f"<= {MINI.target}"
    )
    return {"summary_eval_loss": round(loss, 4)}


def _start() -> start.Start:
    from trainperf.workloads.llama2_70b_lora.model import FLAVOURS
    from trainperf.workloads.llama31_8b import prose

    return start.Start(
        name="llama2_70b_lora mini",
        generator=GENERATOR,
        folder=base_dir,
        fix=mini.FIX,
        args=FLAVOURS["mini"],
        corpus=prose.PROSE,
        seed=BASE_SEED,
        steps=BASE_STEPS,
        learning_rate=BASE_LR,
        warmup=BASE_WARMUP,
        decay=True,
        every=50,
        write=_write,
        load=load,
        extra=summary_loss,
        calibrated_log_perplexity=CALIBRATED_BASE_LOG_PERPLEXITY,
    )


def verify(data_dir: Path, *, trust_cache: bool = True) -> list[str]:
    """Problems with llama31_8b's mini files or the base checkpoint (none: ready)."""
    return start.verify(_start(), data_dir, trust_cache=trust_cache)


def make(data_dir: Path, out: Path, *, steps: int = BASE_STEPS, report: Callable = print) -> list[Path]:
    return start.make(_start(), data_dir, out, steps=steps, report=report)


def prepare_mini(data_dir: Path) -> list[Path]:
    """``trainperf data prepare llama2_70b_lora``: llama31_8b's mini files, the manual pages' parquet files, then the
    base checkpoint (each step idempotent: nothing is remade that verifies)."""
    written = llama_mini.prepare_mini(data_dir)
    written += mini.prepare_data(data_dir)
    return [*written, *start.prepare(_start(), data_dir)]


def verify_mini(data_dir: Path, *, trust_cache: bool = False) -> list[str]:
    return mini.verify_data(data_dir, trust_cache=trust_cache) or verify(data_dir, trust_cache=trust_cache)


def files(data_dir: Path) -> Files:
    """The mini's files as the reference's (``Files``), after their manifests are checked (sizes, and the hashes of
    files changed since they were last found intact): a missing or changed file names the command that remakes it."""
    for what, problems in (("data", mini.verify_data(data_dir, trust_cache=True)), ("base model", verify(data_dir))):
        if problems:
            raise DataError(f"llama2_70b_lora mini {what}: {problems[0]}; {mini.FIX}")
    root = mini.mini_dir(data_dir)
    return Files(root / mini.FILES[0], root / mini.FILES[1], base_dir(data_dir))
