"""Every workload beside a straightforward peer: same model, same mini data, same batch, one process.

    python benchmarks/peers.py [KEY ...] [--steps N] [--repeats R] [--json PATH] [--compile]
                               [--precision fp32|bf16] [--peer-precision fp32|bf16]

For each benchmark (all thirteen, or those named) trainperf's path (the workload as a run builds it and the
harness's ``Stepper``: zero_grad, the workload's loss, backward, clipping, optimizer and scheduler) and a
peer written the way a user of the peer's library writes it train the same architecture on the same mini
data at the same batch, alternating (trainperf, peer, trainperf, peer, ...) ``repeats`` times in this one
process after one untimed warm-up each. The table gives each side's median rate and the ratio of the
medians (trainperf / peer); the machine is shared and noisy, so the ratio within one run is what means
something. The peers:

- resnet: torchvision's reference classification loop (``references/classification/train.py``:
  ``train_one_epoch``): a ``Dataset`` of the same Fashion-MNIST tensors with per-sample torchvision
  transforms (flip, dtype, normalize) collated by a ``DataLoader`` (no worker processes: the two cores are
  the step's), the model in the default memory format, and per step ``loss.item()`` and top-1/top-5
  accuracy for the metric logger. trainperf's side draws its batches as a run does (in-memory slices).
- ssd, maskrcnn: torchvision's reference detection loop (``references/detection/engine.py``:
  ``train_one_epoch``: sum of the loss dict, ``.item()`` of the reduced losses and a finiteness check,
  zero_grad, backward, step, the warm-up scheduler) over the same torchvision model; Mask R-CNN's peer
  keeps torchvision's own ``MultiScaleRoIAlign`` (trainperf's mini model computes the same one-sample
  ROI Align with ``grid_sample``, trainperf/workloads/common/detection/roi_align.py).
- bert: Hugging Face transformers' ``BertForPreTraining`` of the mini size, called the way its users train
  it (``labels`` of -100 except at the masked positions, ``next_sentence_label``, ``outputs.loss``), the
  same LAMB and clipping, a plain loop.
- dlrm: the reference repository's layout (``dlrm_s_pytorch.py``): 26 ``nn.EmbeddingBag(sparse=True)``,
  one call per table, the same MLPs and dot interaction, Adagrad, a plain loop.
- unet3d: MONAI's ``BasicUNet`` of the mini shape with MONAI's ``DiceCELoss`` and Adam, a plain loop.
- rnnt: an RNN-T assembled from torchaudio's pieces (``torchaudio.models.RNNT`` with its ``_Predictor``
  and ``_Joiner`` and ``_TimeReduction``; torchaudio ships only an Emformer transcriber, so the LSTM
  transcriber of the mini sizes is written here from ``nn.LSTM``), ``torchaudio.functional.rnnt_loss``,
  the same LAMB and clipping, a plain loop.
- llama31_8b: Hugging Face transformers' ``LlamaForCausalLM`` of the mini decoder's configuration (the same
  dimension, layers, heads, key/value heads, FFN, vocabulary, RMSNorm epsilon and RoPE base; its default attention,
  ``sdpa``), trained the way its users train it (``labels=`` the input ids, its own shifted loss), the same AdamW,
  schedule and clipping, a plain loop.
- gpt_oss_20b: Hugging Face transformers' ``GptOssForCausalLM`` of the mini decoder's configuration (the same width,
  layers, heads and their width, key/value heads, experts, expert width, top-k, sliding window on the same layers,
  vocabulary, norm epsilon, RoPE base; eager attention), trained the same way as llama31_8b's peer; what
  transformers' GPT-OSS has beyond trainperf's decoder (attention sinks, router and expert biases, the clamped
  SwiGLU) is in ``benchmarks/peers_llm.py``, where both Hugging Face models are built.
- deepseekv3_671b: Hugging Face transformers' ``DeepseekV3ForCausalLM`` of the mini decoder's configuration (the same
  width, layers, heads, latent attention's ranks and head widths, dense first block, routed and shared experts, their
  width, top-k, sigmoid scores, groups, scaling, vocabulary, norm epsilon, RoPE base; its default ``sdpa`` attention
  and grouped experts; the same parameter count, printed), from random weights where trainperf's side continues from
  its mini starting checkpoint (a step's speed does not depend on the values), trained the same way as llama31_8b's
  peer. transformers' DeepSeek-V3 trains neither balancing mechanism (its expert bias stays 0; no auxiliary loss)
  and scores a router group by its 2 best experts where the mini's is scored by its best 1:
  ``benchmarks/peers_llm.py`` says each difference and why it stays.
- llama2_70b_lora: Hugging Face transformers' ``LlamaForCausalLM`` of the mini decoder's configuration wrapped by
  ``peft.get_peft_model`` with the recipe's LoRA (rank, alpha, dropout) on its q, k, v and output projections, trained
  on the same batches with the same AdamW over the adapters, schedule and clip, its own loss from the same -100
  labels; samples/s.
- flux1: diffusers' ``FluxTransformer2DModel`` of the mini's configuration (the same width, blocks, heads, RoPE axes,
  input, text and pooled widths; diffusers' own initialization) trained the way diffusers' FLUX examples train it
  (``examples/dreambooth/train_dreambooth_flux.py``): the latent drawn from the cached posterior
  (``DiagonalGaussianDistribution.sample``), shifted and scaled, timesteps from
  ``compute_density_for_timestep_sampling`` (uniform) looked up in ``FlowMatchEulerDiscreteScheduler``'s table with
  their sigmas, ``(1 - sigma) x0 + sigma noise`` packed by ``FluxPipeline._pack_latents`` with
  ``_prepare_latent_image_ids``, the prediction unpacked and scored against ``noise - x0`` with
  ``compute_loss_weighting_for_sd3``'s (uniform) weights; the recipe's AdamW, diffusers' ``constant_with_warmup``
  schedule, ``clip_grad_norm_``, a plain loop on the same batches; samples/s. The peer drops no caption (the example
  has no such option); trainperf's side drops one sample's text in ten, as the reference does.
- minigo: self-play as a straightforward implementation plays it: one game at a time in one process, each
  network call evaluating the one position the search asks for (trainperf's own search and Go rules, so
  only the batching and the worker processes differ); trainperf's side is a run's self-play (the workload's
  ``generation_batches``: games split over one worker process per core, each advancing its games together
  with one network batch per playout round). The peer plays a quarter of the games (at least one); both
  are counted in positions per second. The training steps of a generation are not in either figure.

With ``--compile`` trainperf's side runs as ``trainperf run --compile`` makes it (the harness's ``torch.compile`` of
the model; the compilation falls in the untimed warm-up, where a run pays it on its clock: the workload's README
says what it costs a run; the decoder benchmarks' loss is compiled with it, as in a run). The peer is never compiled:
it is the straightforward way. ``--precision bf16`` runs trainperf's side under the bf16 autocast of ``trainperf run
--precision bf16``; ``--peer-precision bf16`` runs the peer's forward under ``torch.autocast(dtype=bfloat16)``, as its
library's users switch it on (the peers that train in a plain loop; minigo's self-play stays fp32). The table's title
says each side's.

Every batch-based side except resnet's trains on the same batches, drawn once from the workload's mini
data (its own loader and augmentation) and held in memory, so that loading is timed on neither side.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainperf import registry
from trainperf.contract.switches import Switches
from trainperf.dist import DistContext
from trainperf.harness.precision import Precision
from trainperf.harness.runner import RunObserver, seed_everything
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.harness.switches import compile_model
from trainperf.harness.torch_state import torch_state
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers_llm import hf_causal_loss, hf_deepseek, hf_gpt_oss, hf_llama  # noqa: E402 (a sibling module: the Hugging Face LLMs)

KEYS = (
    "resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm", "minigo", "llama31_8b", "gpt_oss_20b",
    "deepseekv3_671b", "llama2_70b_lora", "flux1",
)  # fmt: skip
# Timed steps per repetition when --steps is not given: each workload's pair takes 30-70 s at 3 repeats here.
DEFAULT_STEPS = {
    "resnet": 30, "ssd": 10, "maskrcnn": 10, "unet3d": 12, "rnnt": 20, "bert": 15, "dlrm": 200, "minigo": 16,
    "llama31_8b": 10, "gpt_oss_20b": 10, "deepseekv3_671b": 10, "llama2_70b_lora": 20, "flux1": 20,
}  # fmt: skip
CACHED_BATCHES = 8  # batches drawn once and cycled by both sides


@dataclass
class Pair:
    """One workload's two sides: each callable runs ``steps`` steps and returns the work done (in ``unit``)."""

    unit: str
    batch: str
    ours: Callable[[int], float]
    peer: Callable[[int], float]
    peer_name: str
    note: str = ""
    close: Callable[[], None] = lambda: None
    runs: dict[str, list[float]] = field(default_factory=lambda: {"trainperf": [], "peer": []})


