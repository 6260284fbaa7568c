"""rnnt's workload: LibriSpeech-layout audio, the reference's features, RNN-T, LAMB, greedy decoding, WER."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainperf import seeds
from trainperf.contract.workload import Workload
from trainperf.errors import DataError, UsageError
from trainperf.workloads.rnnt import data, generator
from trainperf.workloads.rnnt.model import RNNT, RNNTConfig, greedy_decode
from trainperf.workloads.rnnt.transducer import transducer_loss

REFERENCE_VOCAB = 1023
# LibriSpeech: the reference trains on the three training subsets (960 h) and evaluates on dev-clean.
REFERENCE_TRAIN = ("train-clean-100", "train-clean-360", "train-other-500")
REFERENCE_EVAL = "dev-clean"
REFERENCE_TOKENIZER = "librispeech1023.model"  # the reference's sentencepieces/librispeech1023.model


@dataclass(frozen=True)
class Layout:
    """Where a scale's corpus lives under the data folder."""

    root: Path
    train_dirs: list[Path]
    eval_dir: Path
    tokenizer: Path


def reference_layout(data_dir: Path) -> Layout:
    root = data_dir / "rnnt" / "reference"
    ls = root / "LibriSpeech"
    return Layout(
        root, [ls / s for s in REFERENCE_TRAIN], ls / REFERENCE_EVAL, root / "sentencepieces" / REFERENCE_TOKENIZER
    )


def mini_layout(data_dir: Path) -> Layout:
    root = generator.mini_dir(data_dir)
    return Layout(root, [root / generator.TRAIN_SUBSET], root / generator.EVAL_SUBSET, root / generator.TOKENIZER)


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """What a scale fixes beyond the recipe: the network, where its corpus lives and what is held in memory."""

    model: RNNTConfig
    layout: Callable[[Path], Layout]
    generated: bool  # the mini generator's corpus, verified against its checksums before it is read
    # True: the corpus is small enough to hold (a few hundred MB as int16): its audio is decoded once, on the
    # clock; the training features are kept when they do not change per epoch, and the evaluation's batches of
    # features after the first evaluation. False: read as the reference reads them (dev-clean's features alone
    # would hold about 1.3 GB).
    in_memory: bool
    reference_names: bool  # weights_initialization names the reference's tensors
    # True: the corpus's transcripts, durations (FLAC headers) and the duration filter are read on the clock, in
    # load_data, as the reference reads its manifests after run_start (train.py:232 run_start, then
    # common/data/dali/data_loader.py:94-100); bad input then ends the run, logged as aborted, with the file
    # named. False (mini, as calibrated): read before the clock, in prepare.
    scan_on_clock: bool
    # True: each mel channel normalized by its population standard deviation, nothing added, as the reference's
    # DALI pipeline does (data.normalize_channels). False (mini, as calibrated): the sample one plus 1e-5.
    population_std: bool
    # True: the evaluation's 300-symbol cap checked before each frame, as the reference's decoder checks it
    # (model.greedy_decode). False (mini, as calibrated): no utterance decoded past 300 symbols.
    cap_before_frames: bool


# Model flavours (data): the v2.0 reference (configs/baseline_v3-1023sp.yaml: 49,006,080 parameters) and the
# mini scale's smaller RNN-T of the same code. The LSTMs' initialization comes from the recipe (__init__.py).
FLAVOURS = {
    "reference": Flavour(
        model=RNNTConfig(n_classes=REFERENCE_VOCAB + 1),
        layout=reference_layout,
        generated=False,
        in_memory=False,
        reference_names=True,
        scan_on_clock=True,
        population_std=True,
        cap_before_frames=True,
    ),
    "mini": Flavour(
        model=RNNTConfig(
            n_classes=generator.VOCAB_SIZE + 1,
            enc_n_hid=192,
            enc_pre_rnn_layers=1,
            enc_post_rnn_layers=1,
            enc_dropout=0.1,
            pred_n_hid=96,
            pred_rnn_layers=1,
            pred_dropout=0.1,
            joint_n_hid=128,
            joint_dropout=0.1,
        ),
        layout=mini_layout,
        generated=True,
        in_memory=True,
        reference_names=False,
        scan_on_clock=False,
        population_std=False,
        cap_before_frames=False,
    ),
}
MAX_SYMBOLS_PER_STEP = 30  # the reference's greedy decoder
MAX_SYMBOLS = 300  # eval_max_prediction_symbols (closed_rnnt.yaml)
EVAL_BATCH = 64


