"""The mini rule files and the compliance wrapper, on hand-written MLLOG logs of a mini resnet run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.errors import DataError, TrainperfError, UsageError
from trainperf.rules import compliance, mini_rules
from trainperf.rules.compliance import check_log, is_target_only_failure
from trainperf.rules.mini_rules import mini_rule_yaml, write_mini_rules
from trainperf.spec import BenchmarkSpec

pytest.importorskip("mlperf_logging")


def make_spec(**changes) -> BenchmarkSpec:
    fields = {
        "key": "resnet",
        "scale": "mini",
        "model": "ResNet-8",
        "dataset": "Fashion-MNIST",
        "metric": "top1",
        "target": 0.9,
        "hparam_keys": ("opt_name", "opt_base_learning_rate"),
        "runs_required": 5,
        "eval_interval": 1,
        "max_progress": 5,
        "max_minutes": 5,
        "target_source": "measured: default recipe, 5 seeds",
    }
    fields.update(changes)
    return BenchmarkSpec(**fields)


SPEC = make_spec()
T0 = 1_650_000_000_000  # the first event of every log written here, in ms since 1970 (2022-04-15): a plausible time


def write_log(path: Path, *, accuracies=(0.52, 0.95), status="success", drop=(), values=None, extra=()) -> Path:
    """A complete mini resnet run in MLLOG lines (after one line of ordinary output)."""
    values = values or {}
    clock = iter(range(T0, T0 + 1_000_000, 100))
    lines = ["ordinary stdout line that the checker ignores"]

    def event(key, value=None, event_type="POINT_IN_TIME", **metadata):
        if key in drop:
            return
        value = values.get(key, value)
        record = {
            "namespace": "",
            "time_ms": next(clock),
            "event_type": event_type,
            "key": key,
            "value": value,
            "metadata": {"file": "x.py", "lineno": 1, **metadata},
        }
        lines.append(":::MLLOG " + json.dumps(record))

    event("cache_clear", True)
    event("init_start", event_type="INTERVAL_START")
    for key, value in [
        ("submission_benchmark", "resnet"),
        ("submission_org", "trainperf"),
        ("submission_division", "open"),
        ("submission_platform", "laptop"),
        ("submission_status", "research"),
        ("trainperf_version", "0.1"),
        ("trainperf_scale", "mini"),
        ("trainperf_division", "closed"),
        ("seed", 1234),
        ("global_batch_size", 256),
        ("gradient_accumulation_steps", 1),
        ("opt_name", "sgd"),
        ("opt_base_learning_rate", 0.2),
        ("train_samples", 60000),
        ("eval_samples", 10000),
    ]:
        event(key, value)
    for key, value, metadata in extra:
        event(key, value, **metadata)
    event("init_stop", event_type="INTERVAL_END")
    event("run_start", event_type="INTERVAL_START")
    for epoch, accuracy in enumerate(accuracies):
        event("block_start", event_type="INTERVAL_START", first_epoch_num=epoch, epoch_count=1)
        event("epoch_start", event_type="INTERVAL_START", epoch_num=epoch)
        event("epoch_stop", event_type="INTERVAL_END", epoch_num=epoch)
        event("eval_start", event_type="INTERVAL_START", epoch_num=epoch)
        event("eval_accuracy", accuracy, epoch_num=epoch)
        event("eval_stop", event_type="INTERVAL_END", epoch_num=epoch)
        event("block_stop", event_type="INTERVAL_END", first_epoch_num=epoch)
    event("run_stop", event_type="INTERVAL_END", status=status)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory) -> Path:
    (path,) = write_mini_rules(tmp_path_factory.mktemp("rules"), [SPEC])
    return path


def check(path: Path, rule_file: Path) -> compliance.CheckResult:
    return check_log(path, config=rule_file)


# --- the generated rule file ----------------------------------------------------------------------
def test_rule_yaml_is_deterministic_and_describes_itself(rule_file):
    text = mini_rule_yaml(SPEC)
    assert text == mini_rule_yaml(make_spec())
    assert rule_file.read_text(encoding="utf-8") == text
    assert rule_file.name == "resnet.yaml"
    assert "benchmark 'resnet'" in text and "measured: default recipe, 5 seeds" in text
    assert "enqueue_config('training_2.0.0/common.yaml')" in text
    assert "ATLEAST_ONE_CHECK: \" v['value'] >= 0.9 \"" in text
    for name in (
        "trainperf_scale",
        "trainperf_division",
        "seed",
        "global_batch_size",
        "opt_name",
        "opt_base_learning_rate",
    ):
        assert f"NAME:  {name}\n    REQ:   EXACTLY_ONE" in text


def test_lower_is_better_target_and_spec_checks():
    assert mini_rules.quality_check(make_spec(target=0.25, higher_is_better=False)) == "v['value'] <= 0.25"
    with pytest.raises(UsageError):
        mini_rule_yaml(make_spec(scale="reference"))
    with pytest.raises(UsageError):
        mini_rule_yaml(make_spec(hparam_keys=("bad key",)))


def test_shipped_paths_and_regeneration(tmp_path, monkeypatch):
    assert mini_rules.shipped_rule_path("resnet") == mini_rules.RULES_DIR / "resnet.yaml"
    monkeypatch.setattr(mini_rules, "registry_specs", lambda: [SPEC])
    assert mini_rules.main(["--dest", str(tmp_path), "--check"]) == 1
    assert mini_rules.main(["--dest", str(tmp_path)]) == 0
    assert mini_rules.main(["--dest", str(tmp_path), "--check"]) == 0


# --- checking logs --------------------------------------------------------------------------------
def test_run_above_target_passes(tmp_path, rule_file, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = check(write_log(tmp_path / "run.txt"), rule_file)
    assert result.passed, result.raw
    assert result.problems == []
    assert (result.scale, result.benchmark, result.ruleset) == ("mini", "resnet", "2.0.0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.txt"]  # nothing left in the cwd


def test_run_below_target_fails_on_target_only(tmp_path, rule_file):
    result = check(write_log(tmp_path / "run.txt", accuracies=(0.41, 0.61)), rule_file)
    assert not result.passed
    assert is_target_only_failure(result), result.problems
    assert result.problems == [
        "quality target not reached: no eval_accuracy line has v['value'] >= 0.9 (best in log: 0.61)"
    ]


def test_quality_outside_zero_one_is_caught(tmp_path, rule_file):
    result = check(write_log(tmp_path / "run.txt", accuracies=(0.41, 1.5, 0.95)), rule_file)
    assert not result.passed
    assert any("must lie in [0, 1]" in p and "1.5" in p for p in result.problems), result.problems


def test_missing_seed_is_named(tmp_path, rule_file):
    result = check(write_log(tmp_path / "run.txt", drop={"seed"}), rule_file)
    assert not result.passed
    assert result.problems == ["the log must contain exactly one 'seed' line but has 0"]
    assert not is_target_only_failure(result)


def test_aborted_run_and_closed_mlperf_division_fail(tmp_path, rule_file):
    result = check(
        write_log(tmp_path / "run.txt", status="aborted", values={"submission_division": "closed"}), rule_file
    )
    assert not result.passed
    text = "\n".join(result.problems)
    assert "status 'aborted'" in text
    assert "division 'open'" in text and "'closed'" in text
    assert not is_target_only_failure(result)


def test_bad_value_names_its_file_line(tmp_path, rule_file):
    result = check(write_log(tmp_path / "run.txt", values={"trainperf_scale": "reference"}), rule_file)
    # line 1 is ordinary output; the 10th line holds trainperf_scale
    assert result.problems == [
        "the 'trainperf_scale' line at log line 10 has value 'reference', but the rule needs value == 'mini'"
    ]


def test_reference_tensor_list_difference(tmp_path):
    tensors = [("weights_initialization", None, {"tensor": name}) for name in ("conv0_weight", "bogus")]
    log = write_log(
        tmp_path / "run.txt", drop={"trainperf_scale"}, extra=tensors, values={"submission_division": "closed"}
    )
    result = check_log(log)
    assert result.scale == "reference" and result.config is None
    (problem,) = [p for p in result.problems if p.startswith("weights_initialization")]
    assert "missing: bn0_beta, bn0_gamma, fc1_bias" in problem and "unexpected: bogus" in problem
    assert "conv0_weight" not in problem


def test_unknown_benchmark_is_a_problem_not_a_crash(tmp_path, rule_file):
    result = check(write_log(tmp_path / "run.txt", values={"submission_benchmark": "gpt3"}), rule_file)
    assert not result.passed
    # refused by the gate before the checker (which would build a rule-file path from it) ever runs
    assert any("'submission_benchmark' has value 'gpt3', which is not an MLPerf" in p for p in result.problems)


def test_missing_or_empty_log_is_a_user_error(tmp_path):
    with pytest.raises(UsageError, match="nothing.txt"):
        check_log(tmp_path / "nothing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("no mllog here\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty.txt"):
        check_log(empty)


def test_shipped_mini_rule_files_match_the_specs():
    assert mini_rules.stale_shipped() == [], "run `python -m trainperf.rules.mini_rules` to regenerate"


# --- a multi-field metric (maskrcnn: BBOX and SEGM, each with its own target) ------------------------------
MULTI = make_spec(key="maskrcnn", metric="mAP", target=0.4, field_targets=(("BBOX", 0.4), ("SEGM", 0.3)))


def test_multi_field_spec_reaches_only_when_every_field_does():
    assert MULTI.reached({"BBOX": 0.41, "SEGM": 0.31})
    assert not MULTI.reached({"BBOX": 0.41, "SEGM": 0.29})
    assert not MULTI.reached({"BBOX": 0.41})
    assert not MULTI.reached(0.9)
    assert MULTI.headline({"BBOX": 0.41, "SEGM": 0.31}) == 0.41
    assert MULTI.target_text == "BBOX mAP >= 0.4 and SEGM mAP >= 0.3"
    with pytest.raises(ValueError):
        make_spec(target=0.5, field_targets=(("BBOX", 0.4),))


def test_measured_standard_error_reads_beside_the_target():
    assert make_spec().metric_se_text == "—"  # not measured
    assert make_spec(metric_se=0.00327).metric_se_text == "0.0033"
    assert make_spec(key="maskrcnn", target=0.4, field_targets=MULTI.field_targets, metric_se=0.011).metric_se_text == (
        "0.011 (BBOX)"  # the headline field's
    )
    for bad in (0.0, -0.01, float("nan")):
        with pytest.raises(ValueError, match="standard error"):
            make_spec(metric_se=bad)


@pytest.fixture(scope="module")
def multi_rule_file(tmp_path_factory) -> Path:
    (path,) = write_mini_rules(tmp_path_factory.mktemp("rules"), [MULTI])
    return path


def test_multi_field_rules_need_both_fields_in_one_evaluation(tmp_path, multi_rule_file):
    text = multi_rule_file.read_text()
    assert "v['value']['BBOX'] >= 0.4 and v['value']['SEGM'] >= 0.3" in text
    maskrcnn = {"submission_benchmark": "maskrcnn"}
    ok = write_log(
        tmp_path / "ok.txt", accuracies=({"BBOX": 0.2, "SEGM": 0.1}, {"BBOX": 0.45, "SEGM": 0.35}), values=maskrcnn
    )
    assert check(ok, multi_rule_file).passed
    # each field reaches its target, but never in the same evaluation
    apart = write_log(
        tmp_path / "apart.txt", accuracies=({"BBOX": 0.45, "SEGM": 0.1}, {"BBOX": 0.2, "SEGM": 0.35}), values=maskrcnn
    )
    res = check(apart, multi_rule_file)
    assert not res.passed and compliance.is_target_only_failure(res), res.problems
    high = write_log(tmp_path / "high.txt", accuracies=({"BBOX": 1.5, "SEGM": 0.35},), values=maskrcnn)
    assert not check(high, multi_rule_file).passed


def test_multi_field_curve_reads_the_headline_field(tmp_path):
    from trainperf.results import parse_run

    log = write_log(tmp_path / "log.txt", accuracies=({"BBOX": 0.2, "SEGM": 0.1}, {"BBOX": 0.45, "SEGM": 0.35}))
    assert [q for _, _, q in parse_run(log).curve] == [0.2, 0.45]


# --- impossible timing: the official checker orders lines but never compares their times ------------------
def retime(path: Path, key: str, time_ms: float, *, last: bool = False) -> int:
    """Give the first (or last) ``key`` record of a log another time_ms; returns its line number."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [i for i, ln in enumerate(lines) if ln.startswith(":::MLLOG ") and json.loads(ln[9:])["key"] == key]
    i = hits[-1] if last else hits[0]
    record = json.loads(lines[i][9:])
    lines[i] = ":::MLLOG " + json.dumps({**record, "time_ms": time_ms})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return i + 1


