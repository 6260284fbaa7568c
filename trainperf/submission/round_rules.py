"""Findings of a package review judged by the rules of the package's own round (:mod:`trainperf.submission.review`):
what the installed tools check that the round's own tools did not (a warning naming the later rule), and logs that a
later results repository re-published from an earlier round.

- The installed system-description checker's status list (:data:`trainperf.rules.rulesets.LATER_CHECKS`, "status
  phrases") came after the v4.0 deadline: for a package of an earlier round, a description whose ``status`` that
  round's tools accepted ('onprem', 'available', 'cloud' in v4.0) fails it with a warning, not an error.
- MLCommons re-publishes logs of an earlier round in a later round's repository (a "Results Resubmission"): their
  ``run_start`` dates from the earlier round. Each such log is named in a warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainperf.rules import rulesets

_SYSTEM_FAILED = "System description checker failed for "
_STATUS_REASON = "Field status contains a non valid value"
SUMMARY_FAILED = "System description file checker failed"  # the package checker's line after any failure


def system_owner(msg: str, names: Mapping[str, str]) -> str | None:
    """The system folder a "System description checker failed for <system_name> : ..." line is about: the checker names
    the system by the description's ``system_name`` (``names``: folder -> system_name), which may differ from the
    folder's name; None when no system fits."""
    if not msg.startswith(_SYSTEM_FAILED):
        return None
    for folder, name in sorted(names.items(), key=lambda item: -len(item[1])):
        if msg.startswith(f"{_SYSTEM_FAILED}{name} : "):
            return folder
    return next((f for f in sorted(names, key=len, reverse=True) if msg.startswith(f"{_SYSTEM_FAILED}{f} : ")), None)


def later_status(msg: str, description: Mapping[str, Any] | None, ruleset: str) -> str | None:
    """Why the installed checker's failure ``msg`` on a description is a warning for ``ruleset`` (None: it is an
    error): it fails only the status list of later rounds, and the round's own tools accepted the status."""
    if description is None or _STATUS_REASON not in msg or not rulesets.later_check(ruleset, "status phrases"):
        return None
    status = description.get("status")
    if not rulesets.status_accepted(ruleset, status):
        return None
    own = (
        "the round's own checker accepted it (mlcommons/logging 9d75268, tags 4.0.0-rc1 to -rc3)"
        if ruleset in rulesets.STATUS_ACCEPTED
        else "the round's own tools did not check the field"
    )
    return (
        f"status {status!r}: {rulesets.later_note(ruleset, 'status phrases')}; {own}. Write one of 'Available "
        "on-premise', 'Available cloud', 'Research, Development, or Internal (RDI)', 'Preview' for later rounds"
    )


def resubmitted(runs: Iterable[tuple[str, Any]], ruleset: str) -> list[str]:
    """A warning for each run (``(name, run_start date)``) that dates from a round before ``ruleset``'s: a log that the
    round's repository re-published from an earlier round."""
    out = []
    for name, date in runs:
        earlier = rulesets.round_of_date(date) if date is not None else None
        if earlier is None or rulesets.version(earlier) >= rulesets.version(ruleset):
            continue
        out.append(
            f"{name}: its run_start ({date.isoformat()}) dates from the {rulesets.round_name(earlier)} round, before "
            f"the {rulesets.round_name(ruleset)} round's runs: a log re-published from an earlier round (a Results "
            f"Resubmission), reviewed by the {rulesets.round_name(ruleset)} rules of its package"
        )
    return out
