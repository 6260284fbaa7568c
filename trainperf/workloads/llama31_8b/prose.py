"""llama31_8b's mini prose as the corpus the LLM minis' starting checkpoints are trained on
(:mod:`trainperf.workloads.common.llm.start`): its prepared files, its tokenizer, and its workload's seeded batches of
the training split and evaluation of the validation sequences."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from trainperf.dist import DistContext
from trainperf.spec import RunConfig
from trainperf.workloads.common.llm import start
from trainperf.workloads.llama31_8b import MINI, MINI_RECIPE, mini
from trainperf.workloads.llama31_8b.workload import LlamaWorkload


def open_prose(data_dir: Path, seed: int, seq_len: int = mini.SEQ_LEN):
    """The mini workload over the prepared files, its data loaded: seeded batches of the training split (in the
    order of ``seed``) and the evaluation of the 512 validation sequences. What the minis' starting checkpoints
    are trained on (:mod:`trainperf.workloads.common.llm.start`)."""
    recipe = dataclasses.replace(MINI_RECIPE, max_sequence_length=seq_len)
    data = LlamaWorkload(MINI, recipe, RunConfig(seed=seed), data_dir=data_dir, dist=DistContext())
    data.prepare()
    data.load_data()
    return data


# llama31_8b's mini prose as the corpus a mini's starting checkpoint is trained on.
PROSE = start.Corpus(
    prepare=mini.prepare_mini, verify=mini.verify_mini, tokenizer_sha256=mini.tokenizer_sha256, open=open_prose
)