def start_ms(path: Path) -> int:
    return next(json.loads(ln[9:])["time_ms"] for ln in path.read_text().splitlines() if '"key": "run_start"' in ln)


def test_a_negative_duration_is_refused_by_check_and_by_the_parser(tmp_path, rule_file):
    from trainperf.errors import ResultsError
    from trainperf.results import parse_run

    log = write_log(tmp_path / "run.txt")
    line = retime(log, "run_stop", start_ms(log) - 60000)
    result = check(log, rule_file)
    assert not result.passed and not is_target_only_failure(result)
    (problem,) = [p for p in result.problems if p.startswith(compliance.TIMING_PROBLEM)]
    assert f"run_stop at line {line}" in problem and "before run_start" in problem and "negative duration" in problem
    with pytest.raises(ResultsError, match=rf"run\.txt: run_stop at line {line} .* before run_start .* redo the run"):
        parse_run(log)


@pytest.mark.parametrize("when", ["before run_start", "after run_stop"])
def test_an_evaluation_outside_the_run_is_refused_by_check_and_by_the_parser(tmp_path, rule_file, when):
    from trainperf.errors import ResultsError
    from trainperf.results import parse_run

    log = write_log(tmp_path / "run.txt")
    t = start_ms(log) - 1 if when == "before run_start" else start_ms(log) + 86_400_000  # a day after run_start
    line = retime(log, "eval_accuracy", t, last=when == "after run_stop")
    result = check(log, rule_file)
    assert not result.passed
    assert any(
        p.startswith(compliance.TIMING_PROBLEM) and f"eval_accuracy at line {line}" in p and when in p
        for p in result.problems
    ), result.problems
    with pytest.raises(ResultsError, match=rf"eval_accuracy at line {line} .* {when}"):
        parse_run(log)


