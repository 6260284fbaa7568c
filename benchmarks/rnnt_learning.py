"""How fast the mini RNN-T learns, outside the harness: a diagnosis loop over the workload's own parts.

    python benchmarks/rnnt_learning.py --n 32 --eval-on-train --steps 400 --every 50   # can it overfit?
    python benchmarks/rnnt_learning.py --minutes 4                                     # Adam 1e-3, all data
    python benchmarks/rnnt_learning.py --opt lamb --lr 0.02 --warmup 50 --minutes 2.5

The mini workload's model, features (``Featurizer`` without augmentation, computed once before the loop),
sentencepiece tokens and torchaudio's ``rnnt_loss``; shuffled batches (not the harness's bucketing), gradient
clipping at 1, a constant learning rate after ``--warmup`` linear steps. Every ``--every`` steps it prints the
training loss and the WER of greedy decoding (the workload's decoder and jiwer) on the evaluation utterances,
or with ``--eval-on-train`` on the training utterances it trains on. The figures are in the rnnt README
("What was tried").
"""

from __future__ import annotations

import argparse
import time

import jiwer
import numpy as np
import torch
from torchaudio.functional import rnnt_loss

from trainperf import registry
from trainperf.dist import DistContext
from trainperf.paths import default_data_dir
from trainperf.spec import RunConfig
from trainperf.workloads.rnnt import data
from trainperf.workloads.rnnt.model import greedy_decode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2880, help="training utterances (a seeded random subset)")
    p.add_argument("--opt", choices=("adam", "lamb"), default="adam")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=0, help="linear warm-up steps")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--every", type=int, default=100, help="evaluate every N steps")
    p.add_argument("--minutes", type=float, default=3.5, help="stop after this much time")
    p.add_argument("--eval-on-train", action="store_true", help="decode the training utterances instead")
    p.add_argument("--data-dir", default=default_data_dir())
    a = p.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    spec, recipe = registry.get_spec("rnnt", "mini"), registry.default_recipe("rnnt", "mini")
    w = registry.workload_class("rnnt")(spec, recipe, RunConfig(seed=1), data_dir=a.data_dir, dist=DistContext())
    w.prepare()
    t0 = time.time()
    utts = [w.train[i] for i in np.random.default_rng(0).permutation(len(w.train))[: a.n]]
    feats = [w.featurizer([data.read_audio(u.path)])[0][0] for u in utts]
    tokens = [torch.tensor(w.sp.encode(u.transcript), dtype=torch.int32) for u in utts]
    g = torch.Generator().manual_seed(0)
    scored = utts if a.eval_on_train else w.eval
    scored_feats = (
        feats if a.eval_on_train else [w.featurizer([data.read_audio(u.path)], generator=g)[0][0] for u in scored]
    )
    print(f"{len(utts)} training utterances featurized in {time.time() - t0:.0f} s", flush=True)
    model = w.build_model()
    if a.opt == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    else:
        from timm.optim import Lamb

        opt = Lamb(model.parameters(), lr=a.lr, weight_decay=recipe.opt_weight_decay, eps=recipe.opt_lamb_epsilon)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (a.warmup + 1)))
    pieces = w.sp.get_piece_size()

    def wer() -> float:
        model.eval()
        hyps: list[list[int]] = []
        for i in range(0, len(scored), 64):
            part = scored_feats[i : i + 64]
            lengths = torch.tensor([f.shape[0] for f in part], dtype=torch.int32)
            batch = torch.nn.utils.rnn.pad_sequence(part, batch_first=True)
            hyps += greedy_decode(model, batch, lengths, max_symbols_per_step=30, max_symbols=300)
        model.train()
        texts = [data.normalize(w.sp.decode([i for i in h if i < pieces])) for h in hyps]
        return jiwer.wer([u.transcript for u in scored], texts)

    print(f"step 0 WER {wer():.3f} (untrained)", flush=True)
    t0, spent_evaluating, step = time.time(), 0.0, 0
    while step < a.steps and time.time() - t0 < a.minutes * 60:
        order = torch.randperm(len(utts)).tolist()
        for k in range(0, len(order) - a.batch + 1, a.batch):
            idx = order[k : k + a.batch]
            x = torch.nn.utils.rnn.pad_sequence([feats[i] for i in idx], batch_first=True)
            x_len = torch.tensor([feats[i].shape[0] for i in idx], dtype=torch.int32)
            y = torch.nn.utils.rnn.pad_sequence([tokens[i] for i in idx], batch_first=True)
            y_len = torch.tensor([len(tokens[i]) for i in idx], dtype=torch.int32)
            logits, enc_len = model(x, x_len, y.long())
            loss = rnnt_loss(logits, y, enc_len.int(), y_len, blank=model.blank, reduction="mean")
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % a.every == 0:
                te = time.time()
                score = wer()
                spent_evaluating += time.time() - te
                print(
                    f"step {step} epoch {step * a.batch / len(utts):.2f} "
                    f"training {time.time() - t0 - spent_evaluating:.0f} s "
                    f"loss {loss.item():.3f} {'training' if a.eval_on_train else 'evaluation'} WER {score:.3f}",
                    flush=True,
                )
            if step >= a.steps or time.time() - t0 > a.minutes * 60:
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
