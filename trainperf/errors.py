"""The one exception family of trainperf: every message says what is wrong and how to fix it."""

from __future__ import annotations


class TrainperfError(Exception):
    """Base class: the CLI prints these without a traceback and exits with ``exit_code``."""

    exit_code = 2


class UsageError(TrainperfError):
    """A bad command line or option value."""


class DataError(TrainperfError):
    """A dataset file is missing, corrupt or inconsistent."""


class RuleError(TrainperfError):
    """A run would break a benchmark rule (division, hyperparameters, time limits)."""


class ResultsError(TrainperfError):
    """An output folder cannot be used (unwritable, from another system, inconsistent)."""


class ProcessGroupFailed(TrainperfError):
    """Another process of a distributed job stopped or hung; this rank's run in progress is not counted."""


class NotAvailableError(TrainperfError):
    """A benchmark or scale that trainperf does not implement yet."""


class RunInterrupted(TrainperfError):
    """The user interrupted a run (Ctrl-C); it was logged as aborted and not counted."""

    exit_code = 130
