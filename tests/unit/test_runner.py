"""The run state machine and the suite around it, with a fake workload (no real training)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch
from helpers import FAKE_BENCHMARK, FAKE_SPEC, FakeRecipe, FakeWorkload, first, keys_in

from trainperf import registry
from trainperf.contract.workload import TorchState
from trainperf.dist import DistContext
from trainperf.errors import ResultsError, RuleError, RunFailed, RunInterrupted, UsageError
from trainperf.harness.mllog import RunLog
from trainperf.harness.runner import Submission, execute_run
from trainperf.harness.suite import SuiteOptions, run_suite
from trainperf.harness.torch_state import GlobalTorchState
from trainperf.results import read_mllog
from trainperf.spec import RunConfig

SUB = Submission(org="test-org", platform="test-system", status="onprem")


@pytest.fixture(autouse=True)
def _fresh_fake():
    FakeWorkload.qualities = [0.5, 0.9]
    FakeWorkload.interrupt_at_step = None
    FakeWorkload.interrupt_with = KeyboardInterrupt
    yield


def run_once(tmp_path: Path, spec=FAKE_SPEC, **kw):
    path = tmp_path / "log.txt"
    log = RunLog(path)
    try:
        outcome = execute_run(
            FakeWorkload,
            spec,
            FakeRecipe(),
            RunConfig(seed=7, **kw),
            log=log,
            submission=SUB,
            data_dir=tmp_path,
            dist=DistContext(),
        )
    finally:
        log.close()
    return outcome, path


def test_events_follow_mlperf_order(tmp_path):
    outcome, path = run_once(tmp_path)
    keys = keys_in(path)
    order = [
        "cache_clear",
        "init_start",
        "seed",
        "init_stop",
        "run_start",
        "block_start",
        "epoch_start",
        "epoch_stop",
        "block_stop",
        "eval_start",
        "eval_stop",
        "eval_accuracy",
        "run_stop",
    ]
    positions = [keys.index(k) for k in order]
    assert positions == sorted(positions)
    assert keys[-1] == "run_stop"
    for k in (
        "submission_benchmark",
        "submission_org",
        "submission_division",
        "submission_platform",
        "submission_status",
        "global_batch_size",
        "gradient_accumulation_steps",
        "train_samples",
        "eval_samples",
        "opt_name",
        "trainperf_scale",
    ):
        assert keys.count(k) == 1, k
    assert first(path, "seed")["value"] == 7


def test_stops_with_success_at_the_first_eval_that_reaches_the_target(tmp_path):
    FakeWorkload.qualities = [0.5, 0.79, 0.85, 0.95]
    outcome, path = run_once(tmp_path)
    assert outcome.status == "success" and outcome.reason == "target"
    assert outcome.progress == 3.0
    assert [r for r in keys_in(path)].count("eval_accuracy") == 3
    assert first(path, "run_stop")["metadata"]["status"] == "success"
    stop, start = first(path, "run_stop")["time_ms"], first(path, "run_start")["time_ms"]
    assert outcome.minutes == pytest.approx((stop - start) / 60000)


def test_budget_spent_is_aborted(tmp_path):
    FakeWorkload.qualities = [0.1]
    outcome, path = run_once(tmp_path)
    assert outcome.status == "aborted" and outcome.reason == "progress budget"
    assert outcome.progress == FAKE_SPEC.max_progress
    assert first(path, "run_stop")["metadata"]["status"] == "aborted"


def test_ctrl_c_logs_run_stop_aborted(tmp_path):
    FakeWorkload.interrupt_at_step = 7
    with pytest.raises(RunInterrupted):
        run_once(tmp_path)
    path = tmp_path / "log.txt"
    assert keys_in(path)[-1] == "run_stop"
    assert first(path, "run_stop")["metadata"]["status"] == "aborted"


def test_initialization_over_the_limit_is_refused(tmp_path):
    spec = dataclasses.replace(FAKE_SPEC, max_init_minutes=0.0)
    with pytest.raises(RuleError, match="initialization took"):
        run_once(tmp_path, spec=spec)
    assert "run_start" not in keys_in(tmp_path / "log.txt")


# --- the suite -------------------------------------------------------------------------------------
# the fake_registry fixture (tests/conftest.py) answers every key with the fake benchmark


def options(tmp_path, **kw):
    base = dict(
        benchmarks=("resnet",), scale="mini", runs=3, out=tmp_path / "out", data_dir=tmp_path, system_name="test-system"
    )
    base.update(kw)
    return SuiteOptions(**base)


def test_suite_writes_mlcommons_layout_with_distinct_seeds(tmp_path, fake_registry):
    [summary] = run_suite(options(tmp_path), DistContext())
    folder = tmp_path / "out" / "results" / "test-system" / "resnet"
    files = sorted(folder.glob("result_*.txt"))
    assert [f.name for f in files] == ["result_0.txt", "result_1.txt", "result_2.txt"]
    seeds = [first(f, "seed")["value"] for f in files]
    assert len(set(seeds)) == 3
    assert (tmp_path / "out" / "systems" / "test-system.json").exists()
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert doc["benchmarks"][0]["score_label"] == "preview" and doc["benchmarks"][0]["window"] is None
    assert summary.score.successes == 3
    assert not list(folder.glob(".*partial"))


def test_suite_resumes_without_redoing_finished_runs(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=2), DistContext())
    folder = tmp_path / "out" / "results" / "test-system" / "resnet"
    before = (folder / "result_0.txt").read_text()
    [summary] = run_suite(options(tmp_path, runs=3), DistContext())
    assert (folder / "result_0.txt").read_text() == before
    assert [r["resumed"] for r in summary.runs] == [True, True, False]


def test_interrupted_run_is_kept_aside_and_earlier_results_stay(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1), DistContext())
    FakeWorkload.interrupt_at_step = 3
    with pytest.raises(RunInterrupted):
        run_suite(options(tmp_path, runs=2), DistContext())
    folder = tmp_path / "out" / "results" / "test-system" / "resnet"
    assert (folder / "result_0.txt").exists()
    assert not (folder / "result_1.txt").exists()
    aside = tmp_path / "out" / "interrupted" / "test-system" / "resnet"
    assert first(aside / "result_1-1.txt", "run_stop")["metadata"]["status"] == "aborted"
    with pytest.raises(RunInterrupted):  # interrupted again: kept under another name
        run_suite(options(tmp_path, runs=2), DistContext())
    assert sorted(p.name for p in aside.iterdir()) == ["result_1-1.txt", "result_1-2.txt"]
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [r["reason"] for r in doc["benchmarks"][0]["interrupted"]] == ["interrupted by the user"] * 2
    FakeWorkload.interrupt_at_step = None
    [summary] = run_suite(options(tmp_path, runs=2), DistContext())  # the interrupted run is redone, visibly
    assert [r["status"] for r in summary.runs] == ["success", "success"]
    assert len(summary.interrupted) == 2


def test_results_of_another_system_are_refused(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1), DistContext())
    with pytest.raises(ResultsError, match="holds results of system 'test-system'"):
        run_suite(options(tmp_path, runs=1, system_name="other-machine"), DistContext())


def test_result_file_from_another_platform_is_refused(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1), DistContext())
    f = tmp_path / "out" / "results" / "test-system" / "resnet" / "result_0.txt"
    f.write_text(f.read_text().replace('"test-system"', '"someone-else"'))
    with pytest.raises(ResultsError, match="was made on system 'someone-else'"):
        run_suite(options(tmp_path, runs=1), DistContext())


def test_unwritable_output_folder(tmp_path, fake_registry):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ResultsError, match="not writable"):
        run_suite(options(tmp_path, out=blocker / "out"), DistContext())


# --- the harness owns the step and the global torch state ----------------------------------------------
class _DenormalWorkload(FakeWorkload):
    """Asks for flush-denormal and two threads, and changes another global setting on its own."""

    TORCH_STATE = TorchState(flush_denormal=True, num_threads=1)
    seen: list[tuple[bool, int]] = []

    def build_model(self):
        torch.set_float32_matmul_precision("medium")  # a global change the harness must undo
        type(self).seen.append((_flushes_denormals(), torch.get_num_threads()))
        return super().build_model()


class _PlainWorkload(FakeWorkload):
    seen: list[tuple[bool, int]] = []

    def build_model(self):
        type(self).seen.append((_flushes_denormals(), torch.get_num_threads()))
        return super().build_model()


def _flushes_denormals() -> bool:
    return float(torch.tensor([1e-39], dtype=torch.float32).mul(1.0)) == 0.0


def test_global_torch_state_is_restored_between_benchmarks_of_one_suite(tmp_path, monkeypatch):
    classes = {"resnet": _DenormalWorkload, "ssd": _PlainWorkload}
    monkeypatch.setattr(registry, "benchmark", lambda key: FAKE_BENCHMARK)
    monkeypatch.setattr(registry, "workload_class", lambda key: classes[key])
    before = GlobalTorchState.now()
    closed = FakeWorkload.closed
    run_suite(options(tmp_path, benchmarks=("resnet", "ssd"), runs=1), DistContext())
    assert _DenormalWorkload.seen == [(True, 1)]
    assert _PlainWorkload.seen == [(False, before.num_threads)]
    assert GlobalTorchState.now() == before and not _flushes_denormals()
    assert FakeWorkload.closed == closed + 2  # close() after every run


def test_close_is_called_when_a_run_fails(tmp_path):
    class Broken(FakeWorkload):
        def evaluate(self, model):
            raise RuntimeError("evaluation broke")

    closed = FakeWorkload.closed
    with pytest.raises(RunFailed, match="evaluation broke") as failed:
        log = RunLog(tmp_path / "log.txt")
        try:
            execute_run(
                Broken,
                FAKE_SPEC,
                FakeRecipe(),
                RunConfig(seed=1),
                log=log,
                submission=SUB,
                data_dir=tmp_path,
                dist=DistContext(),
            )
        finally:
            log.close()
    assert FakeWorkload.closed == closed + 1
    assert isinstance(failed.value.__cause__, RuntimeError)
    assert failed.value.outcome.status == "aborted"
    # the started run's log ends with run_stop aborted, the reason logged before it
    assert keys_in(tmp_path / "log.txt")[-2:] == ["trainperf_abort_reason", "run_stop"]
    assert first(tmp_path / "log.txt", "trainperf_abort_reason")["value"].startswith("error: RuntimeError")


class _CountingSGD(torch.optim.SGD):
    steps = 0

    def step(self, closure=None):
        type(self).steps += 1
        return super().step(closure)


class _AccumulatingWorkload(FakeWorkload):
    losses = 0

    def build_optimizer(self, model):
        return _CountingSGD(model.parameters(), lr=0.1), None

    def loss(self, model, batch):
        type(self).losses += 1
        return super().loss(model, batch)


def test_gradient_accumulation_is_logged_and_steps_once_per_global_batch(tmp_path):
    recipe = dataclasses.replace(FakeRecipe(), gradient_accumulation_steps=2)
    _CountingSGD.steps = _AccumulatingWorkload.losses = 0
    log = RunLog(tmp_path / "log.txt")
    try:
        outcome = execute_run(
            _AccumulatingWorkload,
            FAKE_SPEC,
            recipe,
            RunConfig(seed=1),
            log=log,
            submission=SUB,
            data_dir=tmp_path,
            dist=DistContext(),
        )
    finally:
        log.close()
    assert first(tmp_path / "log.txt", "gradient_accumulation_steps")["value"] == 2
    steps_per_epoch = FakeWorkload.train_samples // recipe.global_batch_size
    assert _CountingSGD.steps == round(outcome.progress * steps_per_epoch)
    assert _AccumulatingWorkload.losses == 2 * _CountingSGD.steps


def test_a_batch_that_does_not_divide_is_refused_before_anything_runs(tmp_path):
    recipe = dataclasses.replace(FakeRecipe(), global_batch_size=9, gradient_accumulation_steps=2)
    with pytest.raises(UsageError, match="not divisible"):
        execute_run(
            FakeWorkload,
            FAKE_SPEC,
            recipe,
            RunConfig(seed=1),
            log=RunLog(None),
            submission=SUB,
            data_dir=tmp_path,
            dist=DistContext(),
        )


def test_samples_unit_logs_sample_counts_and_a_recipe_interval(tmp_path):
    from trainperf.spec import SAMPLES

    spec = dataclasses.replace(
        FAKE_SPEC, unit=SAMPLES, eval_interval=lambda r: 3 * r.global_batch_size, max_progress=100.0
    )
    FakeWorkload.qualities = [0.1, 0.1, 0.9]
    outcome, path = run_once(tmp_path, spec=spec)
    evals = [r["metadata"]["epoch_num"] for r in read_mllog(path) if r["key"] == "eval_accuracy"]
    assert evals == [24, 48, 72]  # every 3 steps of 8 samples
    blocks = [r["metadata"] for r in read_mllog(path) if r["key"] == "block_start"]
    assert (blocks[0]["first_epoch_num"], blocks[0]["epoch_count"]) == (0, 24)
    assert "epoch_start" not in keys_in(path)
    assert outcome.unit == SAMPLES and outcome.progress == 72


# --- resume refuses impossible results; more runs than required score the median window ---------------------
def _retime(path: Path, key: str, shift_from: str, delta_ms: float, *, last: bool = False) -> None:
    """Set the first (or last) ``key`` record's time_ms to ``shift_from``'s time_ms + ``delta_ms``."""
    token = ":::MLLOG "
    lines = path.read_text().splitlines()
    recs = {i: json.loads(ln[ln.find(token) + len(token) :]) for i, ln in enumerate(lines) if token in ln}
    base = next(r["time_ms"] for r in recs.values() if r["key"] == shift_from)
    i = [j for j, r in recs.items() if r["key"] == key][-1 if last else 0]
    lines[i] = token + json.dumps({**recs[i], "time_ms": base + delta_ms})
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "key, shift_from, delta, last, words",
    [
        ("run_stop", "run_start", -60000, False, "is before run_start"),
        ("eval_accuracy", "run_stop", 60000, True, "is after run_stop"),
        ("eval_accuracy", "run_start", -1, False, "is before run_start"),
    ],
)
def test_resume_refuses_a_result_with_impossible_timing(tmp_path, fake_registry, key, shift_from, delta, last, words):
    run_suite(options(tmp_path, runs=1), DistContext())
    folder = tmp_path / "out" / "results" / "test-system" / "resnet"
    _retime(folder / "result_0.txt", key, shift_from, delta, last=last)
    before = (folder / "result_0.txt").read_text()
    refused = rf"cannot resume .*result_0\.txt: (timeline rule: )?{key} at line \d+ .*{words}"  # the rule named
    with pytest.raises(ResultsError, match=refused) as err:
        run_suite(options(tmp_path, runs=2), DistContext())
    assert "redo the run" in str(err.value)
    assert (folder / "result_0.txt").read_text() == before and not (folder / "result_1.txt").exists()


def test_summary_names_the_scored_window_and_lists_every_run(tmp_path, monkeypatch):
    three = dataclasses.replace(FAKE_BENCHMARK, specs={"mini": dataclasses.replace(FAKE_SPEC, runs_required=3)})
    monkeypatch.setattr(registry, "benchmark", lambda key: three)
    monkeypatch.setattr(registry, "workload_class", lambda key: FakeWorkload)
    [summary] = run_suite(options(tmp_path, runs=4), DistContext())
    assert summary.score.valid and summary.score.windows == 2 and len(summary.score.window_runs) == 3
    assert summary.score.note.startswith("lower median of 2 windows of 3 consecutive runs (ordered by run_start time)")
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())["benchmarks"][0]
    assert doc["valid"] and doc["note"] == summary.score.note and len(doc["runs"]) == 4
    window = doc["window"]
    assert window["windows"] == 2 and window["runs"] in ("1-3 of 4", "2-4 of 4")
    assert sorted(window["logs"]) == sorted(r["log"] for r in doc["runs"] if r["in_window"])
    assert all(isinstance(r["start_ms"], int | float) for r in doc["runs"])


class _DetailedWorkload(FakeWorkload):
    def evaluate(self, model) -> dict[str, float]:
        return {**super().evaluate(model), "games": 40.0, "black_wins": 7.0}


def test_fields_beside_the_metric_are_logged_with_each_evaluation(tmp_path):
    FakeWorkload.qualities = [0.5, 0.9]
    path = tmp_path / "log.txt"
    log = RunLog(path)
    try:
        execute_run(
            _DetailedWorkload,
            FAKE_SPEC,
            FakeRecipe(),
            RunConfig(seed=7),
            log=log,
            submission=SUB,
            data_dir=tmp_path,
            dist=DistContext(),
        )
    finally:
        log.close()
    records = read_mllog(path)
    accuracy = [r for r in records if r["key"] == "eval_accuracy"]
    details = [r for r in records if r["key"] == "trainperf_eval_details"]
    assert [r["value"] for r in accuracy] == [0.5, 0.9]  # the metric alone, as the rules expect
    assert [r["value"] for r in details] == [{"games": 40.0, "black_wins": 7.0}] * 2
    assert [r["metadata"]["epoch_num"] for r in details] == [r["metadata"]["epoch_num"] for r in accuracy]


def test_an_evaluation_without_other_fields_logs_no_details(tmp_path):
    _, path = run_once(tmp_path)
    assert "trainperf_eval_details" not in keys_in(path)


def test_peak_memory_is_the_runs_own_not_its_parents():
    """``ru_maxrss`` survives ``execve``: a run started by a large process (a test session) reported the parent's
    peak. The peak comes from ``VmHWM``, this program's own."""
    import subprocess
    import sys

    ballast = bytearray(1536 * 2**20)  # 1.5 GiB, touched
    ballast[::4096] = b"x" * len(ballast[::4096])
    code = "from trainperf.harness.runner import _peak_rss_mib; print(_peak_rss_mib())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    del ballast
    assert 10 < float(out) < 1024, out


