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
    """The user interrupted a run (Ctrl-C or SIGTERM); it was logged as aborted and kept aside."""

    exit_code = 130


class TrainperfWarning(UserWarning):
    """Something a run goes on with but the user should know (an open-division choice the closed one refuses)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by the CLI's handler: a run ends as it does on Ctrl-C."""


class RunFailed(TrainperfError):
    """A started run ended with an error: its log says ``run_stop`` aborted and it counts as not converged.

    ``outcome`` is the run as it stood (a :class:`trainperf.harness.runner.RunOutcome`); the error that
    ended it is ``__cause__``.
    """

    exit_code = 1

    def __init__(self, message: str, outcome: object, exit_code: int = 1) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.exit_code = exit_code  # the cause's, when it is a TrainperfError (a data error stays 2)