def workload(key: str, **replace: Any):
    """The mini workload as a run builds it, its data checked and loaded (a DataError says what to prepare)."""
    spec, recipe = registry.get_spec(key, "mini"), registry.default_recipe(key, "mini")
    if replace:
        recipe = dataclasses.replace(recipe, **replace)
    config = RunConfig(seed=0, switches=Switches(compile=COMPILE["on"]))  # the workload's own part of --compile
    w = registry.workload_class(key)(spec, recipe, config, data_dir=default_data_dir(), dist=DistContext())
    w.prepare()
    w.load_data()
    return w


COMPILE = {"on": False}  # --compile: trainperf's side compiled as `trainperf run --compile` compiles it
PRECISION = {"trainperf": "fp32", "peer": "fp32"}  # --precision, --peer-precision: each side's autocast


def stepper_for(w, model: nn.Module) -> Stepper:
    opt, sched = w.build_optimizer(model)
    if COMPILE["on"]:
        model = compile_model(model, Switches(compile=True))
    precision = Precision(PRECISION["trainperf"], w.device.type)
    return Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(w.spec, w, dry_run_steps=1), precision)


def cached(w, n: int = CACHED_BATCHES) -> Callable[[], Any]:
    """The next of ``n`` batches drawn once from the workload's training stream (cycled)."""
    batches = list(itertools.islice(w.train_batches(), n))
    return itertools.cycle(batches).__next__


