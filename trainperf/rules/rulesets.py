"""The MLPerf Training rulesets the official tools ship, and the round a package or a log belongs to.

trainperf's own runs follow MLPerf Training v2.0 (``trainperf.spec.MLPERF_RULESET``). A real package may come from
any round: the official tools (mlperf-logging) judge it by the ruleset they are given (``compliance_checker
--ruleset``, ``rcp_checker --rcp_version``, ``package_checker`` and ``result_summarizer``'s ruleset argument), so
``check`` and ``review`` give them the package's own. Every training ruleset the installed mlperf-logging ships
from 1.0.0 on is supported (:func:`supported`: a ``training_<X.Y.Z>`` folder of its compliance checker and of its
rcp checker).

The round is, in this order (:func:`package_ruleset`):

1. the one the user names (``--ruleset``);
2. for trainperf's own logs (they carry ``trainperf_*`` keys), the ruleset of their benchmark's round
   (``trainperf/rounds/``: 2.0.0 for the v2.0 eight, 6.1.0 for the current round's);
3. the results repository's name in the package's path (``training_results_v1.1/NVIDIA``): MLCommons publishes
   each round's packages in a repository of that name;
4. otherwise an inference from the logs, said in a warning: a published package carries no round in its files
   (the v1.1 and v2.1 logs log no MLPerf version, and their system descriptions name none), but its runs were made
   before its round closed and the benchmarks it holds were those of its round. The round is the first whose
   results end (:data:`ROUND_ENDS`, with two weeks for a result's later runs) on or after the latest ``run_start`` of
   the package and whose benchmarks
   (mlperf-logging's ``benchmark_meta``) include every benchmark of the package. A package made entirely of runs
   from an earlier round (MLCommons re-published Samsung's May 2022 logs in v2.1) is read as that round: name
   the round with ``--ruleset`` there.

Some checks of the installed tools were added after a round: they are that round's warnings, not its errors
(:func:`later_check`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from trainperf import rounds
from trainperf.errors import NotAvailableError, UsageError
from trainperf.spec import MLPERF_RULESET

USAGE = "training"
FIRST = (1, 0, 0)  # rulesets before 1.0.0 (v0.6, v0.7) are not supported

# The last day of each round's published results: the latest run_start date among the round's published result
# files (trainperf/history/data/mlperf_training_results.csv, column log_date: the date of a result's first run; rounds
# v1.0 to v5.1). A run of a round is never later than that but for the other runs of the same result, made in the
# days after its first (ROUND_SLACK); rounds the history does not hold yet are open-ended.
ROUND_ENDS: dict[str, dt.date] = {
    "1.0.0": dt.date(2021, 6, 22),
    "1.1.0": dt.date(2021, 11, 10),
    "2.0.0": dt.date(2022, 6, 16),
    "2.1.0": dt.date(2022, 10, 27),
    "3.0.0": dt.date(2023, 6, 7),
    "3.1.0": dt.date(2023, 10, 12),
    "4.0.0": dt.date(2024, 5, 24),
    "4.1.0": dt.date(2024, 10, 22),
    "5.0.0": dt.date(2025, 5, 15),
    "5.1.0": dt.date(2025, 10, 18),
}
# The next round's own runs start months after a round ends (v2.0's first fresh runs: April 2022, after v1.1's end in
# November 2021); two weeks cover a result's later runs.
ROUND_SLACK = dt.timedelta(days=14)

# Checks of mlperf-logging 4.1.68 added in a later round than some rulesets it is given: (the first ruleset whose
# round's tools made the check, what it is, the commit of mlcommons/logging that added it).
LATER_CHECKS: dict[str, tuple[str, str]] = {
    # seed_checker.py: "Result file X logs no seed." for any run without a seed; before, a run without a seed was an
    # error only where another run of the benchmark logs one (tag 4.1.0-rc4 has it, 4.1.0-rc1 does not)
    "seed required": ("4.1.0", "mlcommons/logging ac0096c"),
    # rcp_checker.py: "Batch sizes in files do not match." (and no benchmark name, then KeyError: None) where a
    # benchmark's result files log different global_batch_size values (tag 3.0.0-rc1 has it, 2.1.0 does not)
    "batch sizes compared": ("3.0.0", "mlcommons/logging 74c310b"),
    # system_desc_checker.py: a system description's status must be one of four phrases ("Available on-premise",
    # "Available cloud", "Research, Development, or Internal (RDI)", "Preview"), for every ruleset from 4.0.0 on
    # (92c4281 and c20b57b, 2024-05-14, after the v4.0 deadline; 191ed2c meant it from v4.1 on, but its version test
    # still catches 4.0.0); first in tag 4.1.0-rc4. The v4.0 round's tools (tags 4.0.0-rc1 to -rc3) accepted the
    # looser list of STATUS_ACCEPTED, and the tools of earlier rounds did not check the field.
    "status phrases": ("4.1.0", "mlcommons/logging 92c4281 and c20b57b, 2024-05-14"),
}
# The status values a round's own system-description checker accepted, where it checked them (compared as written
# and lower-cased): mlcommons/logging 9d75268 (2023-12-12), as tagged 4.0.0-rc1 to 4.0.0-rc3.
STATUS_ACCEPTED: dict[str, tuple[str, ...]] = {
    "4.0.0": (
        "available on-premise",
        "onprem",
        "available",
        "available onprem",
        "available cloud",
        "cloud",
        "research, development, or internal (rdi)",
        "rdi",
        "research",
        "development",
        "internal",
        "preview",
    ),  # fmt: skip
}
# Benchmarks whose round's reference evaluates timestamped checkpoints after the clock has stopped, so that a log may
# hold evaluations after run_stop, whose time is "updated to the timestamp of the first passing checkpoint"
# (training_rules.adoc, Quality measure, mlcommons/training_policies ff51573, 2020): benchmark -> (first ruleset, last
# ruleset, evidence). trainperf's own benchmarks say so on their Benchmark (``evaluates_after_run_stop``: minigo, of
# v1.0 to v2.1).
OFFLINE_EVALUATION: dict[str, tuple[str, str, str]] = {
    "stable_diffusion": (
        "3.1.0",
        "5.0.0",
        "training_rules.adoc, Stable Diffusion: the collected checkpoints are evaluated offline and the time is not "
        "counted (mlcommons/training_policies f9531cd, 2023-07-23)",
    ),
}
# Checks the installed rule files make that a round's own checker only warned about: ruleset -> (what, evidence).
# v1.1: mlperf-logging's checker of the round (mlcommons/logging 63c9709, 2021-10-05, in tag 1.1.0-rc2 to -rc4) turned
# a missing weights_initialization line or a tensor list other than the reference's into a warning ("can be ignored
# for 1.1.0"); 4c04112 (2022-03-29, for v2.0) made them errors again, for every ruleset, as 4.1.68 has them.
WEIGHTS_INIT_WARNED = {
    "1.1.0": "the v1.1 round's compliance checker only warned about it (mlcommons/logging 63c9709: \"can be ignored "
    'for 1.1.0"; made an error again for v2.0 by 4c04112)',
}
# Keys the installed rule files renamed after a round: ruleset -> {installed name: (the round's name, evidence)}.
RENAMED_AFTER = {
    "2.1.0": {
        "opt_lamb_epsilon": (
            "opt_epsilon",
            "the installed 2.1.0 closed rules renamed opt_epsilon after the v2.1 results were published "
            "(mlcommons/logging d82b94d, 2022-11-22); the round's own rules asked for opt_epsilon, which the log has",
        )
    },
}
# Checks of the installed open rule files that are placeholders no real log of the benchmark can pass: ruleset ->
# {the check as the checker prints it: why it is a warning}. In mlperf-logging 4.1.68, training_6.1.0/open_<key>.yaml
# of the LLM benchmarks holds only a note that its official requirements are still to be written and an eval_accuracy
# ATLEAST_ONE_CHECK "v['value'] < 1.0", which no log-perplexity meets (the closed target is 3.3); the log's quality
# target is checked by trainperf's own rules for the benchmark (the mini rule file) instead.
OPEN_PLACEHOLDERS: dict[str, dict[str, str]] = {
    "6.1.0": {
        "v['value'] < 1.0": "training_6.1.0/open_<benchmark>.yaml is a placeholder of the official tools (its "
        "compliance requirements are marked as still to be written) asking for a value below 1.0, which no "
        "log-perplexity meets; the quality target is checked by the benchmark's own rules instead",
    },
}
# Checks of the installed open rule files that fix a value of the reference scale: ruleset -> {key: the kind of check}.
# In mlperf-logging 4.1.68, training_6.1.0/open_gpt_oss_20b.yaml (and the other 6.1 benchmarks' open files that are
# not placeholders) ask an open submission for the reference's sequence length (a CHECK on max_sequence_length) and
# its quality target (an ATLEAST_ONE_CHECK on eval_accuracy). A trainperf mini log is logged as open and judged by the
# benchmark's mini rules, at its own scale; only these checks, read from the installed open file itself, are said as
# warnings for it (explain.reference_scale_warning); every other check of the file applies.
# open_deepseekv3_671b.yaml also fixes the reference's batch (>= 15,360) and evaluation set (1,024 sequences), and
# open_flux1.yaml its target on averaged_validation_loss.
REFERENCE_SCALE_OPEN_CHECKS: dict[str, dict[str, str]] = {
    "6.1.0": {
        "max_sequence_length": "CHECK",
        "global_batch_size": "CHECK",
        "eval_samples": "CHECK",
        "eval_accuracy": "ATLEAST_ONE_CHECK",
        "averaged_validation_loss": "ATLEAST_ONE_CHECK",
    },
}
# What the value a reference-scale check fixes is, by the key it checks (a warning names it): MLPerf's key names, the
# same in every benchmark's file.
REFERENCE_SCALE_SUBJECTS: dict[str, str] = {
    "max_sequence_length": "sequence length",
    "global_batch_size": "batch size",
    "eval_samples": "evaluation set size",
    "eval_accuracy": "quality target",
    "averaged_validation_loss": "quality target",
}
_TRAINPERF_KEY = "trainperf_"  # trainperf's own logs carry trainperf_scale, trainperf_division, ...
_REPOSITORY = re.compile(r"^training_results_v(\d+)\.(\d+)$")


def _version(ruleset: str) -> tuple[int, ...]:
    return tuple(int(x) for x in ruleset.split("."))


def version(ruleset: str) -> tuple[int, ...]:
    """``4.0.0`` -> ``(4, 0, 0)``: rulesets in the order of their rounds."""
    return _version(ruleset)


@cache
def supported() -> tuple[str, ...]:
    """The training rulesets, from 1.0.0 on, that the installed compliance and rcp checkers both ship, in order."""
    import mlperf_logging.compliance_checker as cc
    import mlperf_logging.rcp_checker as rc

    def shipped(package: object) -> set[str]:
        folder = Path(str(getattr(package, "__file__", ""))).parent
        return {p.name.removeprefix(f"{USAGE}_") for p in folder.glob(f"{USAGE}_*.*.*") if p.is_dir()}

    found = [r for r in shipped(cc) & shipped(rc) if re.fullmatch(r"\d+\.\d+\.\d+", r) and _version(r) >= FIRST]
    return tuple(sorted(found, key=_version))


def normalize(text: str) -> str:
    """A ruleset as the user may write it (``1.1``, ``v1.1``, ``1.1.0``) as the tools name it (``1.1.0``); a clear
    error for one the installed tools do not ship."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    ruleset = f"{m[1]}.{m[2]}.{m[3] or 0}" if m else text
    if ruleset not in supported():
        raise UsageError(
            f"unknown MLPerf Training ruleset {text!r}: the installed official tools (mlperf-logging) support "
            f"{', '.join(supported())}"
        )
    return ruleset


