"""The Hugging Face transformers peers of the LLM decoders (used by ``benchmarks/peers.py``): each built from the
workload's own :class:`~trainperf.workloads.common.llm.model.DecoderArgs`, so that both sides have the same sizes.

- llama31_8b: ``LlamaForCausalLM`` (its default attention, ``sdpa``).
- gpt_oss_20b: ``GptOssForCausalLM``, transformers' own GPT-OSS, with eager attention (GPT-OSS's attention sinks
  are not in PyTorch's ``scaled_dot_product_attention``, so transformers offers it no ``sdpa``; eager is what a
  plain CPU install runs) and its default experts implementation. The sizes are the decoder's: width, layers, query
  and key/value heads and their width, experts, their width, top-k, the sliding window and the layers it is on,
  vocabulary, RoPE base, norm epsilon, untied output, no attention biases (as trainperf's decoder and the reference
  run have none). What transformers' GPT-OSS has and trainperf's decoder has not, and the peer keeps (it is that
  architecture): a learned sink logit per head, biases on the router and the experts, and the clamped SwiGLU
  ``(up + 1) * gate * sigmoid(1.702 gate)``; a few hundred parameters more and a few elementwise operations per
  expert, against the same matrix products.
"""

from __future__ import annotations

import torch
from torch import nn


def hf_llama(args) -> nn.Module:
    """transformers' LlamaForCausalLM of the decoder's configuration."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=args.vocab_size, hidden_size=args.dim, intermediate_size=args.ffn_dim,
        num_hidden_layers=args.n_layers, num_attention_heads=args.n_heads, num_key_value_heads=args.n_kv_heads,
        max_position_embeddings=args.max_seq_len, rms_norm_eps=args.norm_eps, rope_theta=args.rope_theta,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False, initializer_range=args.init_std,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def gpt_oss_config(args):
    """transformers' ``GptOssConfig`` of a mixture-of-experts decoder's sizes (see the module's docstring)."""
    import transformers

    moe = args.moe
    if moe is None or moe.score_function != "softmax" or moe.pre_softmax or moe.n_shared_experts:
        raise ValueError("peers: GptOssForCausalLM routes by a softmax over the top-k logits, with no shared expert")
    # trainperf's window lets a position see itself and the ``sliding_window`` positions before it; transformers'
    # lets it see ``sliding_window`` positions in all (kv_idx > q_idx - sliding_window): one more for the same span
    window = (args.sliding_window or args.max_seq_len) + 1
    layer_types = ["sliding_attention" if args.window(i) else "full_attention" for i in range(args.n_layers)]
    return transformers.GptOssConfig(
        vocab_size=args.vocab_size, hidden_size=args.dim, intermediate_size=moe.expert_ffn_dim,
        num_hidden_layers=args.n_layers, num_attention_heads=args.n_heads, num_key_value_heads=args.n_kv_heads,
        head_dim=args.head_dim, num_local_experts=moe.n_experts, num_experts_per_tok=moe.top_k,
        sliding_window=window, layer_types=layer_types, max_position_embeddings=args.max_seq_len,
        rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta}, rms_norm_eps=args.norm_eps,
        initializer_range=args.init_std, attention_bias=False, tie_word_embeddings=False, router_aux_loss_coef=0.0,
        output_router_logits=False, attn_implementation="eager",
    )  # fmt: skip


def hf_gpt_oss(args) -> nn.Module:
    """transformers' GptOssForCausalLM of the decoder's configuration, in fp32."""
    import transformers

    return transformers.GptOssForCausalLM(gpt_oss_config(args)).to(torch.float32)


def hf_causal_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """The way its users train it: the sample as input and as labels (the model shifts them itself, so it scores
    the same next tokens as trainperf's loss, reading one position more)."""
    return model(input_ids=batch, labels=batch, use_cache=False).loss