FOREIGN = ("trainperf_version", "trainperf_scale", "trainperf_division")  # a log another submitter's code wrote


def test_minigo_evaluates_its_models_after_run_stop_as_its_reference_does(tmp_path, rule_file):
    """The v2.0 minigo reference plays every generation's model once training is over (eval_models.py), and
    its published logs put those eval_accuracy lines after run_stop, each of a model saved (save_model) within the
    run; any other benchmark's are refused, and so are trainperf's own, whose harness evaluates on the clock."""
    from trainperf import registry
    from trainperf.errors import ResultsError
    from trainperf.results import parse_run

    assert registry.evaluated_after_run_stop() == {"minigo"}
    post_hoc = registry.evaluated_after_run_stop()
    saved = (("save_model", {"iteration": 1}, {}),)  # generation 1's model, saved within the run
    minigo = write_log(tmp_path / "minigo.txt", values={"submission_benchmark": "minigo"}, drop=FOREIGN, extra=saved)
    stop = next(json.loads(ln[9:])["time_ms"] for ln in minigo.read_text().splitlines() if '"run_stop"' in ln)
    retime(minigo, "eval_accuracy", stop + 3_600_000, last=True)
    run = parse_run(minigo, evaluated_after_stop=post_hoc)
    assert run.minutes == (stop - start_ms(minigo)) / 60000.0  # the result is still run_start to run_stop
    assert run.evaluations == [0.52, 0.95]  # the model evaluated after run_stop was saved within the run: counted
    assert not any(p.startswith(compliance.TIMING_PROBLEM) for p in check(minigo, rule_file).problems)
    with pytest.raises(ResultsError, match="after run_stop"):
        parse_run(minigo)  # a reader that does not say which benchmarks evaluate after the run
    unsaved = write_log(tmp_path / "unsaved.txt", values={"submission_benchmark": "minigo"}, drop=FOREIGN)
    retime(unsaved, "eval_accuracy", stop + 3_600_000, last=True)
    assert parse_run(unsaved, evaluated_after_stop=post_hoc).evaluations == [0.52]  # of no saved model: not counted
    own = write_log(tmp_path / "own.txt", values={"submission_benchmark": "minigo"}, extra=saved)
    retime(own, "eval_accuracy", stop + 3_600_000, last=True)
    with pytest.raises(ResultsError, match="timeline rule: eval_accuracy .* after run_stop .* evaluates on the clock"):
        parse_run(own, evaluated_after_stop=post_hoc)
    before = write_log(tmp_path / "before.txt", values={"submission_benchmark": "minigo"})
    retime(before, "eval_accuracy", start_ms(before) - 1)
    with pytest.raises(ResultsError, match="before run_start"):
        parse_run(before, evaluated_after_stop=post_hoc)  # before run_start is outside the run for every benchmark
    resnet = write_log(tmp_path / "resnet.txt", values={"submission_benchmark": "resnet"})
    retime(resnet, "eval_accuracy", stop + 3_600_000, last=True)
    with pytest.raises(ResultsError, match="after run_stop"):
        parse_run(resnet, evaluated_after_stop=post_hoc)