def test_first_evaluation_and_budget_may_be_functions_of_the_recipe(tmp_path):
    spec = dataclasses.replace(
        FAKE_SPEC, first_eval=lambda r: r.global_batch_size / 4, max_progress=lambda r: r.global_batch_size / 2
    )
    assert spec.eval_points(FakeRecipe()) == [2.0, 3.0, 4.0]  # batch 8: from epoch 2, every 1, budget 4
    FakeWorkload.qualities = [0.1]
    outcome, path = run_once(tmp_path, spec=spec)
    evals = [r["metadata"]["epoch_num"] for r in read_mllog(path) if r["key"] == "eval_accuracy"]
    assert evals == [2, 3, 4]
    assert outcome.status == "aborted" and outcome.reason == "progress budget" and outcome.progress == 4.0


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("first_eval", lambda r: 0.0, "the first evaluation came out as 0.0"),
        ("max_progress", lambda r: float("nan"), "the progress budget came out as nan"),
        ("first_eval", lambda r: 5.0, "the first evaluation (5) comes after the budget (4)"),
    ],
)
def test_a_recipe_schedule_that_cannot_run_is_refused_by_name(field, value, words):
    spec = dataclasses.replace(FAKE_SPEC, **{field: value})
    with pytest.raises(ValueError, match=re.escape(words)):
        spec.eval_points(FakeRecipe())


