"""rnnt through the CLI: the reference dry run fails ruleset 2.0.0 only on the quality target, the reference
smoke run reads a tiny LibriSpeech through the real loader, and bad audio ends a run on its clock."""

from __future__ import annotations

import subprocess
import sys

from trainperf.results import first_values, parse_run, read_mllog
from trainperf.rules.compliance import check_log, is_target_only_failure


def trainperf(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "trainperf", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def test_reference_dry_run_fails_ruleset_2_only_on_the_target(tmp_path):
    r = trainperf("run", "rnnt", "--scale", "reference", "--dry-run", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stdout + r.stderr
    [log] = list((tmp_path / "o" / "results").rglob("result_0.txt"))
    res = check_log(log)
    assert res.scale == "reference" and res.ruleset == "2.0.0"
    assert is_target_only_failure(res), res.problems
    assert log.read_text().count('"weights_initialization"') == 7
    first = first_values(read_mllog(log))
    assert first["eval_accuracy"] == 1.0  # a dry run measures nothing: every word wrong
    assert first["model_weights_initialization_scale"] == 0.5  # the scale the model was built with (the v2.0 run's)


def test_reference_smoke_run_reads_librispeech_trains_and_decodes(tmp_path):
    out = tmp_path / "o"
    r = trainperf("run", "rnnt", "--scale", "reference", "--smoke", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"rnnt smoke run: fixture in the reference layout at {out / 'smoke-data' / 'rnnt' / 'reference'}" in r.stdout
    [log] = list((out / "results").rglob("result_0.txt"))
    first = first_values(read_mllog(log))
    assert first["trainperf_smoke"] is True and (first["train_samples"], first["eval_samples"]) == (10, 4)
    assert first["eval_accuracy"] >= 0.0  # a real WER of greedy decoding over the whole fixture
    assert parse_run(log).status == "aborted"  # never a result
    # the smoke run's only failures under ruleset 2.0.0: the target, and dev-clean's size (the fixture holds 4)
    problems = check_log(log).problems
    assert problems and all("eval_samples" in p or "quality target" in p.lower() for p in problems), problems


def test_bad_audio_ends_the_run_on_its_clock_naming_the_file(tmp_path):
    """The reference scale reads the corpus's transcripts and FLAC headers after run_start, as the reference reads
    its manifests (train.py:232, data_loader.py:94-100): a bad file ends the run, logged as aborted with the file
    named in its reason, and the command says which file and exits 2."""
    from trainperf.workloads.rnnt import data as rnnt_data
    from trainperf.workloads.rnnt import fixture

    data = tmp_path / "data"
    root = data / "rnnt" / "reference"
    fixture.write_smoke_fixture(root)
    vocab = root / "sentencepieces" / "librispeech1023.model"
    vocab.parent.mkdir(parents=True)
    rnnt_data.train_sentencepiece([s.lower() for s in fixture.SENTENCES], 1023, vocab, hard_limit=False)
    bad = root / "LibriSpeech" / "dev-clean" / "84" / "121123" / "84-121123-0001.flac"
    bad.write_bytes(b"RIFF nonsense")
    out = tmp_path / "o"
    r = trainperf("run", "rnnt", "--scale", "reference", "--data-dir", data, "--out", out)
    assert r.returncode == 2 and "84-121123-0001.flac: audio cannot be decoded" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    logs = list(out.rglob("result_*.txt"))
    assert logs, list(out.rglob("*"))
    text = logs[0].read_text()
    assert text.index('"run_start"') < text.index("84-121123-0001.flac: audio cannot be decoded")
    assert parse_run(logs[0]).status == "aborted"
