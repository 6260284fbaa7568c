"""resnet's device input path on a GPU: images/s of decoding and augmenting on the GPU, and its numbers against
the CPU path's.

    python benchmarks/gpu_decode_check.py --out "$OUT"              # on a CUDA machine: one prepared check
    python benchmarks/gpu_decode_check.py --cpu-check --out /tmp/g  # the same script on the CPU twin, small

It writes ImageNet-size JPEGs (500x375, quality 90, as benchmarks/data_throughput.py does) and measures, median of
``--repeats``:

- the workers' share (``gpu_decode.EncodedTrainSample``: read the file, its header, draw the crop and flip),
  images/s on one core: the cores per GPU the path needs at NVIDIA's rate;
- ``gpu_decode.decode_and_augment`` of a batch of ``--batch`` images on the device (nvJPEG decode, crop, flip,
  resize, means), images/s;
- for the same draws, the device's output against the CPU path's (``data.ReferenceTrainTransform`` on
  ``data.read_rgb``): the largest and the mean absolute difference, the share of values equal, and both paths'
  mean and standard deviation of the output.

Writes ``OUT/gpu_decode.json`` and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/gpu-decode"))
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cpu-check", action="store_true", help="run the CPU twin at a small batch: checks the script")
    args = p.parse_args(argv)
    import torch
    from data_throughput import published, write_resnet

    from trainperf.workloads.resnet import data, gpu_decode

    if not torch.cuda.is_available() and not args.cpu_check:
        p.error("no CUDA device here: this check is for a GPU (--cpu-check runs the CPU twin)")
    device = torch.device("cpu" if args.cpu_check else "cuda")
    batch = 8 if args.cpu_check else args.batch
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"device": str(device) if args.cpu_check else torch.cuda.get_device_name(), "batch": batch}
    with tempfile.TemporaryDirectory(prefix="trainperf-gpu-decode-") as tmp:
        root = Path(tmp)
        result["fixture"] = write_resnet(root, images=batch)
        paths = sorted(str(q) for q in (root / "train").rglob("*.JPEG"))
        sample = gpu_decode.EncodedTrainSample()
        worker, device_rates = [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            samples = [(sample(q), 0) for q in paths]
            worker.append(len(paths) / (time.perf_counter() - t))
            encoded, _labels = gpu_decode.collate(samples)
            gpu_decode.decode_and_augment(encoded, device)  # warm-up (nvJPEG's handles, kernels)
            if device.type == "cuda":
                torch.cuda.synchronize()
            t = time.perf_counter()
            gpu_decode.decode_and_augment(encoded, device)
            if device.type == "cuda":
                torch.cuda.synchronize()
            device_rates.append(len(paths) / (time.perf_counter() - t))
        torch.manual_seed(0)
        encoded, _ = gpu_decode.collate([(sample(q), 0) for q in paths])
        on_device = gpu_decode.decode_and_augment(encoded, device).cpu()
        torch.manual_seed(0)
        transform = data.ReferenceTrainTransform()
        on_cpu = torch.stack([transform(data.read_rgb(q)) for q in paths])
    diff = (on_device - on_cpu).abs()
    nvidia = published("resnet")
    result.update(
        worker_images_per_second_per_core=statistics.median(worker),
        worker_repetitions=worker,
        device_images_per_second=statistics.median(device_rates),
        device_repetitions=device_rates,
        max_abs_difference=float(diff.max()),
        mean_abs_difference=float(diff.mean()),
        share_equal=float((diff == 0).float().mean()),
        device_mean_std=[float(on_device.mean()), float(on_device.std())],
        cpu_mean_std=[float(on_cpu.mean()), float(on_cpu.std())],
        nvidia=nvidia,
    )
    if nvidia:
        rate = nvidia["samples_per_second_per_gpu"]
        result["worker_cores_per_gpu"] = rate / result["worker_images_per_second_per_core"]
        result["device_time_share_at_nvidia_rate"] = rate / result["device_images_per_second"]
    (args.out / "gpu_decode.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
