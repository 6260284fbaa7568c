"""Convert a MLPerf v2.0 minigo TensorFlow checkpoint into the file trainperf reads (run where TF is installed).

    python -m trainperf.workloads.minigo.convert CHECKPOINT_PREFIX OUT.safetensors

CHECKPOINT_PREFIX is a TF checkpoint's path without its ``.index`` / ``.data-*`` ending: the reference's
target model (``ml_perf/target/19/target``) or its bootstrap model (the one ``model.ckpt-*`` of
``ml_perf/checkpoint/19/work_dir``). The variables of the v2.0 network (``tfweights.tf_layout``) are read
with ``tf.train.load_checkpoint`` and written, under their TF names and layouts, as safetensors, with the
checkpoint's ``global_step`` and momentum slots where it holds all of them (the bootstrap checkpoint does: the
reference's run goes on from its step and momentum; ``tfweights.py``). Every name and shape is checked first,
and a fault names the checkpoint and the tensor. trainperf then reads the file without TensorFlow
(``--set bootstrap_checkpoint=`` / ``target_checkpoint=``, or
``<data-dir>/minigo/reference/{bootstrap,target}.safetensors``).

TensorFlow is not a dependency of trainperf: no well-kept reader of TF checkpoints exists without it, so
this one step runs where it is installed (``pip install tensorflow``; any 1.15 or 2.x reads them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from trainperf.errors import DataError, TrainperfError, UsageError
from trainperf.workloads.minigo.tfweights import (
    GLOBAL_STEP,
    check_names,
    check_values,
    slot_layout,
    tf_layout,
    write_arrays,
)


def convert(prefix: str, out: Path) -> int:
    """Write ``out`` from the checkpoint ``prefix``; the number of tensors written."""
    try:
        import tensorflow as tf  # the one place trainperf uses TensorFlow: only to read the reference's files
    except ImportError:
        raise UsageError(
            "converting a TF checkpoint needs TensorFlow: run this where it is installed (pip install tensorflow)"
        ) from None
    where = f"minigo checkpoint {prefix}"
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = {str(k): tuple(v) for k, v in reader.get_variable_to_shape_map().items()}
    except Exception as e:  # TF raises its own error types for a missing or corrupt checkpoint
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise DataError(f"{where} cannot be read as a TF checkpoint ({first}); give the path without .index") from None
    layout = tf_layout()
    model_vars = {k: v for k, v in shapes.items() if k in layout or not _is_training_state(k)}
    check_names(model_vars, layout, where)
    arrays = {name: np.asarray(reader.get_tensor(name), dtype=np.float32) for name in layout}
    slots = slot_layout(layout)
    if GLOBAL_STEP in shapes and all(shapes.get(name) == shape for name, shape in slots.items()):
        arrays |= {name: np.asarray(reader.get_tensor(name), dtype=np.float32) for name in slots}
        arrays[GLOBAL_STEP] = np.asarray(reader.get_tensor(GLOBAL_STEP), dtype=np.int64).reshape(1)
    check_values(arrays, where)
    write_arrays(arrays, out)
    return len(arrays)


def _is_training_state(name: str) -> bool:
    """The optimizer's and the estimator's variables, which the converted file leaves out."""
    return name == "global_step" or name.endswith("/Momentum") or name.startswith(("metrics/", "beta1_power"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m trainperf.workloads.minigo.convert", description=__doc__.split("\n")[0]
    )
    ap.add_argument("checkpoint", help="TF checkpoint prefix (without .index)")
    ap.add_argument("out", type=Path, help="the safetensors file to write")
    args = ap.parse_args(argv)
    try:
        n = convert(args.checkpoint, args.out)
    except TrainperfError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"wrote {args.out}: {n} tensors of the v2.0 minigo network")
    return 0


if __name__ == "__main__":
    sys.exit(main())