def round_name(ruleset: str) -> str:
    """``2.0.0`` -> ``v2.0``: the round as MLCommons and trainperf's history table name it."""
    major, minor, *_ = ruleset.split(".")
    return f"v{major}.{minor}"


def later_check(ruleset: str, check: str) -> bool:
    """True when ``check`` (a key of :data:`LATER_CHECKS`) was not made by the tools of ``ruleset``'s round."""
    return _version(ruleset) < _version(LATER_CHECKS[check][0])


def later_note(ruleset: str, check: str) -> str:
    """Why a finding of a later check is a warning for ``ruleset``, in words."""
    since, commit = LATER_CHECKS[check]
    return (
        f"a check of the official tools from the v{since.rsplit('.', 1)[0]} round on ({commit}), not a rule of the "
        f"{round_name(ruleset)} round"
    )


def evaluated_after_run_stop(ruleset: str | None = None) -> frozenset[str]:
    """The benchmarks whose logs may hold evaluations after run_stop under ``ruleset``'s rules (None: under the rules of
    any round): trainperf's own that evaluate off the clock, and those of :data:`OFFLINE_EVALUATION`."""
    from trainperf import registry

    rounds_of = {
        b for b, (first, last, _) in OFFLINE_EVALUATION.items()
        if ruleset is None or _version(first) <= _version(ruleset) <= _version(last)
    }  # fmt: skip
    return registry.evaluated_after_run_stop() | rounds_of