def stepping(step: Callable[[Any], None], next_batch: Callable[[], Any], size: Callable[[Any], float]):
    def run(steps: int) -> float:
        work = 0.0
        for _ in range(steps):
            b = next_batch()
            step(b)
            work += size(b)
        return work

    return run


def plain_step(model: nn.Module, opt, sched, loss_fn, clip: float = 0.0) -> Callable[[Any], None]:
    """zero_grad, loss, backward, (clip), step, scheduler: the loop every library's tutorial writes."""

    autocast = Precision(PRECISION["peer"], "cpu")  # --peer-precision bf16: torch.autocast, as its users write it

    def step(b) -> None:
        opt.zero_grad(set_to_none=True)
        with autocast.forward():
            loss = loss_fn(model, b)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()

    return step


# --- resnet: torchvision's reference classification loop --------------------------------------------------
class TensorImages(torch.utils.data.Dataset):
    """(image, label) pairs of in-memory uint8 images through per-sample torchvision transforms."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform) -> None:
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.transform(self.images[i]), self.labels[i]


def accuracy(output: torch.Tensor, target: torch.Tensor, topk=(1,)) -> list[torch.Tensor]:
    """references/classification/utils.py's ``accuracy``: top-k hits in percent."""
    with torch.inference_mode():
        _, pred = output.topk(max(topk), 1, True, True)
        correct = pred.t().eq(target[None])
        return [correct[:k].flatten().sum(dtype=torch.float32) * (100.0 / target.shape[0]) for k in topk]


