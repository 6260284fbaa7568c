"""The reference's rectified-flow training and validation arithmetic (torchtitan ``experiments/flux``: train.py,
utils.py, model/autoencoder_utils.py), each step a small function so that the tests can check it by hand.

A sample's autoencoder latent is drawn from the stored posterior (mean + exp(logvar / 2) x eps), shifted and scaled
into the model's range, noised to ``x_t = (1 - t) x_0 + t noise`` at a timestep t (uniform in [0, 1) in training;
k/8 for a validation sample of timestep k), cut into 2x2 patches, and the transformer predicts the velocity
``noise - x_0``; the loss is the mean squared error.
"""

from __future__ import annotations

import torch

AE_SHIFT, AE_SCALE = 0.1159, 0.3611  # FLUX.1's autoencoder (flux_schnell_mlperf_preprocessed.toml [encoder])
PATCH = 2  # 2x2 latent patches: 16 channels -> 64 features a token
VALIDATION_TIMESTEPS = 8  # a validation sample's timestep index k in 0..7 stands for t = k / 8


def latent(
    mean: torch.Tensor, logvar: torch.Tensor, eps: torch.Tensor, shift: float = AE_SHIFT, scale: float = AE_SCALE
) -> torch.Tensor:
    """The model's clean latent x_0: a draw from the stored posterior, shifted and scaled as the reference does
    (``(mean + exp(logvar / 2) eps - shift) x scale``; the mini's autoencoder has its own shift and scale)."""
    return (mean + torch.exp(0.5 * logvar) * eps - shift) * scale


def noised(x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """x_t = (1 - t) x_0 + t noise, with t one value a sample."""
    sigma = t.view(-1, *([1] * (x0.ndim - 1))).to(x0.dtype)
    return (1 - sigma) * x0 + sigma * noise


def velocity(x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The target the transformer predicts: noise - x_0."""
    return noise - x0


def pack(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) latents -> (B, H/2 x W/2, C x 2 x 2) tokens, row-major patches, features (c, ph, pw)."""
    b, c, h, w = x.shape
    x = x.reshape(b, c, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // PATCH) * (w // PATCH), c * PATCH * PATCH)


def unpack(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """The inverse of :func:`pack` for latents of ``height`` x ``width``."""
    b, _, f = x.shape
    c, h, w = f // (PATCH * PATCH), height // PATCH, width // PATCH
    return x.reshape(b, h, w, c, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5).reshape(b, c, height, width)


def image_ids(height: int, width: int) -> torch.Tensor:
    """The RoPE positions of the packed latent tokens: (0, row, column) for each 2x2 patch."""
    h, w = height // PATCH, width // PATCH
    ids = torch.zeros(h, w, 3)
    ids[..., 1] = torch.arange(h)[:, None]
    ids[..., 2] = torch.arange(w)[None, :]
    return ids.reshape(h * w, 3)


def text_ids(length: int) -> torch.Tensor:
    """The T5 tokens' positions: all zero (RoPE leaves text unrotated)."""
    return torch.zeros(length, 3)


def predict(model: torch.nn.Module, xt: torch.Tensor, t: torch.Tensor, t5: torch.Tensor, clip: torch.Tensor):
    """The transformer's velocity for noised latents ``xt`` (B, C, H, W) at timesteps ``t`` (B,), unpacked."""
    height, width = xt.shape[-2:]
    out = model(
        hidden_states=pack(xt),
        encoder_hidden_states=t5,
        pooled_projections=clip,
        timestep=t,
        img_ids=image_ids(height, width).to(xt.device, xt.dtype),
        txt_ids=text_ids(t5.shape[1]).to(xt.device, xt.dtype),
        return_dict=False,
    )[0]
    return unpack(out, height, width)


def sample_losses(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Each sample's mean squared error, in fp32 (the reference's ``mse_loss(pred.float(), target.float())``)."""
    return (pred.float() - target.float()).pow(2).flatten(1).mean(1)


def validation_loss(sums: torch.Tensor, counts: torch.Tensor) -> float:
    """The quality metric (reference README, "Quality metric"): the mean over the 8 timesteps of each timestep's mean
    loss. ``sums[k]`` and ``counts[k]``: summed loss and samples of timestep index k."""
    if counts.shape != (VALIDATION_TIMESTEPS,) or not bool((counts > 0).all()):
        raise ValueError(f"flux1: validation samples per timestep {counts.tolist()}; every timestep 0..7 needs some")
    return float((sums.double() / counts.double()).mean())