def status_accepted(ruleset: str, status: object) -> bool:
    """Whether the tools of ``ruleset``'s round accepted a system description's ``status`` (rounds without a check of
    their own: any value)."""
    accepted = STATUS_ACCEPTED.get(ruleset)
    if accepted is None:
        return later_check(ruleset, "status phrases")
    return isinstance(status, str) and (status in accepted or status.lower() in accepted)


def renamed_keys(ruleset: str, run_start: object) -> dict[str, tuple[str, str]]:
    """Keys the installed rules of ``ruleset`` ask for under a name given after the log was written
    (:data:`RENAMED_AFTER`): {installed name: (the name the log's own round asked for, why)}. Every log of such a
    round, and a log of it that a later round's repository re-published (a Results Resubmission: its ``run_start``
    dates from that round), which that round's rules wrote and checked (Lenovo's v3.0 SR670v2 bert, run in October
    2022, logs v2.1's opt_epsilon)."""
    found = dict(RENAMED_AFTER.get(ruleset, {}))
    date = log_date(run_start)
    earlier = round_of_date(date) if date is not None else None
    if earlier in RENAMED_AFTER and _version(earlier) < _version(ruleset):
        found.update(
            (new, (old, f"{why}; a {round_name(earlier)} log re-published in a {round_name(ruleset)} package"))
            for new, (old, why) in RENAMED_AFTER[earlier].items()
        )
    return found


