"""A suite: N runs per benchmark with distinct logged seeds, result files, resume, scoring, summary.

Output layout (MLCommons): ``<out>/results/<system>/<benchmark>/result_<i>.txt`` and
``<out>/systems/<system>.json``, plus ``<out>/summary.json``. A run is written to a temporary file and
renamed when it ends, so a result file is always a whole run. A finished run is not redone (a result
file whose timing is impossible is refused, not resumed); a run interrupted with Ctrl-C is logged as
aborted, moved to ``<out>/interrupted/`` and redone next time. With more runs than the spec requires, the
score is that of the median window of consecutive runs (:mod:`trainperf.scoring`); ``summary.json`` names
that window (``window``, and ``in_window`` on each run) and still lists every run.

One suite at a time per output folder: the suite holds an exclusive lock on ``<out>/.trainperf.lock``
(``flock``) from start to end, and a second one on the same folder is refused at once. A run's log is a
new file with a unique name (``.result_<i>.txt.<pid>-<random>.partial``, never an existing file or a
link); a log line that cannot be written (a full disk) stops the suite at once and removes the partial
file; a finished log is fsynced before it is renamed into ``result_<i>.txt`` and its folder after. Partial
files that a killed suite left behind are removed when the next suite takes the lock. The system name
and the organization become file and folder names, so they are checked before anything is written.

A folder holds one kind of run: timed runs, dry runs or smoke runs (``kind`` in ``trainperf.json``). A smoke
suite writes its fixtures under ``<out>/smoke-data`` (:mod:`trainperf.harness.smoke`) and reads its data
there, whatever ``--data-dir`` says.

The folder itself (lock, partial files, results stored, interrupted runs kept aside, the summary) is
:class:`trainperf.harness.result_folder.ResultFolder`; resume's checks are :mod:`trainperf.harness.resume`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from trainperf import registry, seeds
from trainperf.contract.switches import Switches
from trainperf.dist import DistContext
from trainperf.errors import NotAvailableError, TrainperfError, UsageError
from trainperf.harness import smoke
from trainperf.harness.mllog import RunLog, mlperf_division
from trainperf.harness.result_folder import (
    INTERRUPTED,
    LOCK_FILE,
    SUITE_META,
    BenchmarkSummary,
    ResultFolder,
    check_out_folder,
    hold_out_folder,
    interrupted_runs,
    write_summary,
)
from trainperf.harness.resume import expected_settings
from trainperf.harness.resume import resume_run as _resume_run
from trainperf.harness.runner import RunObserver, RunOutcome, Submission, execute_run
from trainperf.nodes import node_count
from trainperf.rules.closed import check_overrides
from trainperf.spec import RunConfig
from trainperf.system import (
    SUBMISSION_STATUS,
    check_org_name,
    check_system_name,
    default_system_name,
    describe_system,
    write_system,
)


@dataclass(frozen=True, kw_only=True)
class SuiteOptions:
    benchmarks: tuple[str, ...]
    scale: str
    runs: int
    out: Path
    data_dir: Path
    seed: int | None = None  # None: each run's seed is drawn from the system's randomness; S: runs use S, S+1, ...
    division: str = "open"
    org: str = "trainperf-user"
    availability: str = "available"
    system_name: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()  # --set KEY=VALUE, checked against the division's rules
    dry_run: bool = False
    smoke: bool = False  # reference smoke runs on fixtures written under <out>/smoke-data
    drop_caches: bool = False
    precision: str = "auto"  # --precision: the training step's autocast (trainperf/harness/precision.py)
    switches: Switches = field(default_factory=Switches)  # --compile, --channels-last, ... (harness/switches.py)


def validate(options: SuiteOptions) -> dict[str, Any]:
    """Everything about a suite that is checked before anything runs or is written (the CLI calls it before it
    starts torchrun, :func:`run_suite` on every rank): the names, the kind of run, the overrides against the
    division's rules. Each benchmark's recipe with the overrides applied."""
    check_names(options)
    check_kind(options)
    return _checked_recipes(options)


def check_names(options: SuiteOptions) -> None:
    """The system name and the organization become file and folder names: plain names only."""
    if options.system_name is not None:
        check_system_name(options.system_name)
    check_org_name(options.org)


def check_kind(options: SuiteOptions) -> None:
    """Every benchmark runs this kind of run at this scale: a smoke suite is a reference-scale check with a
    fixture for every benchmark, and never a dry run; a scale that only dry-runs yet takes only dry runs."""
    if not options.dry_run:
        for key in options.benchmarks:
            spec = registry.get_spec(key, options.scale)
            if spec.dry_run_only:
                raise NotAvailableError(
                    f"{key} is not available yet at the {options.scale} scale: {spec.dry_run_only}. Only a dry run "
                    "(--dry-run) checks it today"
                )
    if not options.smoke:
        return
    if options.dry_run:
        raise UsageError("--smoke and --dry-run are two different checks: choose one")
    if options.scale != "reference":
        raise UsageError(
            "--smoke checks the reference scale's data path on a tiny fixture; the mini scale already runs on "
            "its real data in minutes: use --scale reference --smoke, or a mini run"
        )
    smoke.check_available(options.benchmarks)


def _checked_recipes(options: SuiteOptions) -> dict[str, Any]:
    """Each benchmark's recipe with the overrides applied, after the division's rules allowed them."""
    overrides = dict(options.overrides)
    recipes = {}
    for key in options.benchmarks:
        default = registry.default_recipe(key, options.scale)
        check_overrides(
            key,
            options.scale,
            options.division,
            default.as_dict(),
            registry.benchmark(key).closed_rules.get(options.scale, {}),
            overrides,
        )
        recipes[key] = default.with_overrides(overrides)
    return recipes


def run_suite(
    options: SuiteOptions,
    dist: DistContext,
    *,
    observer_for: Any = None,
    announce: Callable[[str], None] | None = None,
) -> list[BenchmarkSummary]:
    """Run (or resume) every benchmark's runs; write result files and the summary on rank 0.

    Rank 0 holds the output folder's lock (:func:`hold_out_folder`) from before the first file is written
    until the summary is; names and rules are checked before that (:func:`validate`). ``announce`` hears what a
    user should know before the runs start (where a smoke suite wrote its fixtures).
    """
    recipes = validate(options)  # rules are checked before anything runs or is written
    with hold_out_folder(options.out) if dist.is_main else nullcontext():
        return _run_suite(options, dist, recipes, observer_for=observer_for, announce=announce)


def _run_suite(
    options: SuiteOptions,
    dist: DistContext,
    recipes: dict[str, Any],
    *,
    observer_for: Any,
    announce: Callable[[str], None] | None = None,
) -> list[BenchmarkSummary]:
    folder, submission = _open_folder(options, dist.is_main)
    data_dir = _data_dir(options, dist.is_main, announce)
    dist.barrier()
    summaries: list[BenchmarkSummary] = []
    for key in options.benchmarks:
        spec, cls = registry.get_spec(key, options.scale), registry.workload_class(key)
        folder.prepare(key)
        runs: list[dict[str, Any]] = []
        stopped = partial(_stopped, folder, summaries, key, spec, options.scale, runs)
        for i in range(options.runs):
            fixed_seed = None if options.seed is None else options.seed + i
            resumed = dist.broadcast_object(_resumed(folder, options, spec, key, i, fixed_seed))
            if resumed is not None:
                runs.append(resumed)
                continue
            config = _run_config(options, dist, fixed_seed)
            observe = partial(observer_for, key, i, options.runs) if observer_for else RunObserver
            execute = partial(_execute, observe, cls, spec, recipes[key], config, submission=submission,
                              data_dir=data_dir, dist=dist, drop_caches=options.drop_caches)  # fmt: skip
            runs.append(folder.run(key, i, execute, stopped))
        summaries.append(folder.summary(key, spec, options.scale, runs))
        folder.write_summary(summaries)
    return summaries


def _open_folder(options: SuiteOptions, is_main: bool) -> tuple[ResultFolder, Submission]:
    """The result folder of this system, checked and given its system description (rank 0 writes), and what the
    runs log about the submission."""
    nodes = node_count()  # torchrun's agents: the system is that many machines like this one
    system = options.system_name or default_system_name(nodes=nodes)
    if is_main:
        check_out_folder(options.out, system, options.scale, options.dry_run, options.smoke)
        desc = describe_system(
            org=options.org,
            division=mlperf_division(options.division, options.scale),  # the division the logs declare
            availability=options.availability,
            system_name=system,
            nodes=nodes,
        )
        write_system(desc, options.out / "systems" / f"{system}.json")
    submission = Submission(org=options.org, platform=system, status=SUBMISSION_STATUS[options.availability])
    return ResultFolder(options.out, system, is_main=is_main), submission


def _data_dir(options: SuiteOptions, is_main: bool, announce: Callable[[str], None] | None) -> Path:
    """Where the runs read their data: ``--data-dir``, or the fixtures a smoke suite writes (on rank 0)."""
    if not options.smoke:
        return options.data_dir
    data_dir = smoke.fixture_root(options.out)
    if is_main:
        for key in options.benchmarks:
            folder, description = smoke.write_fixture(key, data_dir)
            if announce is not None:
                announce(f"{key} smoke run: fixture in the reference layout at {folder} ({description}); not a result")
    return data_dir


def _resumed(
    folder: ResultFolder, options: SuiteOptions, spec: Any, key: str, i: int, fixed_seed: int | None
) -> dict[str, Any] | None:
    """Run ``i`` read back when its result file exists (rank 0 reads it; None elsewhere)."""
    final = folder.result(key, i)
    if not (folder.is_main and final.exists()):
        return None
    return _resume_run(final, folder.system, options.scale, key, expected_settings(options, spec, fixed_seed))


def _run_config(options: SuiteOptions, dist: DistContext, fixed_seed: int | None) -> RunConfig:
    if fixed_seed is None:  # drawn on rank 0, the same on every rank
        seed, source = int(dist.broadcast_object(seeds.draw_seed())), seeds.SOURCE_SYSTEM
    else:
        seed, source = fixed_seed, seeds.SOURCE_FIXED
    return RunConfig(
        seed=seed,
        seed_source=source,
        dry_run=options.dry_run,
        smoke=options.smoke,
        division=options.division,
        overrides=dict(options.overrides),
        precision=options.precision,
        switches=options.switches,
    )


def _execute(observe: Callable[[], RunObserver], *args: Any, log: RunLog, **kwargs: Any) -> RunOutcome:
    """One run, with its observer made once its log file is open."""
    return execute_run(*args, log=log, observer=observe(), **kwargs)


def _stopped(
    folder: ResultFolder,
    summaries: list[BenchmarkSummary],
    key: str,
    spec: Any,
    scale: str,
    runs: list[dict[str, Any]],
    record: dict[str, Any] | None,
) -> None:
    """The summary on the way out of a failed run (with its ``record``) or an interrupted one (rank 0)."""
    summaries.append(folder.summary(key, spec, scale, runs + ([record] if record is not None else [])))
    folder.write_summary(summaries, quietly=True)


__all__ = [
    "INTERRUPTED",
    "LOCK_FILE",
    "SUITE_META",
    "SuiteOptions",
    "BenchmarkSummary",
    "validate",
    "run_suite",
    "write_summary",
    "hold_out_folder",
    "interrupted_runs",
    "check_names",
    "check_kind",
    "TrainperfError",
]
