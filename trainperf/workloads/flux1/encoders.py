"""The raw route's frozen encoders, from folders the user provides (never downloaded, never unpickled): T5's encoder
and CLIP's text model through ``transformers``, FLUX's autoencoder through ``diffusers``, each loaded with
``from_pretrained(folder, local_files_only=True, use_safetensors=True)``; their configurations checked against the
transformer's input widths before anything is loaded.

``<data-dir>/flux1/reference/encoders/``::

    t5/           config.json, model.safetensors (or its shards and index), tokenizer.json or spiece.model
    clip/         config.json, model.safetensors, tokenizer.json or vocab.json + merges.txt
    autoencoder/  config.json, diffusion_pytorch_model.safetensors (diffusers' AutoencoderKL)

The reference (torchtitan experiments/flux, ``scripts/download_encoders.py``) takes google/t5-v1_1-xxl, the text
model of openai/clip-vit-large-patch14 and FLUX.1-schnell's ``ae.safetensors`` (Black Forest Labs' layout);
FLUX.1-schnell's repository also holds them as safetensors in the layout read here: ``text_encoder_2/`` with
``tokenizer_2/`` (T5), ``text_encoder/`` with ``tokenizer/`` (CLIP) and ``vae/`` (the autoencoder).

What each does is the reference's (``model/hf_embedder.py``, ``dataset/tokenizer.py``, ``utils.py``
``preprocess_data``, ``model/autoencoder_utils.py`` ``encode_with_mean_logvar``): a caption tokenized to T5's 256
tokens and CLIP's 77 (padded to the length, truncated past it), each encoder run with no attention mask, T5's last
hidden state and CLIP's pooled output kept; an image scaled to [-1, 1] and the autoencoder's encoder output split
into the posterior's mean and log-variance, from which ``flow.latent`` draws x_0 as on the preprocessed route.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from trainperf.errors import DataError
from trainperf.workloads.flux1 import flow

T5_LEN, CLIP_LEN = 256, 77  # flux_schnell_mlperf.toml max_t5_encoding_len; tokenizer.py: CLIP's 77
T5, CLIP, AUTOENCODER = "t5", "clip", "autoencoder"
FROM = {
    T5: "FLUX.1-schnell's text_encoder_2/ and tokenizer_2/ files (T5-v1.1-XXL's encoder)",
    CLIP: "FLUX.1-schnell's text_encoder/ and tokenizer/ files (CLIP ViT-L/14's text model)",
    AUTOENCODER: "FLUX.1-schnell's vae/ files (diffusers' AutoencoderKL)",
}
WEIGHTS = {T5: "model.safetensors", CLIP: "model.safetensors", AUTOENCODER: "diffusion_pytorch_model.safetensors"}
TOKENIZER_FILES = {  # any one set of files a folder's tokenizer loads from
    T5: (("tokenizer.json",), ("spiece.model",)),
    CLIP: (("tokenizer.json",), ("vocab.json", "merges.txt")),
}
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class Folders:
    t5: Path
    clip: Path
    autoencoder: Path


def _missing(folder: Path, name: str, what: str) -> DataError:
    return DataError(
        f"{folder / what}: missing; encoders/{name} holds {FROM[name]}, as safetensors (trainperf loads no pickled "
        f".bin weights and downloads nothing)"
    )


def folders(root: Path) -> Folders:
    """The three encoder folders under ``root`` (``encoders/``), each file they need present."""
    found = Folders(root / T5, root / CLIP, root / AUTOENCODER)
    for name, folder in ((T5, found.t5), (CLIP, found.clip), (AUTOENCODER, found.autoencoder)):
        if not (folder / "config.json").is_file():
            raise _missing(folder, name, "config.json")
        weights = WEIGHTS[name]
        if not (folder / weights).is_file() and not (folder / f"{weights}.index.json").is_file():
            raise _missing(folder, name, weights)
        options = TOKENIZER_FILES.get(name, ())
        if options and not any(all((folder / f).is_file() for f in files) for files in options):
            raise _missing(folder, name, " or ".join(" + ".join(files) for files in options))
    return found


def _config(folder: Path) -> dict:
    path = folder / "config.json"
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise DataError(f"{path}: {path.stat().st_size} bytes; a model's config.json is a few kB")
    try:
        config = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: not JSON ({e})") from None
    if not isinstance(config, dict):
        raise DataError(f"{path}: not a model configuration (a JSON object)")
    return config


def check(found: Folders, *, t5_dim: int, clip_dim: int, latent_channels: int, image_size: int) -> None:
    """Each encoder's configuration gives what the transformer reads (T5's width, CLIP's pooled width, the
    autoencoder's latent channels, an even latent side, FLUX's scale and shift where the config names them): checked
    before the clock, each mismatch naming the file, the field and what the reference's flavour needs."""
    t5 = _config(found.t5)
    clip = _config(found.clip)
    clip = clip.get("text_config", clip) if clip.get("model_type") == "clip" else clip  # a whole CLIP's config
    ae = _config(found.autoencoder)
    blocks = ae.get("block_out_channels", [64])
    side = image_size / 2 ** (len(blocks) - 1) if isinstance(blocks, list) and blocks else 0
    flavour, positions = "the transformer's flavour needs", min(clip.get("max_position_embeddings", 77), CLIP_LEN)
    wants = [  # (folder, field, its value or transformers' and diffusers' default, what it must be, who needs it)
        (found.t5, "d_model", t5.get("d_model", 512), t5_dim, flavour),
        (found.clip, "hidden_size", clip.get("hidden_size", 512), clip_dim, flavour),
        (found.clip, "max_position_embeddings", positions, CLIP_LEN, "the reference's CLIP tokens need"),
        (found.autoencoder, "latent_channels", ae.get("latent_channels", 4), latent_channels, flavour),
        (found.autoencoder, "in_channels", ae.get("in_channels", 3), 3, "RGB images need"),
    ]
    for folder, field, got, want, who in wants:
        if got != want:
            raise DataError(f"{folder / 'config.json'}: {field} {got}, {who} {want} ({FROM[folder.name]})")
    if side % 2 or side < 2:
        raise DataError(
            f"{found.autoencoder / 'config.json'}: block_out_channels {blocks} downsample {image_size} x {image_size} "
            f"images to a latent side of {side}; the transformer's 2x2 patches need an even side (FLUX's: 32)"
        )
    for field, want in (("scaling_factor", flow.AE_SCALE), ("shift_factor", flow.AE_SHIFT)):
        got = ae.get(field)
        if got is not None and not (isinstance(got, (int, float)) and abs(got - want) < 1e-6):
            raise DataError(
                f"{found.autoencoder / 'config.json'}: {field} {got}; FLUX.1's autoencoder has {want} "
                "(flux_schnell_mlperf.toml [encoder]), which the latents are scaled by"
            )


