"""Training throughput of the mini rnnt workload in audio-seconds per second, beside peers in the same process.

    python benchmarks/rnnt_throughput.py [--steps 10] [--repeats 3]

Rows, on the same real mini batches (features computed once beforehand, so that every row times the same
work: forward, transducer loss, backward, clipping and the optimizer step):

- trainperf: the harness's step (``Stepper``) over the workload's ``loss`` (the mini RNN-T, torchaudio's
  ``rnnt_loss``, LAMB);
- plain loop: the same model, loss and LAMB in a hand-written loop (zero_grad, backward, clip, step);
- torchaudio Emformer RNN-T: torchaudio's own RNN-T building blocks (``emformer_rnnt_model``: an Emformer
  transcriber, LSTM predictor and joiner of similar width) trained the same way, a peer architecture;

and, apart, the data path of a training step as trainperf runs it: with the mini recipe (no speed perturbation,
no SpecAugment) the features of the first epoch, which later epochs reuse; with ``--set-augment`` the
reference's speed perturbation, features and SpecAugment, computed every epoch.
Each row is the median of ``repeats`` alternating repetitions of ``steps`` steps after warm-up (the machine is
shared and noisy); the ratio is trainperf's row over the plain loop's. (The mini RNN-T beside one of the same
sizes assembled from torchaudio's RNN-T pieces, with every other workload's peer: ``benchmarks/peers.py rnnt``.)
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import time

import torch
from peers import audio_seconds

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.harness.runner import RunObserver
from trainperf.harness.schedule import Schedule
from trainperf.harness.steps import Stepper
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig
from trainperf.workloads.rnnt import data


def timed(step, batches, steps: int) -> float:
    for b in batches[:2]:  # warm-up
        step(b)
    t = time.perf_counter()
    seconds = 0.0
    for b in itertools.islice(itertools.cycle(batches), steps):
        step(b)
        seconds += audio_seconds(b)
    return seconds / (time.perf_counter() - t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--set-augment",
        action="store_true",
        help="the data path with the reference's speed perturbation and SpecAugment",
    )
    a = p.parse_args()
    torch.set_num_threads(2)
    from timm.optim import Lamb
    from torchaudio.functional import rnnt_loss
    from torchaudio.models import emformer_rnnt_model

    spec, recipe = registry.get_spec("rnnt", "mini"), registry.default_recipe("rnnt", "mini")
    if a.set_augment:
        recipe = dataclasses.replace(
            recipe, data_speed_perturbaton_min=0.85, data_speed_perturbaton_max=1.15, data_spec_augment=True
        )
    w = registry.workload_class("rnnt")(
        spec, recipe, RunConfig(seed=0), data_dir=default_data_dir(), dist=DistContext()
    )
    w.prepare()
    w.load_data()
    it = w.train_batches()
    batches = [next(it) for _ in range(8)]

    torch.manual_seed(0)
    model = w.build_model()
    opt, sched = w.build_optimizer(model)
    stepper = Stepper(model, w, opt, sched, RunObserver(), Schedule.for_run(spec, w, dry_run_steps=1))

    torch.manual_seed(0)
    plain_model = w.build_model()
    plain_opt = Lamb(
        plain_model.parameters(), lr=recipe.opt_base_learning_rate, eps=1e-9, weight_decay=1e-3, max_grad_norm=None
    )
    blank = w.model_config.n_classes - 1

    def library_forward(m, feats, lengths, tokens):
        """The model's forward with the library's ReLU and dropout on the joint tensor (nn.ReLU, nn.Dropout)."""
        f, enc = m.encode(feats, lengths)
        start = torch.zeros(tokens.shape[0], 1, m.config.pred_n_hid)
        g, _ = m.dec_rnn(torch.cat([start, m.pred_embed(tokens)], dim=1).transpose(0, 1))
        return m.joint_net(m.joint_enc(f).unsqueeze(2) + m.joint_pred(g.transpose(0, 1)).unsqueeze(1)), enc

    def plain_step(b) -> None:
        feats, lengths, tokens, token_lengths = b
        plain_opt.zero_grad(set_to_none=True)
        logits, enc = library_forward(plain_model, feats, lengths, tokens.long())
        rnnt_loss(logits, tokens, enc.int(), token_lengths, blank=blank).backward()
        torch.nn.utils.clip_grad_norm_(plain_model.parameters(), recipe.clip_grad_norm)
        plain_opt.step()

    c = w.model_config
    peer = emformer_rnnt_model(
        input_dim=data.FEATURES, encoding_dim=c.joint_n_hid, num_symbols=c.n_classes, segment_length=16,
        right_context_length=4, time_reduction_input_dim=c.enc_n_hid, time_reduction_stride=c.enc_stack_time_factor,
        transformer_num_heads=4, transformer_ffn_dim=2 * c.enc_n_hid, transformer_num_layers=2,
        transformer_dropout=0.1, transformer_activation="gelu", transformer_left_context_length=30,
        transformer_max_memory_size=0, transformer_weight_init_scale_strategy="depthwise",
        transformer_tanh_on_mem=True, symbol_embedding_dim=c.pred_n_hid, num_lstm_layers=c.pred_rnn_layers,
        lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-5, lstm_dropout=0.1,
    )  # fmt: skip
    peer_opt = Lamb(
        peer.parameters(), lr=recipe.opt_base_learning_rate, eps=1e-9, weight_decay=1e-3, max_grad_norm=None
    )

    def peer_step(b) -> None:
        feats, lengths, tokens, token_lengths = b
        peer_opt.zero_grad(set_to_none=True)
        # torchaudio's RNN-T takes the start symbol as the first target (the blank), and right-context frames
        padded = torch.nn.functional.pad(feats, (0, 0, 0, 4))
        targets = torch.nn.functional.pad(tokens.long(), (1, 0), value=blank)
        logits, src_len, _, _ = peer(padded, lengths, targets, token_lengths + 1)
        rnnt_loss(logits, tokens, src_len.int(), token_lengths, blank=blank).backward()
        torch.nn.utils.clip_grad_norm_(peer.parameters(), recipe.clip_grad_norm)
        peer_opt.step()

    rows = {
        "trainperf (harness step, mini RNN-T)": lambda b: stepper.step([b]),
        "plain loop (same model, LAMB; torchaudio rnnt_loss)": plain_step,
        "torchaudio Emformer RNN-T (emformer_rnnt_model)": peer_step,
    }
    results: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(a.repeats):
        for name, step in rows.items():
            results[name].append(timed(step, batches, a.steps))
    t = time.perf_counter()
    made = [next(it) for _ in range(a.steps)]
    data_rate = sum(audio_seconds(b) for b in made) / (time.perf_counter() - t)
    params = {
        name: sum(p.numel() for p in m.parameters()) for name, m in zip(rows, (model, plain_model, peer), strict=True)
    }
    print(f"mini rnnt training throughput, CPU {torch.get_num_threads()} threads, batch {recipe.global_batch_size}")
    for name, values in results.items():
        print(
            f"  {name:50s} {statistics.median(values):7.1f} audio-s/s  ({params[name] / 1e6:.2f} M parameters; "
            f"runs: {', '.join(f'{v:.1f}' for v in values)})"
        )
    med = {name: statistics.median(v) for name, v in results.items()}
    names = list(rows)
    print(f"  ratio trainperf / plain loop: {med[names[0]] / med[names[1]]:.3f}")
    print(f"  ratio trainperf / torchaudio Emformer RNN-T: {med[names[0]] / med[names[2]]:.3f}")
    path = "speed perturbation, features, SpecAugment" if a.set_augment else "features of a first epoch"
    print(f"  data path ({path}): {data_rate:.1f} audio-s/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
