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
- deepseekv3_671b: ``DeepseekV3ForCausalLM``, transformers' own DeepSeek-V3, with its default attention (``sdpa``) and
  experts (``grouped_mm``). The sizes are the decoder's: width, layers, heads, multi-head latent attention's query and
  key/value ranks, its per-head query/key dimensions without and with rotation and its value width (the rotary pairs
  interleaved, as DeepSeek-V3's weights lay them out and trainperf de-interleaves them), the dense first layers and
  their SwiGLU width, the routed experts, their width, top-k, the shared experts, sigmoid scores with the chosen
  weights normalized and scaled (``routed_scaling_factor``), the groups and the groups kept, vocabulary, RoPE base
  (YaRN's parameters where the flavour has them), norm epsilon, untied output, no attention biases; the parameters
  are the same tensors, their count equal. Where it differs from trainperf's decoder, and why the peer keeps it (it
  is transformers' DeepSeek-V3 as its users train it):
  - balancing: transformers trains neither of DeepSeek-V3's mechanisms. Its ``e_score_correction_bias`` is a buffer
    added to the scores for the choice, as trainperf's, but nothing moves it during training (it is read from a
    checkpoint); it stays 0. It computes no sequence auxiliary loss. trainperf's side does both (a bias update after
    each optimizer step; the per-sequence loss x 0.01 in each MoE layer's backward): more work on trainperf's side,
    none of it a matrix product.
  - a group's score: transformers' router ranks the groups by the sum of each group's 2 best scores (fixed, as
    DeepSeek-V3's own code), Megatron-Core and trainperf by its ``top_k / group_top_k`` best: the same for the 671B
    (8 / 4), the best 1 for the mini (2 / 2). The mini's peer may keep other groups, so choose other experts; the
    work is the same (one small top-k per group either way; every token still reaches ``top_k`` experts).
  - the latent norms' epsilon: transformers' ``q_a_layernorm`` and ``kv_a_layernorm`` keep 1e-6 whatever the
    configuration says; trainperf's use the decoder's ``norm_eps`` (DeepSeek-V3's and the mini's: 1e-6, the same).
  - initialization: transformers' (one standard deviation for every matrix) against trainperf's (its residual
    writers scaled); trainperf's mini side continues from its starting checkpoint, the peer starts from random
    weights. Speed does not depend on the values (dropless routing: every token reaches ``top_k`` experts either
    way; only how the tokens split among the experts differs).
  Not expressible, refused with an error naming what: a decoder without latent attention or experts, softmax scores,
  no shared expert, groups of one expert, Llama 3.1's frequency adjustment, a sliding window, or multi-token
  prediction (transformers' ``DeepseekV3ForCausalLM`` builds no prediction layer for training: its
  ``num_mtp_layers`` serve generation only). The mini has none of these (its README: no prediction layer, no YaRN).
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


def inexpressible(args) -> list[str]:
    """What a decoder has that transformers' DeepSeek-V3 cannot express (empty: nothing)."""
    from trainperf.workloads.common.llm.rope import YarnScaling

    m, moe = args.mla, args.moe
    found = []
    if m is None:
        found.append("no multi-head latent attention (DecoderArgs.mla)")
    if moe is None:
        found.append("no mixture of experts (DecoderArgs.moe)")
    else:
        if moe.score_function != "sigmoid":
            found.append(f"{moe.score_function} scores (transformers' router takes sigmoids)")
        if moe.n_shared_experts < 1:
            found.append("no shared expert (transformers' MoE layer always has one)")
        if moe.n_groups > 1 and moe.n_experts // moe.n_groups < 2:
            found.append("groups of one expert (transformers scores a group by its 2 best)")
    if args.rope_scaling is not None and not isinstance(args.rope_scaling, YarnScaling):
        found.append("a rotary scaling other than YaRN")
    if args.sliding_window is not None and any(args.window_layers):
        found.append("a sliding window")
    if args.mtp_layers:
        found.append(f"{args.mtp_layers} multi-token prediction layer(s) (DeepseekV3ForCausalLM trains none)")
    return found


def deepseek_config(args):
    """transformers' ``DeepseekV3Config`` of a latent-attention mixture-of-experts decoder's sizes (see the module's
    docstring); a ValueError names what the decoder has that transformers' DeepSeek-V3 cannot express."""
    import transformers

    from trainperf.workloads.common.llm.rope import YarnScaling

    refused = inexpressible(args)
    if refused:
        raise ValueError(
            f"peers: transformers' DeepseekV3ForCausalLM cannot express this decoder: {'; '.join(refused)}"
        )
    m, moe = args.mla, args.moe
    rope: dict = {"rope_type": "default", "rope_theta": args.rope_theta}
    if isinstance(y := args.rope_scaling, YarnScaling):
        rope.update(rope_type="yarn", factor=y.factor, original_max_position_embeddings=y.original_max_position)
        rope.update(beta_fast=y.beta_fast, beta_slow=y.beta_slow, mscale=y.mscale, mscale_all_dim=y.mscale_all_dim)
    return transformers.DeepseekV3Config(
        vocab_size=args.vocab_size, hidden_size=args.dim, intermediate_size=args.ffn_dim,
        moe_intermediate_size=moe.expert_ffn_dim, num_hidden_layers=args.n_layers, num_attention_heads=args.n_heads,
        num_key_value_heads=args.n_heads, n_shared_experts=moe.n_shared_experts, n_routed_experts=moe.n_experts,
        routed_scaling_factor=moe.top_k_scaling, kv_lora_rank=m.kv_lora_rank, q_lora_rank=m.q_lora_rank,
        qk_rope_head_dim=m.rope_head_dim, v_head_dim=m.v_head_dim, qk_nope_head_dim=m.nope_head_dim,
        n_group=moe.n_groups, topk_group=moe.group_top_k, num_experts_per_tok=moe.top_k,
        first_k_dense_replace=args.dense_layers, norm_topk_prob=moe.top_k > 1, hidden_act="silu",
        max_position_embeddings=args.max_seq_len, initializer_range=args.init_std, rms_norm_eps=args.norm_eps,
        use_cache=False, tie_word_embeddings=False, rope_parameters=rope, rope_interleave=True, attention_bias=False,
        num_mtp_layers=0,
    )  # fmt: skip


def hf_deepseek(args) -> nn.Module:
    """transformers' DeepseekV3ForCausalLM of the decoder's configuration, in fp32."""
    import transformers

    return transformers.DeepseekV3ForCausalLM(deepseek_config(args)).to(torch.float32)


def hf_causal_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """The way its users train it: the sample as input and as labels (the model shifts them itself, so it scores
    the same next tokens as trainperf's loss, reading one position more)."""
    return model(input_ids=batch, labels=batch, use_cache=False).loss
