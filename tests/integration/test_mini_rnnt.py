"""rnnt's mini: real steps on the real prepared files (synthesized speech in LibriSpeech layout, the reference's
features, the RNN-T, LAMB, greedy decoding and jiwer's WER) and a real evaluation, and a calibration seed's log of
a run to the target judged by the official compliance checker with the mini rules. That the mini reaches its
target is shown by its calibration (README.md beside rnnt/workload.py), not rerun here."""

from __future__ import annotations

import json
import subprocess

import pytest
from mini_logs import (
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target,
    assert_the_checker_passes,
    assert_the_target_decides,
    evaluations,
    mini_log,
)
from mini_steps import few_steps_command

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.workloads.rnnt import MINI

# a calibration seed that reached the target (README.md of rnnt), so CI does not depend on a drawn seed
SEED = 100002
STEPS = 30  # a third of an epoch
LOG = mini_log("rnnt")


@pytest.mark.slow
def test_a_few_real_steps_on_the_mini_files_stop_the_untrained_models_babble(data_dir):
    """The untrained model emits up to 300 symbols per utterance (WER about 42, README.md "Calibration"); 30
    LAMB steps on the real features teach it the blank, and the transducer loss falls by a third or more."""
    r = subprocess.run(few_steps_command("rnnt", SEED, STEPS, data_dir), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(r.stdout)
    assert (got["train_samples"], got["eval_samples"]) == (2880, 400)
    assert got["before"]["wer"] > 10, got["before"]  # insertions: far more words than the transcripts hold
    assert got["after"]["wer"] < 1.5, got["after"]
    first, *_, last = got["losses"]  # the mean loss of steps 1-10 and 21-30
    assert last < 0.75 * first, got["losses"]
    assert got["peak_rss_mib"] < 3 * 1024  # the mini goal: peak memory at most 3 GiB (a full run: 1.4 GiB)


def test_a_calibration_seeds_log_stops_at_the_target_and_passes_the_checker(tmp_path):
    """Seed 100002's log of `trainperf run rnnt` (source paths made relative)."""
    assert_a_success_stopped_at_the_first_evaluation_reaching_the_target(LOG, MINI)
    run = parse_run(LOG)
    assert run.seed == SEED
    # WER: lower is better; every epoch is evaluated, the first far above the target (0.813 here), and the run stops
    # at the first evaluation that reaches it. Which epoch that is depends on the processor's arithmetic (this log:
    # epoch 8; the calibration's run of the seed: 7), so the test holds the schedule, not the epoch.
    epochs = [epoch for _, epoch, _ in run.curve]
    assert epochs == [float(e) for e in range(1, len(epochs) + 1)]
    assert evaluations(LOG, MINI)[0]["wer"] > 0.5
    first = first_values(read_mllog(LOG))
    assert (first["train_samples"], first["eval_samples"]) == (2880, 400)
    assert first["opt_name"] == "lamb" and first["data_spec_augment_freq_n"] == 0
    assert_the_checker_passes(LOG)
    assert_the_target_decides(LOG, MINI, tmp_path)