def resnet_pair() -> Pair:
    from torchvision.transforms import v2 as T

    from trainperf.workloads.resnet import mini_data
    from trainperf.workloads.resnet.model import MiniResNet

    w = workload("resnet")
    seed_everything(0)
    stepper = stepper_for(w, w.build_model())
    batches = w.train_batches()
    n = w.local_batch_size
    ours = stepping(lambda b: stepper.step([b]), batches.__next__, lambda b: len(b[1]))

    seed_everything(0)
    model = MiniResNet()  # the reference loop's default memory format
    opt, sched = w.build_optimizer(model)
    criterion = nn.CrossEntropyLoss(label_smoothing=w.recipe.label_smoothing)
    transform = T.Compose(
        [T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True), T.Normalize([mini_data.MEAN], [mini_data.STD])]
    )
    loader = torch.utils.data.DataLoader(
        TensorImages(w.xtr, w.ytr, transform), batch_size=n, shuffle=True, num_workers=0, drop_last=True
    )
    epochs = (b for _ in itertools.count() for b in loader)
    meters: list[float] = []

    def peer(steps: int) -> float:
        model.train()
        for image, target in itertools.islice(epochs, steps):
            output = model(image)
            loss = criterion(output, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            meters[:] = [loss.item(), acc1.item(), acc5.item()]  # the metric logger's per-step reads
        return steps * n

    return Pair("images/s", f"{n} images 28x28", ours, peer, "torchvision reference classification loop",
                "trainperf's batches from its own stream; the peer's from a per-sample DataLoader")  # fmt: skip


# --- ssd, maskrcnn: torchvision's reference detection loop --------------------------------------------------
def torchvision_roi_align(model: nn.Module) -> nn.Module:
    """Mask R-CNN with torchvision's ``MultiScaleRoIAlign`` (one sample per bin, as the mini model's) in place of
    trainperf's grid_sample ROI Align: the same weights, torchvision's own kernel."""
    from torchvision.ops import MultiScaleRoIAlign

    heads = model.roi_heads
    names = heads.box_roi_pool.featmap_names
    heads.box_roi_pool = MultiScaleRoIAlign(names, heads.box_roi_pool.output_size, sampling_ratio=1)
    heads.mask_roi_pool = MultiScaleRoIAlign(names, heads.mask_roi_pool.output_size, sampling_ratio=1)
    return model


def detection_pair(key: str) -> Pair:
    w = workload(key)
    next_batch = cached(w)
    w.close()  # the cached batches are in memory: the training stream is done
    seed_everything(0)
    stepper = stepper_for(w, w.parallelize(w.build_model()))
    ours = stepping(lambda b: stepper.step([b]), next_batch, lambda b: len(b[0]))

    seed_everything(0)
    model = w.build_model()
    if key == "maskrcnn":
        model = torchvision_roi_align(model)
    opt, sched = w.build_optimizer(model)
    logged: dict[str, float] = {}

    def reference_step(batch) -> None:  # references/detection/engine.py, one process (reduce_dict is the identity)
        images, targets = batch
        images = [image.to(w.device) for image in images]
        targets = [{k: v.to(w.device) if torch.is_tensor(v) else v for k, v in t.items()} for t in targets]
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        loss_value = losses.item()
        if not math.isfinite(loss_value):
            raise RuntimeError(f"{key} peer: loss is {loss_value}")
        opt.zero_grad()
        losses.backward()
        opt.step()
        sched.step()
        logged.update({k: v.item() for k, v in loss_dict.items()}, loss=loss_value)  # MetricLogger.update

    peer = stepping(reference_step, next_batch, lambda b: len(b[0]))
    model.train()
    name = "torchvision reference detection loop" + (" (torchvision MultiScaleRoIAlign)" if key == "maskrcnn" else "")
    return Pair("images/s", f"{w.local_batch_size} scenes", ours, peer, name)


# --- bert: Hugging Face transformers ------------------------------------------------------------------------
class HuggingFaceBert(nn.Module):
    """transformers' BertForPreTraining of the mini flavour's size, called the way our model is (logits at the
    prediction slots), for trainperf's loss; :func:`hf_loss` trains it the way its own users do."""

    def __init__(self) -> None:
        super().__init__()
        import transformers

        from trainperf.workloads.bert.workload import FLAVOURS

        c = FLAVOURS["mini"].model
        self.hf = transformers.BertForPreTraining(
            transformers.BertConfig(
                vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
                num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size, hidden_act="gelu",
                hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.dropout,
                max_position_embeddings=c.max_position_embeddings, layer_norm_eps=c.layer_norm_eps,
            )
        )  # fmt: skip

    def forward(self, input_ids, segment_ids, input_mask, masked_lm_positions):
        out = self.hf(input_ids=input_ids, attention_mask=input_mask, token_type_ids=segment_ids)
        logits = out.prediction_logits  # every position: that is how its head works
        picked = logits.gather(1, masked_lm_positions[..., None].expand(-1, -1, logits.shape[-1]))
        return picked, out.seq_relationship_logits


def hf_loss(model: HuggingFaceBert, b: dict[str, torch.Tensor]) -> torch.Tensor:
    """``BertForPreTraining``'s own loss: labels -100 except at the masked positions (slot 0 is padding)."""
    labels = torch.full_like(b["input_ids"], -100)
    valid = b["masked_lm_positions"] != 0
    rows = torch.arange(len(labels))[:, None].expand_as(valid)
    labels[rows[valid], b["masked_lm_positions"][valid]] = b["masked_lm_ids"][valid].long()
    out = model.hf(
        input_ids=b["input_ids"], attention_mask=b["input_mask"], token_type_ids=b["segment_ids"],
        labels=labels, next_sentence_label=b["next_sentence_labels"].long().view(-1),
    )  # fmt: skip
    return out.loss


def bert_pair() -> Pair:
    w = workload("bert")
    next_batch = cached(w)
    tokens = lambda b: b["input_ids"].numel()  # noqa: E731 (every position, padding included)
    seed_everything(0)
    stepper = stepper_for(w, w.build_model())
    ours = stepping(lambda b: stepper.step([b]), next_batch, tokens)
    seed_everything(0)
    model = HuggingFaceBert()
    opt, sched = w.build_optimizer(model)
    peer = stepping(plain_step(model, opt, sched, hf_loss, w.recipe.clip_grad_norm), next_batch, tokens)
    batch = f"{w.local_batch_size} x {w.synthetic_batch()['input_ids'].shape[1]} tokens"
    return Pair("tokens/s", batch, ours, peer, "transformers BertForPreTraining, plain loop", close=w.close)


# --- llama31_8b, gpt_oss_20b, deepseekv3_671b: Hugging Face transformers (the models in peers_llm.py) ----------
def causal_lm_pair(key: str, peer_model: Callable[[Any], nn.Module], name: str) -> Pair:
    """trainperf's mini step of a decoder benchmark against a transformers model of its configuration (built by
    ``peer_model`` from the workload's decoder arguments) in a plain loop with the same optimizer, schedule and clip.
    trainperf's model is placed as a run places it (``parallelize``: where the mini starts from a checkpoint, it is
    loaded there); both sides' parameter counts are printed and kept in the pair's note."""
    w = workload(key)
    next_batch = cached(w)
    tokens = lambda b: b[:, 1:].numel()  # noqa: E731 (the positions scored)
    seed_everything(0)
    ours_model = w.parallelize(w.build_model())
    stepper = stepper_for(w, ours_model)
    ours = stepping(lambda b: stepper.step([b]), next_batch, tokens)
    seed_everything(0)
    model = peer_model(w.args)
    opt, sched = w.build_optimizer(model)
    peer = stepping(plain_step(model, opt, sched, hf_causal_loss, w.recipe.clip_grad_norm), next_batch, tokens)
    counts = [sum(p.numel() for p in m.parameters()) for m in (ours_model, model)]
    note = f"parameters: trainperf {counts[0]:,}, peer {counts[1]:,}"
    print(f"  {key}: {note}", file=sys.stderr)
    batch = f"{w.local_batch_size} x {w.seq_len} tokens"
    return Pair("tokens/s", batch, ours, peer, name, note=note, close=w.close)


def llama_pair() -> Pair:
    return causal_lm_pair("llama31_8b", hf_llama, "transformers LlamaForCausalLM, plain loop")


def gpt_oss_pair() -> Pair:
    name = "transformers GptOssForCausalLM (eager attention), plain loop"
    return causal_lm_pair("gpt_oss_20b", hf_gpt_oss, name)


def deepseek_pair() -> Pair:
    name = "transformers DeepseekV3ForCausalLM (sdpa, grouped experts), plain loop"
    return causal_lm_pair("deepseekv3_671b", hf_deepseek, name)


# --- llama2_70b_lora: transformers + peft, as the reference fine-tunes ----------------------------------------
def lora_pair() -> Pair:
    """trainperf's mini LoRA step (its decoder with peft's adapters on the fused qkv and output projections, the base
    read from the mini's checkpoint) against transformers' LlamaForCausalLM of the same sizes wrapped by
    ``peft.get_peft_model`` with the recipe's LoraConfig on its q, k, v and output projections (transformers' Llama
    has no fused qkv), trained in a plain loop on the same batches with the same AdamW, schedule and clip, the loss
    the model's own from the same -100 labels. Samples/s, as the issue counts them."""
    import peft

    w = workload("llama2_70b_lora")
    next_batch = cached(w)
    samples = lambda b: float(b[0].shape[0])  # noqa: E731
    seed_everything(0)
    stepper = stepper_for(w, w.parallelize(w.build_model()))
    ours = stepping(lambda b: stepper.step([b]), next_batch, samples)
    seed_everything(0)
    r = w.recipe
    config = peft.LoraConfig(
        r=r.lora_rank, lora_alpha=r.lora_alpha, lora_dropout=r.lora_dropout, bias="none",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
    )  # fmt: skip
    model = peft.get_peft_model(hf_llama(w.args), config)
    model.train()
    opt, sched = w.build_optimizer(model)  # AdamW over what requires a gradient: the adapters

    def loss(m, b):
        return m(input_ids=b[0], labels=b[1], use_cache=False).loss

    peer = stepping(plain_step(model, opt, sched, loss, r.clip_grad_norm), next_batch, samples)
    batch = f"{w.local_batch_size} sequences of at most {w.seq_len} tokens"
    return Pair("samples/s", batch, ours, peer, "transformers LlamaForCausalLM + peft LoRA, plain loop", close=w.close)


# --- flux1: diffusers' flow-matching training, as its FLUX examples write it ----------------------------------
def diffusers_flux(args) -> nn.Module:
    """diffusers' ``FluxTransformer2DModel`` of the flavour ``args`` (a ``FluxArgs``), its own initialization."""
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(patch_size=1, out_channels=None, **dataclasses.asdict(args))


def diffusers_flow_loss(
    shift: float, scale: float, vae_scale_factor: int, generator: torch.Generator | None = None
) -> Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor]:
    """The loss of diffusers' ``train_dreambooth_flux.py`` on a batch of cached posteriors (``mean``, ``logvar``) and
    text encodings (``t5``, ``clip``): the latent sampled, shifted and scaled by the autoencoder's factors, uniform
    timesteps from the scheduler's table, their sigmas looked up one by one (the example's ``get_sigmas``), the noised
    latent packed, the prediction unpacked, the weighted squared error against ``noise - x0``. Every draw comes from
    ``generator`` (the example's ``randn_like`` takes none) so that a test can replay them."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline
    from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
    from diffusers.training_utils import compute_density_for_timestep_sampling, compute_loss_weighting_for_sd3

    scheduler = FlowMatchEulerDiscreteScheduler()  # FLUX.1-schnell's: 1,000 timesteps, shift 1, no dynamic shifting

    def get_sigmas(timesteps: torch.Tensor, n_dim: int, dtype: torch.dtype) -> torch.Tensor:
        sigmas = scheduler.sigmas.to(dtype=dtype)
        step_indices = [(scheduler.timesteps == t).nonzero().item() for t in timesteps]
        sigma = sigmas[step_indices].flatten()
        while len(sigma.shape) < n_dim:
            sigma = sigma.unsqueeze(-1)
        return sigma

    def loss(model: nn.Module, b: dict[str, torch.Tensor]) -> torch.Tensor:
        posterior = DiagonalGaussianDistribution(torch.cat([b["mean"], b["logvar"]], dim=1).float())
        model_input = (posterior.sample(generator) - shift) * scale
        bsz, channels, height, width = model_input.shape
        noise = torch.randn(model_input.shape, generator=generator, dtype=model_input.dtype)
        u = compute_density_for_timestep_sampling(weighting_scheme="none", batch_size=bsz, generator=generator)
        indices = (u * scheduler.config.num_train_timesteps).long()
        timesteps = scheduler.timesteps[indices]
        sigmas = get_sigmas(timesteps, model_input.ndim, model_input.dtype)
        noisy_model_input = (1.0 - sigmas) * model_input + sigmas * noise
        packed = FluxPipeline._pack_latents(noisy_model_input, bsz, channels, height, width)
        img_ids = FluxPipeline._prepare_latent_image_ids(bsz, height // 2, width // 2, packed.device, packed.dtype)
        prompt_embeds = b["t5"].float()
        txt_ids = torch.zeros(prompt_embeds.shape[1], 3)
        model_pred = model(
            hidden_states=packed, timestep=timesteps / 1000, guidance=None, pooled_projections=b["clip"].float(),
            encoder_hidden_states=prompt_embeds, txt_ids=txt_ids, img_ids=img_ids, return_dict=False,
        )[0]  # fmt: skip
        model_pred = FluxPipeline._unpack_latents(
            model_pred, height * vae_scale_factor, width * vae_scale_factor, vae_scale_factor
        )
        weighting = compute_loss_weighting_for_sd3(weighting_scheme="none", sigmas=sigmas)
        target = noise - model_input
        return torch.mean((weighting.float() * (model_pred.float() - target.float()) ** 2).reshape(bsz, -1), 1).mean()

    return loss


def flux_pair() -> Pair:
    """trainperf's mini flux1 step (its transformer with the reference's initialization, its rectified flow) against
    diffusers' ``FluxTransformer2DModel`` of the same configuration trained as diffusers' FLUX examples train it
    (:func:`diffusers_flow_loss`), with the recipe's AdamW, diffusers' ``constant_with_warmup`` schedule of the
    recipe's warm-up and ``clip_grad_norm_``, a plain loop on the same batches. Samples/s; both sides' parameter
    counts in the note."""
    from diffusers.optimization import get_scheduler

    from trainperf.workloads.flux1 import mini

    w = workload("flux1")
    next_batch = cached(w)
    samples = lambda b: float(b["mean"].shape[0])  # noqa: E731
    seed_everything(0)
    ours_model = w.parallelize(w.build_model())
    stepper = stepper_for(w, ours_model)
    ours = stepping(lambda b: stepper.step([b]), next_batch, samples)
    seed_everything(0)
    model = diffusers_flux(w.args)
    model.train()
    r = w.recipe
    opt = torch.optim.AdamW(
        model.parameters(), lr=r.opt_base_learning_rate, betas=(r.opt_adamw_beta_1, r.opt_adamw_beta_2),
        eps=r.opt_adamw_epsilon, weight_decay=r.opt_adamw_weight_decay,
    )  # fmt: skip
    sched = get_scheduler("constant_with_warmup", opt, num_warmup_steps=r.opt_learning_rate_warmup_steps)
    loss = diffusers_flow_loss(mini.SHIFT, mini.SCALE, mini.BLOCK, torch.Generator().manual_seed(0))
    peer = stepping(plain_step(model, opt, sched, loss, r.clip_grad_norm), next_batch, samples)
    counts = [sum(p.numel() for p in m.parameters()) for m in (ours_model, model)]
    note = f"parameters: trainperf {counts[0]:,}, peer {counts[1]:,}"
    print(f"  flux1: {note}", file=sys.stderr)
    shape = " x ".join(map(str, next_batch()["mean"].shape[1:]))
    batch = f"{w.local_batch_size} latents {shape}"
    name = "diffusers FluxTransformer2DModel, its examples' flow matching, plain loop"
    return Pair("samples/s", batch, ours, peer, name, note=note, close=w.close)


# --- dlrm: the reference repository's layout ----------------------------------------------------------------
class PlainDLRM(nn.Module):
    """The reference repository's DLRM layout: one EmbeddingBag per table, looked up table by table."""

    def __init__(self, sizes: tuple[int, ...], dim: int, bottom: tuple[int, ...], top: tuple[int, ...]) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum", sparse=True) for n in sizes)
        self.bottom = nn.Sequential(
            *itertools.chain.from_iterable(
                (nn.Linear(m, n), nn.ReLU()) for m, n in zip((13, *bottom[:-1]), bottom, strict=True)
            )
        )
        k = len(sizes) + 1
        width = k * (k - 1) // 2 + dim
        layers: list[nn.Module] = []
        for i, (m, n) in enumerate(zip((width, *top[:-1]), top, strict=True)):
            layers += [nn.Linear(m, n)] + ([nn.ReLU()] if i < len(top) - 1 else [])
        self.top = nn.Sequential(*layers)
        self.li, self.lj = torch.tril_indices(k, k, offset=-1)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        offsets = torch.arange(sparse.shape[0])
        ly = [t(sparse[:, f].contiguous(), offsets) for f, t in enumerate(self.tables)]
        t = torch.stack([x, *ly], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def plain_dlrm(w) -> tuple[PlainDLRM, torch.optim.Optimizer]:
    """The plain DLRM of the workload's sizes and Adagrad with the recipe's two learning rates."""
    c, r = w.model_config, w.recipe
    model = PlainDLRM(c.table_sizes, c.embedding_dim, c.bottom_mlp, c.top_mlp)
    tables = [t.weight for t in model.tables]
    dense = [p for p in model.parameters() if all(p is not t for t in tables)]
    groups = [{"params": tables}, {"params": dense, "lr": r.dense_learning_rate}]
    return model, torch.optim.Adagrad(groups, lr=r.opt_base_learning_rate)


def dlrm_pair() -> Pair:
    w = workload("dlrm")
    next_batch = cached(w, 64)
    seed_everything(0)
    stepper = stepper_for(w, w.parallelize(w.build_model()))
    ours = stepping(lambda b: stepper.step([b]), next_batch, lambda b: len(b[2]))
    model, opt = plain_dlrm(w)
    loss = lambda m, b: F.binary_cross_entropy_with_logits(m(b[0], b[1]), b[2])  # noqa: E731
    peer = stepping(plain_step(model, opt, None, loss), next_batch, lambda b: len(b[2]))
    return Pair(
        "samples/s", f"{w.global_batch_size} samples", ours, peer, "plain DLRM, 26 nn.EmbeddingBag", close=w.close
    )


# --- unet3d: MONAI ------------------------------------------------------------------------------------------
def monai_unet() -> nn.Module:
    from monai.networks.nets import BasicUNet

    # two 3x3x3 convolutions per level, instance norm, four down-samplings: the mini U-Net's shape
    return BasicUNet(spatial_dims=3, in_channels=1, out_channels=3, features=(8, 16, 32, 64, 64, 8))


def monai_step(w, model: nn.Module) -> Callable[[Any], None]:
    """MONAI's DiceCELoss and Adam at the recipe's rate in a plain loop."""
    from monai.losses import DiceCELoss

    opt = torch.optim.Adam(model.parameters(), lr=w.recipe.opt_base_learning_rate)
    dice_ce = DiceCELoss(include_background=False, to_onehot_y=True, softmax=True)
    return plain_step(model, opt, None, lambda m, b: dice_ce(m(b[0]), b[1].long()))


def unet3d_pair() -> Pair:
    w = workload("unet3d")
    next_batch = cached(w)
    seed_everything(0)
    stepper = stepper_for(w, w.build_model())
    ours = stepping(lambda b: stepper.step([b]), next_batch, lambda b: len(b[0]))
    seed_everything(0)
    peer = stepping(monai_step(w, monai_unet()), next_batch, lambda b: len(b[0]))
    batch = f"{w.local_batch_size} patches {'x'.join(map(str, w.train_patch))}"
    return Pair("samples/s", batch, ours, peer, "MONAI BasicUNet + DiceCELoss, plain loop", close=w.close)


# --- rnnt: torchaudio's RNN-T pieces ------------------------------------------------------------------------
def audio_seconds(batch) -> float:
    """Seconds of audio in an rnnt batch: its stacked feature frames of 30 ms."""
    from trainperf.workloads.rnnt import data

    return float(batch[1].sum()) * data.WINDOW_STRIDE * data.FRAME_SUBSAMPLING


def torchaudio_rnnt(c) -> nn.Module:
    """``torchaudio.models.RNNT`` of the mini sizes: torchaudio's predictor, joiner and time reduction, with an
    LSTM transcriber (torchaudio's own transcriber is an Emformer)."""
    from torchaudio.models.rnnt import RNNT, _Joiner, _Predictor, _TimeReduction, _Transcriber

    class LSTMTranscriber(_Transcriber, nn.Module):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self.pre = nn.LSTM(c.in_features, c.enc_n_hid, c.enc_pre_rnn_layers, batch_first=True)
            self.reduce = _TimeReduction(c.enc_stack_time_factor)
            self.post = nn.LSTM(
                c.enc_n_hid * c.enc_stack_time_factor, c.enc_n_hid, c.enc_post_rnn_layers, batch_first=True
            )
            self.out = nn.Linear(c.enc_n_hid, c.joint_n_hid)
            self.dropout = nn.Dropout(c.enc_dropout)

        def forward(self, input, lengths):
            x, _ = self.pre(input)
            x, lengths = self.reduce(self.dropout(x), lengths)
            x, _ = self.post(x)
            return self.out(self.dropout(x)), lengths

        def infer(self, input, lengths, states):
            raise NotImplementedError("training only")

    predictor = _Predictor(
        c.n_classes, c.joint_n_hid, c.pred_n_hid, c.pred_rnn_layers, c.pred_n_hid, lstm_dropout=c.pred_dropout
    )
    return RNNT(LSTMTranscriber(), predictor, _Joiner(c.joint_n_hid, c.n_classes, activation="relu"))


def torchaudio_loss(blank: int):
    from torchaudio.functional import rnnt_loss

    def loss(model: nn.Module, b) -> torch.Tensor:
        feats, lengths, tokens, token_lengths = b
        # torchaudio's predictor takes the start symbol (the blank) as its first input
        targets = F.pad(tokens.long(), (1, 0), value=blank)
        logits, src_len, _, _ = model(feats, lengths, targets, token_lengths + 1)
        return rnnt_loss(logits, tokens.int(), src_len.int(), token_lengths.int(), blank=blank)

    return loss


def rnnt_pair() -> Pair:
    from timm.optim import Lamb

    w = workload("rnnt")
    next_batch = cached(w)
    seed_everything(0)
    stepper = stepper_for(w, w.build_model())
    ours = stepping(lambda b: stepper.step([b]), next_batch, audio_seconds)
    c, r = w.model_config, w.recipe
    seed_everything(0)
    model = torchaudio_rnnt(c)
    opt = Lamb(model.parameters(), lr=r.opt_base_learning_rate, eps=1e-9, weight_decay=1e-3, max_grad_norm=None)
    step = plain_step(model, opt, None, torchaudio_loss(c.n_classes - 1), r.clip_grad_norm)
    peer = stepping(step, next_batch, audio_seconds)
    return Pair("audio-s/s", f"{w.local_batch_size} utterances", ours, peer,
                "torchaudio RNNT pieces + rnnt_loss, plain loop", close=w.close)  # fmt: skip


# --- minigo: one game at a time -----------------------------------------------------------------------------
def minigo_pair() -> Pair:
    from trainperf.workloads.minigo import mcts

    w = workload("minigo")  # prepare() starts the self-play workers, as a run's initialization does
    r = w.recipe
    seed_everything(0)
    model = w.build_model()
    generation = itertools.count(1)

    def ours(games: int) -> float:
        w.recipe = dataclasses.replace(r, min_selfplay_games_per_generation=games)
        next(iter(w.generation_batches(model, next(generation))))  # self-play happens before the first batch
        return float(len(w.window[-1].outcome))

    evaluate = mcts.network_evaluator(model.eval())
    seeds = itertools.count(10_000)

    def peer(games: int) -> float:
        positions = 0
        for _ in range(max(1, games // 4)):
            g = mcts.self_play(evaluate, games=1, size=w.size, komi=r.komi, cfg=w.search_cfg, seed=next(seeds),
                               temperature_moves=r.temperature_moves)  # fmt: skip
            positions += len(g.outcome)
        return float(positions)

    return Pair("positions/s", f"{w.size}x{w.size}, {r.num_readouts} readouts", ours, peer,
                "one game at a time, one position per network call", close=w.close)  # fmt: skip


BUILDERS: dict[str, Callable[[], Pair]] = {
    "resnet": resnet_pair,
    "ssd": lambda: detection_pair("ssd"),
    "maskrcnn": lambda: detection_pair("maskrcnn"),
    "unet3d": unet3d_pair,
    "rnnt": rnnt_pair,
    "bert": bert_pair,
    "dlrm": dlrm_pair,
    "minigo": minigo_pair,
    "llama31_8b": llama_pair,
    "gpt_oss_20b": gpt_oss_pair,
    "deepseekv3_671b": deepseek_pair,
    "llama2_70b_lora": lora_pair,
    "flux1": flux_pair,
}


def measure(key: str, steps: int, repeats: int, profile: int = 0) -> dict[str, Any]:
    """Build the pair, warm each side up, then alternate timed repetitions; medians and their ratio. With
    ``profile``, first print each side's ``profile`` costliest operators over ``steps`` steps (torch.profiler)."""
    with torch_state(registry.workload_class(key).TORCH_STATE):
        pair = BUILDERS[key]()
        try:
            for side in (pair.ours, pair.peer):
                side(1)  # warm-up, untimed
            for name, side in (("trainperf", pair.ours), ("peer", pair.peer)) if profile else ():
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    side(steps)
                print(f"--- {key}, {name}: {steps} steps, top {profile} operators by self CPU time", file=sys.stderr)
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=profile), file=sys.stderr)
            for _ in range(repeats):
                for name, side in (("trainperf", pair.ours), ("peer", pair.peer)):
                    t = time.perf_counter()
                    work = side(steps)
                    pair.runs[name].append(work / (time.perf_counter() - t))
        finally:
            pair.close()
    med = {name: statistics.median(v) for name, v in pair.runs.items()}
    return {
        "unit": pair.unit,
        "batch": pair.batch,
        "steps": steps,
        "peer_name": pair.peer_name,
        "note": pair.note,
        "trainperf": {"median": med["trainperf"], "runs": pair.runs["trainperf"]},
        "peer": {"median": med["peer"], "runs": pair.runs["peer"]},
        "ratio": med["trainperf"] / med["peer"],
    }


def table(results: dict[str, dict[str, Any]], repeats: int) -> str:
    lines = [
        f"trainperf{' --compile' if COMPILE['on'] else ''} ({PRECISION['trainperf']}) beside a straightforward peer "
        f"({PRECISION['peer']}), mini scale, CPU {torch.get_num_threads()} threads, median of {repeats}",
        f"{'workload':9s} {'unit':12s} {'trainperf':>10s} {'peer':>10s} {'ratio':>6s}  batch; peer",
    ]
    for key, r in results.items():
        lines.append(
            f"{key:9s} {r['unit']:12s} {r['trainperf']['median']:10.1f} {r['peer']['median']:10.1f} "
            f"{r['ratio']:6.2f}  {r['batch']}; {r['peer_name']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("keys", nargs="*", metavar="KEY", help=f"benchmarks to measure (default: all of {', '.join(KEYS)})")
    p.add_argument("--steps", type=int, help="timed steps per repetition (minigo: games); default per workload")
    p.add_argument("--repeats", type=int, default=3, help="alternating repetitions per side (default 3)")
    p.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    p.add_argument(
        "--profile", type=int, default=0, metavar="N", help="first print each side's N costliest operators (stderr)"
    )
    p.add_argument("--compile", action="store_true", help="trainperf's side with the --compile switch")
    p.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="trainperf's side under this autocast, as `trainperf run --precision` sets it (default fp32)",
    )
    p.add_argument(
        "--peer-precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="the peer's loss under this autocast (torch.autocast around its forward; default fp32)",
    )
    a = p.parse_args(argv)
    COMPILE["on"] = a.compile
    PRECISION["trainperf"], PRECISION["peer"] = a.precision, a.peer_precision
    unknown = [k for k in a.keys if k not in KEYS]
    if unknown or (a.steps is not None and a.steps < 1) or a.repeats < 1:
        p.error(
            f"unknown benchmark {unknown[0]!r}; one of {', '.join(KEYS)}"
            if unknown
            else "--steps and --repeats must be >= 1"
        )
    torch.set_num_threads(min(2, torch.get_num_threads()))
    results = {}
    for key in a.keys or KEYS:
        results[key] = measure(key, a.steps or DEFAULT_STEPS[key], a.repeats, a.profile)
        print(
            f"  {key}: trainperf {results[key]['trainperf']['runs']}, peer {results[key]['peer']['runs']}",
            file=sys.stderr,
        )
    print(table(results, a.repeats))
    if a.json:
        doc = {
            "repeats": a.repeats,
            "threads": torch.get_num_threads(),
            "compile": a.compile,
            "precision": dict(PRECISION),
            "workloads": results,
        }
        tmp = a.json.with_name(a.json.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
