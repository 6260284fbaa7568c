"""``trainperf run --nproc N``: torchrun's launcher (``torch.distributed.run``), with a failed job told in one line.

torchrun ends every rank when one fails and raises ``ChildFailedError``, printed as a traceback with a table of
the failures. Here a rank that ended with an error of its own (it printed it) gives its exit code; a rank ended by
a signal (killed, out of memory) gets one sentence naming it. ``python -m trainperf.launch <torchrun options>``.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    try:
        run(parse_args(argv))
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