def round_of_date(date: dt.date) -> str | None:
    """The first supported round whose published runs reach ``date`` (:data:`ROUND_ENDS` plus :data:`ROUND_SLACK`);
    None when it is later than every round the history holds."""
    return next((r for r in supported() if r in ROUND_ENDS and ROUND_ENDS[r] + ROUND_SLACK >= date), None)


@cache
def benchmarks(ruleset: str) -> tuple[str, ...]:
    """The benchmarks of ``ruleset``'s round, as mlperf-logging's ``benchmark_meta`` lists them."""
    from mlperf_logging.benchmark_meta import get_allowed_benchmarks

    return tuple(dict.fromkeys(get_allowed_benchmarks(USAGE, ruleset)))


@cache
def all_benchmarks() -> frozenset[str]:
    """Every benchmark of every supported round: names the official tools may turn into one of their own rule files
    (``training_<ruleset>/<division>_<benchmark>.yaml``), never a path outside them."""
    return frozenset(b for r in supported() for b in benchmarks(r))


def result_files(benchmark: str) -> int:
    """The result files (runs) a score of ``benchmark`` needs, by mlperf-logging's ``benchmark_meta``."""
    from mlperf_logging.benchmark_meta import get_result_file_counts

    counts = get_result_file_counts(USAGE)
    if benchmark not in counts:
        raise NotAvailableError(f"mlperf-logging gives no run count for benchmark {benchmark!r}")
    return int(counts[benchmark])


# Runs olympic scoring drops at each end for a benchmark trainperf does not know (result_summarizer drops more for one
# benchmark only, one of trainperf's: its count is on that Benchmark)
RUNS_DROPPED_OTHERS = 1


def from_path(path: Path) -> str | None:
    """The ruleset named by a results repository in ``path`` (``.../training_results_v1.1/<org>``), or None."""
    for part in reversed(Path(path).resolve().parts):
        if m := _REPOSITORY.match(part):
            return f"{m[1]}.{m[2]}.0"
    return None


def from_logs(latest: dt.date | None, held: Iterable[str]) -> str | None:
    """The round inferred from the date of the latest run_start and the benchmarks held (see the module's doc), or
    None when no supported round fits."""
    held = set(held)
    rounds = supported()
    if latest is not None:
        ends = [r for r in rounds if r not in ROUND_ENDS or ROUND_ENDS[r] + ROUND_SLACK >= latest]
        rounds = tuple(ends) if ends else rounds[-1:]
    fits = [r for r in rounds if held <= set(benchmarks(r))]
    return fits[0] if fits else None


