"""``trainperf run --nproc N``: torchrun's launcher (``torch.distributed.run``), with a failed job told in one line.

torchrun ends every rank when one fails and raises ``ChildFailedError``, printed as a traceback with a table of
the failures. Here a rank that ended with an error of its own (it printed it) gives its exit code; a rank ended by
a signal (killed, out of memory) gets one sentence naming it. ``python -m trainperf.launch <torchrun options>``.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(argv))
    except ChildFailedError as e:
        rank, failure = _cause(e)
        if failure.exitcode > 0:
            return failure.exitcode  # the rank printed its own error (or the results, when runs failed)
        print(
            f"trainperf: error: rank {rank} of the torchrun job was ended by {failure.signal_name()} (killed, or out "
            "of memory); torchrun stopped the other ranks and does not restart them. The run in progress is not "
            "counted and earlier results stay: run the same command to resume",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    except SignalException as e:  # the job was sent SIGTERM (kill, scancel): its ranks said what became of the run
        return 128 + int(e.sigval)
    return 0


def _cause(e: ChildFailedError) -> tuple[int, ProcessFailure]:
    """The failure that ended the job: torchrun's first failure, unless a rank was killed in that same moment.

    torchrun stamps a failure in whole seconds when a poll sees it and takes the first seen on a tie, in rank
    order within one poll. A rank killed by a signal (SIGKILL, out of memory) makes its peers fail their next
    collective and exit with their own error (``ProcessGroupFailed``); when one poll sees both, torchrun's
    "first" is the survivor. The ranks torchrun then stops itself are kept too: with its closing SIGTERM, or a
    SIGKILL at least 30 s later when one did not stop, so neither of those is taken for the cause.
    """
    rank, first = e.get_first_failure()
    closing = -int(signal.SIGTERM)
    for r, f in e.failures.items():
        if f.exitcode < 0 and f.exitcode != closing and f.timestamp <= first.timestamp:
            return r, f
    return rank, first


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