def test_an_evaluation_after_the_run_stop_of_a_failed_run_is_read(tmp_path):
    """NVIDIA's published v2.0 rnnt log of a diverged run evaluates once more after run_stop 'aborted': nothing is
    bought by it, so the run is read as the failure it is; after a 'success' it is still refused."""
    from trainperf.errors import ResultsError
    from trainperf.results import parse_run

    log = write_log(tmp_path / "aborted.txt", drop=FOREIGN)  # NVIDIA's log, not trainperf's
    text = log.read_text(encoding="utf-8")
    assert text.count('"status": "success"') == 1
    log.write_text(text.replace('"status": "success"', '"status": "aborted"'), encoding="utf-8")
    later = start_ms(log) + 3_600_000  # an hour after run_start, after its run_stop
    retime(log, "eval_accuracy", later, last=True)
    assert parse_run(log).status == "aborted"
    success = write_log(tmp_path / "success.txt", drop=FOREIGN)
    retime(success, "eval_accuracy", later, last=True)
    with pytest.raises(ResultsError, match="after run_stop"):
        parse_run(success)


def test_a_time_that_is_not_a_number_is_refused(tmp_path, rule_file):
    from trainperf.run_checks import timing_problems

    assert timing_problems(
        [(3, {"key": "run_start", "time_ms": float("nan")}), (4, {"key": "run_stop", "time_ms": T0 + 5})]
    ) == ["run_start at line 3 has time_ms nan, not a finite number"]
    assert timing_problems([(1, {"key": "run_start", "time_ms": T0}), (2, {"key": "run_stop", "time_ms": T0})]) == []