@contextmanager
def quietly() -> Iterator[None]:
    """transformers' and diffusers' progress bars off while files are read or written (each put back as it was)."""
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    was = [(m, m.is_progress_bar_enabled()) for m in (transformers_logging, diffusers_logging)]
    for m, _ in was:
        m.disable_progress_bar()
    try:
        yield
    finally:
        for m, on in was:
            if on:
                m.enable_progress_bar()


def _load(folder: Path, load, **kwargs):
    """``load(folder, **kwargs)``, its failure a DataError naming the folder and what it should hold."""
    try:
        return load(str(folder), **kwargs)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise DataError(f"{folder}: did not load ({e}); it should hold {FROM[folder.name]}") from None


class Encoders:
    """The tokenizers and the three frozen encoders on ``device`` in ``dtype`` (the reference's: bf16 on a GPU)."""

    def __init__(self, found: Folders, device: torch.device, dtype: torch.dtype) -> None:
        from diffusers import AutoencoderKL
        from transformers import CLIPTextModel, CLIPTokenizer, T5EncoderModel, T5Tokenizer

        local = {"local_files_only": True}
        weights = {**local, "use_safetensors": True}
        with quietly():
            self.t5_tokenizer = _load(found.t5, T5Tokenizer.from_pretrained, **local)
            self.clip_tokenizer = _load(found.clip, CLIPTokenizer.from_pretrained, **local)
            self.t5 = _load(found.t5, T5EncoderModel.from_pretrained, dtype=dtype, **weights)
            self.clip = _load(found.clip, CLIPTextModel.from_pretrained, dtype=dtype, **weights)
            self.autoencoder = _load(found.autoencoder, AutoencoderKL.from_pretrained, torch_dtype=dtype, **weights)
        for name, tok, model in ((T5, self.t5_tokenizer, self.t5), (CLIP, self.clip_tokenizer, self.clip)):
            if len(tok) > model.config.vocab_size:
                raise DataError(
                    f"{getattr(found, name)}: the tokenizer has {len(tok)} tokens, the model's vocab_size "
                    f"{model.config.vocab_size}; the tokenizer files are another model's"
                )
        for m in (self.t5, self.clip, self.autoencoder):
            m.to(device).eval().requires_grad_(False)
        self.device, self.dtype = device, dtype
        self._lock = threading.Lock()  # a tokenizer is not safe for two threads (batches are read ahead)

    def tokens(self, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(T5 ids (B, 256), CLIP ids (B, 77)): padded to the length, truncated past it."""
        pad = {"truncation": True, "padding": "max_length", "return_tensors": "pt"}
        with self._lock:
            t5 = self.t5_tokenizer(captions, max_length=T5_LEN, **pad)["input_ids"]
            clip = self.clip_tokenizer(captions, max_length=CLIP_LEN, **pad)["input_ids"]
        return t5, clip

    @torch.no_grad()
    def text(self, t5_ids: torch.Tensor, clip_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """T5's last hidden state and CLIP's pooled output, in bf16 (the preprocessed route's stored dtype)."""
        t5 = self.t5(input_ids=t5_ids.to(self.device), attention_mask=None).last_hidden_state
        clip = self.clip(input_ids=clip_ids.to(self.device), attention_mask=None).pooler_output
        return t5.to(torch.bfloat16), clip.to(torch.bfloat16)

    @torch.no_grad()
    def posterior(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The autoencoder's posterior of uint8 images (B, 3, H, W): its encoder's output split into mean and
        log-variance (not clamped: the reference's ``encode_with_mean_logvar``), in bf16."""
        x = (images.to(self.device).float() / 255.0 * 2.0 - 1.0).to(self.dtype)
        ae = self.autoencoder
        moments = ae.encoder(x)
        if ae.quant_conv is not None:  # FLUX's has none (use_quant_conv false); diffusers' default has one
            moments = ae.quant_conv(moments)
        mean, logvar = moments.chunk(2, dim=1)
        return mean.to(torch.bfloat16), logvar.to(torch.bfloat16)

    def encode(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A raw batch (``image``, ``t5_ids``, ``clip_ids``) as the preprocessed route's (``t5``, ``clip``, ``mean``,
        ``logvar``), ``timestep`` kept."""
        t5, clip = self.text(batch["t5_ids"], batch["clip_ids"])
        mean, logvar = self.posterior(batch["image"])
        out = {"t5": t5, "clip": clip, "mean": mean, "logvar": logvar}
        return out | ({"timestep": batch["timestep"]} if "timestep" in batch else {})

    def empty(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The empty caption's encodings (T5 256 x width, CLIP width), float32 on the CPU: what text dropout puts in
        place of a caption's (the reference encodes the empty caption's tokens with the same encoders)."""
        t5, clip = self.text(*self.tokens([""]))
        return t5[0].float().cpu(), clip[0].float().cpu()