def package_ruleset(
    *, given: str | None, path: Path, trainperf_logs: bool, latest: dt.date | None, held: Iterable[str]
) -> tuple[str, str, bool]:
    """(ruleset, where it comes from in words, whether it is inferred) for a package or a log at ``path``:
    ``latest`` is its latest run_start date, ``held`` its benchmarks. A clear error when none can be chosen."""
    if given is not None:
        return normalize(given), "given with --ruleset", False
    if trainperf_logs:
        found = {r.ruleset: r for k in held if (r := rounds.of_benchmark(k)) is not None}
        if len(found) == 1:
            ((ruleset, r),) = found.items()
            return ruleset, f"trainperf's own logs ({r.title} rules)", False
        return MLPERF_RULESET, "trainperf's own logs (MLPerf Training v2.0 rules)", False
    if (named := from_path(path)) is not None:
        if named not in supported():
            raise UsageError(
                f"{path} is in the results repository of MLPerf Training {round_name(named)}, a ruleset the installed "
                f"official tools do not support ({', '.join(supported())}); name one with --ruleset"
            )
        return named, f"the results repository's name (training_results_{round_name(named)})", False
    inferred = from_logs(latest, held)
    if inferred is None:
        raise UsageError(
            f"{path}: no MLPerf Training round from {round_name(supported()[0])} on holds all of its benchmarks "
            f"({', '.join(sorted(set(held)))}) at its date; name the round with --ruleset ({', '.join(supported())})"
        )
    when = f"its latest run_start is {latest.isoformat()}" if latest else "its logs have no run_start"
    return (
        inferred,
        f"inferred from the logs ({when}; the first round from then on with its benchmarks); name the round with "
        "--ruleset if it is another",
        True,
    )


def ruleset_of_results(path: Path, benchmark: str, start_ms: Iterable[object], *, own: bool) -> str:
    """The ruleset (``2.0.0``, ``6.1.0``) one benchmark's result files at ``path`` belong to, told as ``check`` and
    ``review`` tell it (:func:`package_ruleset`): trainperf's own logs (``own``) by their benchmark's round, published
    ones by their results repository's name or their latest run_start date; "" where no round fits."""
    dates = [d for t in start_ms if (d := log_date(t)) is not None]
    try:
        ruleset, _, _ = package_ruleset(
            given=None, path=path, trainperf_logs=own, latest=max(dates, default=None), held={benchmark}
        )
    except UsageError:
        return ""
    return ruleset


def log_date(time_ms: object) -> dt.date | None:
    """The UTC date of an MLLOG ``time_ms`` (None for a value that is not a plausible time)."""
    if not isinstance(time_ms, (int, float)) or isinstance(time_ms, bool):
        return None
    try:
        return dt.datetime.fromtimestamp(float(time_ms) / 1000, tz=dt.UTC).date()
    except (OverflowError, OSError, ValueError):
        return None


def is_trainperf_log(records: Iterable[dict]) -> bool:
    """True for a log written by trainperf (it logs ``trainperf_*`` keys)."""
    return any(isinstance(r.get("key"), str) and r["key"].startswith(_TRAINPERF_KEY) for r in records)


@cache
def open_checks(ruleset: str, benchmark: str) -> dict[tuple[str, str], str]:
    """The reference-scale checks (:data:`REFERENCE_SCALE_OPEN_CHECKS`) of the installed
    ``training_<ruleset>/open_<benchmark>.yaml``: {(key, the check's text, whitespace folded): the file's name}; empty
    where the file or the ruleset has none. The file is the installed checker's own, read as YAML, never run."""
    kinds = REFERENCE_SCALE_OPEN_CHECKS.get(ruleset, {})
    if not kinds or not benchmark.isidentifier():
        return {}
    import mlperf_logging.compliance_checker as cc
    import yaml  # the checker's own dependency

    path = Path(str(getattr(cc, "__file__", ""))).parent / f"{USAGE}_{ruleset}" / f"open_{benchmark}.yaml"
    if not path.is_file():
        return {}

    found: dict[tuple[str, str], str] = {}
    for entry in yaml.safe_load(path.read_text()) or []:
        rule = entry.get("KEY") if isinstance(entry, dict) else None
        if not isinstance(rule, dict) or rule.get("NAME") not in kinds:
            continue
        checks = rule.get(kinds[rule["NAME"]])
        for check in checks if isinstance(checks, list) else [checks]:
            if isinstance(check, str):
                found[(rule["NAME"], " ".join(check.split()))] = f"{USAGE}_{ruleset}/{path.name}"
    return found