def test_review_makes_an_impossible_timing_a_problem_of_that_run(tmp_path):
    from types import SimpleNamespace

    from trainperf.submission.review import _Bench, _read_run

    log = write_log(tmp_path / "result_3.txt")
    line = retime(log, "run_stop", start_ms(log) - 60000)
    bench = _Bench(system="laptop", benchmark="resnet")
    run = _read_run(log, bench, SimpleNamespace(relative=lambda text: text.replace(str(tmp_path) + "/", "")))
    assert run.logged is None and run.records == []  # not checked or scored further: it counts as failed
    (problem,) = bench.problems
    assert problem.startswith("result_3.txt: cannot be read as a run (result_3.txt: run_stop at line")
    assert f"line {line}" in problem and "before run_start" in problem


@pytest.mark.parametrize(
    "key, fields, words",
    [
        ("run_stop", {"metadata": ["success"]}, "run_stop at line {n} has metadata ['success']"),
        ("run_stop", {"metadata": "success"}, "run_stop at line {n} has metadata 'success'"),
        ("eval_accuracy", {"metadata": "epoch 1"}, "eval_accuracy at line {n} has metadata 'epoch 1'"),
        ("eval_accuracy", {"value": "0.9"}, "eval_accuracy at line {n} has value '0.9'; it must be a number"),
    ],
)
def test_review_makes_a_bad_record_a_problem_of_that_run_not_a_traceback(tmp_path, key, fields, words):
    from types import SimpleNamespace

    from trainperf.submission.review import _Bench, _read_run

    log = write_log(tmp_path / "result_0.txt")
    lines = log.read_text(encoding="utf-8").splitlines()
    i = next(j for j, ln in enumerate(lines) if ln.startswith(":::MLLOG ") and json.loads(ln[9:])["key"] == key)
    lines[i] = ":::MLLOG " + json.dumps({**json.loads(lines[i][9:]), **fields})
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bench = _Bench(system="laptop", benchmark="resnet")
    run = _read_run(log, bench, SimpleNamespace(relative=lambda text: text.replace(str(tmp_path) + "/", "")))
    assert run.logged is None
    (problem,) = bench.problems
    assert problem.startswith("result_0.txt: cannot be read as a run (result_0.txt: ")
    assert words.format(n=i + 1) in problem, problem
    assert "redo the run" in problem