class RNNTWorkload(Workload):
    DRY_RUN_LOCAL_BATCH = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavour = FLAVOURS[self.spec.scale]
        self.model_config = dataclasses.replace(
            self.flavour.model,
            weights_init_scale=self.recipe.model_weights_initialization_scale,
            zero_all_bias_hh=self.recipe.model_lstm_zero_all_bias_hh,
        )
        layout = self.flavour.layout(self.data_dir)
        self.root, self.train_dirs, self.eval_dir = layout.root, layout.train_dirs, layout.eval_dir
        self.tokenizer_path = layout.tokenizer
        self.train: list[data.Utterance] = []
        self.eval: list[data.Utterance] = []
        self.audio: dict[Path, np.ndarray] = {}  # decoded audio held in memory (mini: all of it)
        self.featurizer = data.Featurizer(population_std=self.flavour.population_std)
        self.feature_cache: dict[Path, torch.Tensor] = {}  # training features, when they do not change per epoch
        # In memory (mini): the evaluation's batches of features by (first, end) utterance. They are the same in
        # every evaluation (the same utterances, the same dither from a generator seeded at 0), so the first
        # evaluation computes them and the others reuse them. The reference recomputes them, as its code does.
        self.eval_features: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
        self.sp = None
        self.ema = None

    # --- files ---------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Before the clock: the corpus's folders and the vocabulary (the reference's file, or trained here the
        reference's way from every training transcript, as its ``scripts/create_sentencepieces.sh`` does before a
        run). The mini corpus is also checked against its manifest and scanned (:meth:`_scan`) here."""
        if self.dry_run:
            return
        if self.flavour.generated:
            problems = generator.verify_mini(self.data_dir, trust_cache=True)
            if problems:
                raise DataError(f"rnnt mini data: {problems[0]}; {generator.FIX}")
        missing = [p for p in [*self.train_dirs, self.eval_dir] if not p.is_dir()]
        if missing:
            raise DataError(
                f"rnnt data: {missing[0]} not found; the reference scale reads <data-dir>/rnnt/reference/LibriSpeech/"
                f"{{{','.join(REFERENCE_TRAIN)},{REFERENCE_EVAL}}}/<speaker>/<chapter>/*.flac (LibriSpeech's layout)"
            )
        if not self.flavour.scan_on_clock:
            self._scan()
        if not self.tokenizer_path.is_file():  # the reference's way: unigram sentencepiece on the training text
            try:
                self.tokenizer_path.parent.mkdir(parents=True, exist_ok=True)
                data.train_sentencepiece(
                    self._vocabulary_text(), REFERENCE_VOCAB, self.tokenizer_path, hard_limit=not self.smoke
                )
            except OSError as e:
                raise DataError(
                    f"cannot write the vocabulary {self.tokenizer_path} ({e.strerror or e}): put the reference's "
                    f"{REFERENCE_TOKENIZER} there, or make the folder writable"
                ) from None
        self.sp = data.load_sentencepiece(self.tokenizer_path, self.model_config.n_classes - 1)

    def _vocabulary_text(self) -> list[str]:
        """The text a missing vocabulary is trained on. The reference's: every training transcript, before the
        duration filter (``scripts/create_sentencepieces.sh:16``, all of ``librispeech-train-*-wav.json``)."""
        if self.flavour.scan_on_clock:
            return [t for d in self.train_dirs for t in data.subset_transcripts(d)]
        return [u.transcript for u in self.train]

    def _scan(self) -> None:
        """Every utterance's transcript and duration (its FLAC header), checked, and the training set's duration
        filter (``data_train_max_duration``)."""
        self.train = [u for d in self.train_dirs for u in data.scan_subset(d)]
        self.eval = data.scan_subset(self.eval_dir)
        self.train = [u for u in self.train if u.seconds <= self.recipe.data_train_max_duration]
        if not self.train:
            raise DataError(f"rnnt: no training utterance of at most {self.recipe.data_train_max_duration} s")

    def load_data(self) -> None:
        if self.flavour.scan_on_clock:  # the reference: read after run_start, as its manifests are
            self._scan()
        if self.flavour.in_memory:  # the mini corpus (a few hundred MB as int16) is decoded once, on the clock
            for u in [*self.train, *self.eval]:
                self.audio[u.path] = data.read_audio(u.path)

    @property
    def train_samples(self) -> int:
        return len(self.train) if self.train else self.spec.train_samples

    @property
    def eval_samples(self) -> int:
        return len(self.eval) if self.eval else self.spec.eval_samples

    def _read(self, u: data.Utterance) -> np.ndarray:
        cached = self.audio.get(u.path)
        return cached if cached is not None else data.read_audio(u.path)

    def _tokens(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = [torch.tensor(self.sp.encode(t), dtype=torch.int32) for t in texts]
        lengths = torch.tensor([len(i) for i in ids], dtype=torch.int32)
        return torch.nn.utils.rnn.pad_sequence(ids, batch_first=True), lengths

    # --- model and optimizer -------------------------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        return RNNT(self.model_config)

    def reference_tensor_names(self, model: torch.nn.Module) -> list[str]:
        if not self.flavour.reference_names:
            return []
        return ["pre_rnn", "post_rnn", "pred_embed", "dec_rnn", "joint_pred", "joint_enc", "joint_net"]

    def build_optimizer(self, model: torch.nn.Module) -> tuple[Any, Any]:
        """LAMB (timm's, which follows the LAMB paper as apex's FusedLAMB does) with the reference's schedule,
        and an exponential moving average of the weights that evaluation uses (``model_eval_ema_factor``)."""
        from timm.optim import Lamb

        r = self.recipe
        if r.opt_name != "lamb":
            raise UsageError(f"rnnt: optimizer {r.opt_name!r} is not supported: lamb (the reference's)")
        opt = Lamb(
            model.parameters(),
            lr=r.opt_base_learning_rate,
            betas=(r.opt_lamb_beta_1, r.opt_lamb_beta_2),
            eps=r.opt_lamb_epsilon,
            weight_decay=r.opt_weight_decay,
            max_grad_norm=None,  # the harness clips (clip_grad_norm)
        )
        if r.model_eval_ema_factor > 0:
            from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

            self.ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(r.model_eval_ema_factor))
            # As the reference's EMA (a copy of the initial weights, then averaged after every step): without this
            # first update, AveragedModel would copy the weights after the first step instead of averaging them.
            self.ema.update_parameters(model)
            opt.register_step_post_hook(lambda *_: self.ema.update_parameters(model))
        factor = lr_policy(r, self.steps_per_epoch)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)

    def hparams(self) -> dict[str, Any]:
        out = super().hparams()
        out.update(
            opt_gradient_clip_norm=self.recipe.clip_grad_norm or float("inf"),
            opt_learning_rate_alt_decay_func=True,
            opt_learning_rate_alt_warmup_func=True,
            model_weights_initialization_scale=self.recipe.model_weights_initialization_scale,
            eval_max_prediction_symbols=MAX_SYMBOLS,
            **{f"data_spec_augment_{k}": v for k, v in data.SPEC_AUGMENT.items()},
        )
        if not self.recipe.data_spec_augment:  # no masks are applied
            out.update(data_spec_augment_freq_n=0, data_spec_augment_time_n=0)
        return out

    # --- training ------------------------------------------------------------------------------------
    def synthetic_batch(self) -> Any:
        g = seeds.torch_generator(self.config.seed, seeds.STREAM_DATA, self.dist.rank)
        n, frames, symbols = self.local_batch_size, 70, 20
        feats = torch.randn(n, frames, data.FEATURES, generator=g)
        tokens = torch.randint(0, self.model_config.n_classes - 1, (n, symbols), generator=g, dtype=torch.int32)
        return feats, torch.full((n,), frames, dtype=torch.int32), tokens, torch.full((n,), symbols, dtype=torch.int32)

    def train_batches(self) -> Iterator[Any]:
        """Each epoch the reference's bucketing (seeded, the same on every rank, :meth:`_rank_parts`); each rank
        perturbs its utterances' speed and masks their features (SpecAugment) from its own generator."""
        r = self.recipe
        lo, hi = r.data_speed_perturbaton_min, r.data_speed_perturbaton_max
        # Without speed perturbation and SpecAugment an utterance's features are the same every epoch (up to
        # the dither, drawn once): in memory (mini) they are computed once, on the clock, and kept (a few MB).
        keep = self.flavour.in_memory and lo == hi == 1.0 and not r.data_spec_augment
        g, g_epoch = None, -1
        for epoch, part in self._rank_parts():
            if epoch != g_epoch:
                g, g_epoch = seeds.torch_generator(self.config.seed, seeds.STREAM_AUGMENT, self.dist.rank, epoch), epoch
            if keep:
                feats, lengths = self._kept_features(part, g)
            else:
                speed = (lo + (hi - lo) * torch.rand(len(part), generator=g)).tolist()
                feats, lengths = self.featurizer(
                    [self._read(u) for u in part], speed=speed, spec_augment=r.data_spec_augment, generator=g
                )
            tokens, token_lengths = self._tokens([u.transcript for u in part])
            yield feats, lengths, tokens, token_lengths

    def _rank_parts(self) -> Iterator[tuple[int, list[data.Utterance]]]:
        """This rank's micro-batches of utterances, with the epoch of the sampler that drew them.

        ``data_bucket_micro_batch_groups`` (the reference recipe): the reference's sampler
        (:func:`data.bucket_groups`) shuffles groups of micro-batch x world utterances, a step takes
        gradient-accumulation-steps of them, rank ``r`` takes every world-size-th utterance of a group from the
        ``r``-th, and the groups run on from one epoch into the next, as the reference's DALI reader reads one
        file list of all epochs for ``shard_size`` utterances an epoch (``common/data/dali/data_loader.py:119-127``,
        ``iterator.py:60-63``). Off (the mini recipe, as calibrated): whole global batches cut from the joined
        order are shuffled (:func:`data.bucket_batches`) and each rank takes its contiguous slice."""
        r, gb, n = self.recipe, self.global_batch_size, self.local_batch_size
        rank, world = self.dist.rank, self.dist.world_size
        per_micro = n * world  # a global batch is gradient_accumulation_steps micro-batches
        seconds = [u.seconds for u in self.train]
        epoch = 0
        while True:
            rng = seeds.numpy_rng(self.config.seed, seeds.STREAM_SHUFFLE, epoch)
            if r.data_bucket_micro_batch_groups:
                for group in data.bucket_groups(seconds, per_micro, r.data_train_num_buckets, rng):
                    yield epoch, [self.train[int(i)] for i in group[rank::world]]
            else:
                for batch in data.bucket_batches(seconds, gb, r.data_train_num_buckets, rng):
                    for k in range(0, gb, per_micro):
                        yield epoch, [self.train[int(i)] for i in batch[k + rank * n : k + (rank + 1) * n]]
            epoch += 1

    def _kept_features(self, part: list[data.Utterance], g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        for u in part:
            if u.path not in self.feature_cache:
                self.feature_cache[u.path] = self.featurizer([self._read(u)], generator=g)[0][0]
        feats = [self.feature_cache[u.path] for u in part]
        lengths = torch.tensor([f.shape[0] for f in feats], dtype=torch.int32)
        return torch.nn.utils.rnn.pad_sequence(feats, batch_first=True), lengths

    def loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        feats, lengths, tokens, token_lengths = (t.to(self.device) for t in batch)
        logits, enc_lengths = model(feats, lengths, tokens.long())
        args = (logits.float(), tokens.int(), enc_lengths.int(), token_lengths.int())
        if self.device.type == "cpu":  # the same loss, cheaper on a CPU (transducer.py)
            return transducer_loss(*args, blank=self.model_config.n_classes - 1)
        from torchaudio.functional import rnnt_loss

        return rnnt_loss(*args, blank=self.model_config.n_classes - 1, reduction="mean")

    # --- evaluation -------------------------------------------------------------------------------------
    def utterance_errors(self, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        """Word errors (substitutions + deletions + insertions) and reference words of every evaluation
        utterance, in order, gathered from all ranks (each decodes its shard once, greedily, with jiwer's
        alignment)."""
        import jiwer

        net = self.ema.module if self.ema is not None else model
        net = getattr(net, "module", net)
        was_training = net.training
        net.eval()
        shard = self.dist.shard(len(self.eval))
        errors, words = [], []
        g = torch.Generator().manual_seed(0)  # the evaluation's dither: the same for every evaluation
        with torch.no_grad():
            for i in range(shard.start, shard.stop, EVAL_BATCH):
                end = min(i + EVAL_BATCH, shard.stop)
                part = self.eval[i:end]
                cached = self.eval_features.get((i, end))
                feats, lengths = cached or self.featurizer([self._read(u) for u in part], generator=g)
                if cached is None and self.flavour.in_memory:
                    self.eval_features[(i, end)] = (feats, lengths)
                hyps = greedy_decode(
                    net,
                    feats.to(self.device),
                    lengths.to(self.device),
                    max_symbols_per_step=MAX_SYMBOLS_PER_STEP,
                    max_symbols=MAX_SYMBOLS,
                    cap_before_frames=self.flavour.cap_before_frames,
                )
                pieces = self.sp.get_piece_size()  # a smaller vocabulary than the model's classes (a smoke fixture's)
                for u, ids in zip(part, hyps, strict=True):
                    text = self.sp.decode([i for i in ids if i < pieces])
                    out = jiwer.process_words(u.transcript, data.normalize(text))
                    errors.append(out.substitutions + out.deletions + out.insertions)
                    words.append(out.substitutions + out.deletions + out.hits)
        net.train(was_training)
        pair = torch.tensor([errors, words], dtype=torch.float64).reshape(2, -1).T
        gathered = self.dist.all_gather(pair)
        return gathered[:, 0].numpy(), gathered[:, 1].numpy()

    def dry_run_evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """A dry run measures nothing: the base class's forward pass on a synthetic batch, then WER 1.0 (every
        word wrong). The base class's 0.0 is a perfect WER, which would reach any target."""
        super().dry_run_evaluate(model)
        return {"wer": 1.0}

    def evaluate(self, model: torch.nn.Module) -> Mapping[str, float]:
        """Word error rate over the whole evaluation set: all word errors over all reference words."""
        errors, words = self.utterance_errors(model)
        if len(errors) != len(self.eval):
            raise RuntimeError(f"rnnt: evaluated {len(errors)} of {len(self.eval)} utterances")
        return {"wer": float(errors.sum() / words.sum())}


def lr_policy(r: Any, steps_per_epoch: int):
    """The reference's learning-rate policy (``common/optimizers.py``, ``lr_policy``) as a LambdaLR factor of the
    optimizer step ``step`` (0 for the first): a linear warm-up ``(k + 1) / (warmup_steps + 1)`` over
    ``opt_learning_rate_warmup_epochs``, a hold at the base rate for ``opt_lamb_learning_rate_hold_epochs``, then
    an exponential decay by ``opt_lamb_learning_rate_decay_poly_power`` (the reference's ``lr_exp_gamma``, logged
    under this key) per epoch, never below ``opt_lamb_learning_rate_min``. ``k`` is the reference's step counter,
    which starts at 1 (``train.py``): ``step + 1``; ``step`` where ``opt_learning_rate_step_count_from_one`` is
    off (the mini recipe's calibrated warm-up, one step behind)."""
    warmup = round(r.opt_learning_rate_warmup_epochs * steps_per_epoch)
    hold = round(r.opt_lamb_learning_rate_hold_epochs * steps_per_epoch)
    floor = r.opt_lamb_learning_rate_min / r.opt_base_learning_rate
    first = 1 if r.opt_learning_rate_step_count_from_one else 0

    def factor(step: int) -> float:
        k = step + first
        if k < warmup:
            a = (k + 1) / (warmup + 1)
        elif k < warmup + hold:
            a = 1.0
        else:
            epochs = (step - warmup - hold) / steps_per_epoch
            a = r.opt_lamb_learning_rate_decay_poly_power ** math.floor(epochs + 1)
        return max(a, floor)

    return factor
