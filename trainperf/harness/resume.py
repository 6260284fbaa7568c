"""Resume: a finished run read back from its result file, after checking it was made the way this suite would
make it (same system, scale, benchmark, settings and code)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trainperf
from trainperf import seeds
from trainperf.contract import switches as switches_mod
from trainperf.errors import ResultsError
from trainperf.results import first_values, parse_run, read_mllog


def resume_run(path: Path, system: str, scale: str, benchmark: str, expected: dict[str, Any]) -> dict[str, Any]:
    """A finished run read back, after checking it was made the way this suite would make it.

    ``expected`` maps logged keys to the values this suite would log (:func:`expected_settings`); any
    difference refuses the resume with a message naming every difference.
    """
    try:
        logged = parse_run(path)
        first = first_values(read_mllog(path))
    except ResultsError as e:
        raise ResultsError(f"cannot resume from a finished run: {e}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ResultsError(
            f"cannot resume from {path}: malformed MLLOG record ({type(e).__name__}: {e}); move it away to redo the run"
        ) from None
    if logged.status is None or logged.minutes is None:
        raise ResultsError(f"{path} is not a complete run (no run_start/run_stop): delete it to redo the run")
    if logged.platform != system:
        raise ResultsError(
            f"{path} was made on system {logged.platform!r}, not {system!r}: it does not belong in "
            "this folder; move it away or use another --out"
        )
    if logged.scale != scale or logged.benchmark != benchmark:
        raise ResultsError(f"{path} is a {logged.scale} {logged.benchmark} run, not {scale} {benchmark}")
    differences = [
        f"{_SETTING_NAMES.get(key, key)} {_shown(first.get(key, '(not logged)'))} (this run: {_shown(want)})"
        for key, want in expected.items()
        if _normalized(first.get(key, _MISSING)) != _normalized(want)
    ]
    if differences:
        raise ResultsError(
            f"cannot resume from {path}: it was made with " + "; ".join(differences) + ". Runs made with other "
            "settings or another version of the code are never scored together: repeat the original options, "
            "or use another --out for these ones"
        )
    return {
        "seed": logged.seed,
        "status": logged.status,
        "reason": logged.abort_reason or ("target" if logged.status == "success" else ""),
        "minutes": logged.minutes,
        "log": str(path),
        "resumed": True,
        "curve": logged.curve,
        "start_ms": logged.start_ms,
    }


_MISSING = object()
_SETTING_NAMES = {
    "submission_org": "organization (--org)",
    "trainperf_division": "division (--division)",
    "trainperf_dry_run": "dry run (--dry-run)",
    "trainperf_smoke": "smoke run (--smoke)",
    "trainperf_overrides": "overrides (--set)",
    "trainperf_target": "target",
    "trainperf_code": "trainperf code",
    "trainperf_seed_source": "seed source",
    "trainperf_precision": "precision (--precision)",
    **{switches_mod.LOG_KEYS[n]: f"{n.replace('_', ' ')} ({switches_mod.FLAGS[n]})" for n in switches_mod.NAMES},
    "seed": "seed (--seed)",
}


def _normalized(value: Any) -> Any:
    """A value as JSON reads it back (tuples become lists), so a logged value compares with a fresh one."""
    if value is _MISSING:
        return value
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _shown(value: Any) -> str:
    """A logged value in a message: printable characters only, cut short (a log can hold anything)."""
    text = ascii(value) if not isinstance(value, str) else ascii(value)[1:-1]
    return text if len(text) <= 80 else text[:76] + " ..."


def expected_settings(options: Any, spec: Any, seed: int | None) -> dict[str, Any]:
    """What a run of the suite ``options`` (a :class:`~trainperf.harness.suite.SuiteOptions`) logs about how it
    was made; resume compares a finished run's with these."""
    expected: dict[str, Any] = {
        "submission_org": options.org,
        "trainperf_division": options.division,
        "trainperf_dry_run": options.dry_run,
        "trainperf_smoke": options.smoke,
        "trainperf_overrides": dict(options.overrides),
        "trainperf_target": spec.target_text,
        "trainperf_code": trainperf.code_hash(),
        "trainperf_seed_source": seeds.SOURCE_SYSTEM if seed is None else seeds.SOURCE_FIXED,
        "trainperf_precision": options.precision,
        **options.switches.as_logged(),
    }
    if seed is not None:
        expected["seed"] = seed
    return expected