# --- the official checker's warnings are shown; a second run_start or run_stop fails ------------------------
def duplicate(path: Path, key: str) -> int:
    """Log the first ``key`` line twice; returns the line number of the copy."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = next(j for j, ln in enumerate(lines) if ln.startswith(":::MLLOG ") and json.loads(ln[9:])["key"] == key)
    lines.insert(i + 1, lines[i])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return i + 2


@pytest.fixture
def shipped_rules(rule_file, monkeypatch):
    """`trainperf check` picks the test's rule file as if it were the shipped mini rules of resnet."""
    monkeypatch.setattr(mini_rules, "shipped_rule_path", lambda benchmark: rule_file)


def test_check_prints_the_official_checkers_warnings(tmp_path, shipped_rules, capsys):
    from trainperf.cli import main

    log = write_log(tmp_path / "run.txt")
    duplicate(log, "submission_org")
    result = check_log(log)
    assert result.passed and result.problems == []
    assert result.warnings == ["'submission_org' is logged 2 times with the same value; the rules ask for exactly one"]
    assert main(["check", str(log)]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "(1 warning(s))" in out
    assert "  warning: 'submission_org' is logged 2 times with the same value" in out


@pytest.mark.parametrize("key", ["run_start", "run_stop"])
def test_check_fails_a_log_with_a_second_run_start_or_run_stop(tmp_path, shipped_rules, capsys, key):
    from trainperf.cli import main

    log = write_log(tmp_path / "run.txt")
    copy = duplicate(log, key)
    result = check_log(log)
    assert not result.passed and not is_target_only_failure(result)
    (problem,) = result.problems
    assert problem.startswith(compliance.TIMING_PROBLEM)
    assert f"{key} is logged 2 times (lines {copy - 1} and {copy})" in problem
    assert result.warnings == []  # the checker's own count (a warning only) is not repeated
    assert main(["check", str(log)]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and f"{key} is logged 2 times" in out


def test_checking_many_logs_at_once_gives_each_the_result_it_gets_alone(tmp_path):
    """check_logs runs the official checker once for all the files (trainperf/rules/_batch_checker.py); each file's
    result, problems and warnings are those check_log gives it alone, whether it passes, fails the checker, fails
    before the checker runs or cannot be read."""
    hparams = [("opt_weight_decay", 0.05, {}), ("opt_learning_rate_warmup_epochs", 0.8, {})]
    hparams += [("opt_learning_rate_schedule_epochs", 2, {}), ("label_smoothing", 0.1, {})]
    good = write_log(tmp_path / "good.txt", extra=hparams)  # the shipped mini resnet rules ask for these
    low = write_log(tmp_path / "low.txt", accuracies=(0.2, 0.3), extra=hparams)
    stop = write_log(tmp_path / "stop.txt")
    retime(stop, "run_stop", start_ms(stop) - 60000)  # fails before the checker runs
    paths = [good, low, stop, tmp_path / "missing.txt"]
    alone = [check_log(p) for p in paths[:3]]  # the shipped mini rules of the logs' benchmark
    together = compliance.check_logs(paths[:3], key=None)
    for a, b in zip(alone, together, strict=True):
        assert (a.passed, a.problems, a.warnings) == (b.passed, b.problems, b.warnings)
    assert [r.passed for r in together] == [True, False, False]
    (missing,) = compliance.check_logs(paths[3:])
    assert isinstance(missing, TrainperfError)
