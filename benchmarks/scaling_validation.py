"""The scaling model against the published MLPerf Training results shipped with trainperf.

    python benchmarks/scaling_validation.py [--topology ring|tree] [--latency-us 5] [--bandwidth 25] [--cases]

Fits the model on each submitter's single-node result (and, in the "+ bandwidth" mode, its smallest
multi-node system too) and predicts the same round's larger systems of the same submitter and accelerator
(trainperf/scaling/validate.py says how). Prints the median absolute percentage error per benchmark and
overall; ``--cases`` also prints every prediction. No training, half a second.
"""

from __future__ import annotations

import argparse
import statistics

from trainperf.scaling import facts, model, validate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topology", choices=model.TOPOLOGIES, default="ring")
    p.add_argument("--latency-us", type=float, default=model.DEFAULT_LATENCY_US)
    p.add_argument("--bandwidth", type=float, default=model.DEFAULT_BANDWIDTH_GBPS, help="GB/s, single-node mode")
    p.add_argument("--cases", action="store_true", help="print every prediction")
    args = p.parse_args()
    cases = validate.validate(latency_us=args.latency_us, bandwidth_gbps=args.bandwidth, topology=args.topology)
    if args.cases:
        print(
            f"{'mode':<12} {'benchmark':<9} {'round':<5} {'org':<20} {'fit on':>12} {'N':>5} "
            f"{'published':>10} {'predicted':>10} {'error':>7}  accelerator"
        )
        for c in cases:
            fit = "+".join(map(str, c.fit))
            print(
                f"{c.mode:<12} {c.benchmark:<9} {c.round:<5} {c.org[:20]:<20} {fit:>12} {c.n_acc:>5} "
                f"{c.actual_min:>10.3f} {c.predicted_min:>10.3f} {c.error:>+7.0%}  {c.accelerator}"
            )
        print()
    table = validate.summary(cases)
    print(
        f"median absolute percentage error ({args.topology}, latency {args.latency_us:g} us; "
        f"single node: {args.bandwidth:g} GB/s)"
    )
    print(f"{'benchmark':<10}" + "".join(f"{m + ' (cases)':>26}" for m in validate.MODES))
    for key in (*facts.scalable(), "all"):
        cells = []
        for mode in validate.MODES:
            n, mape = table[mode][key]
            cells.append(f"{'–' if mape is None else f'{mape:.1f} %'} ({n})")
        print(f"{key:<10}" + "".join(f"{c:>26}" for c in cells))
    print("\nby the size of the predicted system (all benchmarks)")
    for label, lo, hi in (("<= 64", 1, 64), ("65-512", 65, 512), ("> 512", 513, 10**9)):
        cells = []
        for mode in validate.MODES:
            errs = [abs(c.error) for c in cases if c.mode == mode and lo <= c.n_acc <= hi]
            cells.append(f"{f'{statistics.median(errs) * 100:.1f} %' if errs else '–'} ({len(errs)})")
        print(f"{label:<10}" + "".join(f"{c:>26}" for c in cells))


if __name__ == "__main__":
    main()