def test_evaluations_log_epoch_num_as_mlperf_asks_the_benchmark_to_report_it(tmp_path):
    """training_rules.adoc's epoch reporting for the RCPs: DLRM "1 + Epoch / 20.0 (1.05, 1.1, 1.15...)", as the
    published v2.0 logs and rcps_dlrm.json count; the progress, the schedule and the budget are unchanged."""
    from trainperf import registry
    from trainperf.results import read_mllog

    assert registry.get_spec("dlrm", "reference").epoch_num_offset == 1.0
    assert registry.get_spec("dlrm", "mini").epoch_num_offset == 0.0  # trainperf's own mini RCPs count from 0
    FakeWorkload.qualities = [0.5, 0.95]
    (tmp_path / "plain").mkdir()
    (tmp_path / "shifted").mkdir()
    plain, plain_log = run_once(tmp_path / "plain")
    shifted, shifted_log = run_once(tmp_path / "shifted", spec=dataclasses.replace(FAKE_SPEC, epoch_num_offset=1.0))
    assert shifted.progress == plain.progress
    nums = [
        [r["metadata"]["epoch_num"] for r in read_mllog(log) if r["key"] == "eval_accuracy"]
        for log in (plain_log, shifted_log)
    ]
    assert nums[1] == [n + 1 for n in nums[0]] and len(nums[0]) == 2
