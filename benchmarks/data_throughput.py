"""Samples/s per core of each reference data path, beside the rate one GPU consumes at NVIDIA's published speed.

    flock /tmp/trainperf-cpu.lock python benchmarks/data_throughput.py [--benchmarks resnet,bert] [--repeats 5]
        [--json out.json]

For each benchmark it writes, into a temporary folder, a fixture in the reference's on-disk format at real sizes
(the smoke fixture's format, ``smoke_fixture`` in the benchmark's ``__init__.py``, with real-size content), builds
the reference workload on it as a smoke run does (``prepare``, ``load_data``), and times batches drawn from the
workload's own ``train_batches``, in this process, on one thread: the DataLoader of resnet, ssd and maskrcnn runs
without worker processes (the same dataset, transform and collation), so the figure is what one core delivers.
Each figure is the median of ``--repeats`` repetitions, the benchmarks interleaved, after a warm-up batch.

The fixtures (what is real-size, and how):

- resnet: JPEGs of 500x375 at quality 90 (ImageNet's typical size), with smooth structure and grain (about 80 KB
  each), in ``train/<wnid>/``. Beside the reference path, its peer: the same images through the plain path
  (PIL's ImageFolder loader, ``PlainReferenceTrainTransform``, torch's default collation), as the reference path read
  them before.
- ssd: the OpenImages-MLPerf layout with images of 1024x768 (OpenImages' long side) and their COCO json.
- maskrcnn: the COCO 2017 layout with images of 640x480 (COCO's typical size), polygons and crowd RLE scaled.
- rnnt: LibriSpeech's layout, FLAC at 16 kHz, utterances of 10-16.5 s (train-clean-100's mean is 12.7 s).
- unet3d: the smoke fixture's KiTS19 cases, then, in memory, cases of 190x330x330 voxels (a typical KiTS19 case
  after the reference's resampling to 1.6x1.2x1.2 mm) sampled into 128^3 patches (the reference's).
- bert: one training shard of 4,096 examples at full length (512 tokens, 76 predictions) in the packed HDF5
  layout (an evaluation file and an empty stand-in checkpoint beside it: the model is not built); a repetition
  is one epoch of it, so each includes the shard's read.
- dlrm: the reference's binary records (Criteo 1TB preprocessed: 40 int32 per click), 8 batches' worth.
- minigo: not measured: its training positions come from self-play with the model being trained, on the
  accelerator; there is no data set to load.

NVIDIA's per-GPU rate is the fastest NVIDIA closed 8 x H200 result in the published table shipped with trainperf
(``benchmarks/gpu_stack.py``: samples to converge at that system's batch, MLPerf's RCP mean, over the result's
minutes and 8 GPUs); a benchmark with no H200 result (retired before v4.0) takes NVIDIA's fastest closed
8-accelerator result on any accelerator, named in the table. "Cores per GPU" is that rate over the per-core
rate; a DGX-class node has 14 cores per GPU (112 cores, 8 GPUs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CORES_PER_GPU = 14  # a DGX H100/H200: 2 x 56 cores for 8 GPUs
KEYS = ("resnet", "ssd", "maskrcnn", "rnnt", "unet3d", "bert", "dlrm", "minigo")


@dataclasses.dataclass
class Case:
    """One measured data path: its name, batch size, batches per repetition, and its batch iterator."""

    name: str
    key: str
    batch: int
    batches: int
    fixture: str
    batches_iter: Iterator[Any]
    rates: list[float] = dataclasses.field(default_factory=list)


# --- fixtures ------------------------------------------------------------------------------------------------
def natural_image(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """An RGB image with a photograph's mix of smooth regions, edges and grain (JPEG sizes near real ones)."""
    from scipy import ndimage

    layers = [ndimage.gaussian_filter(rng.normal(0, 1, (height, width, 3)), (s, s, 0)) for s in (2, 6, 20)]
    base = sum(layers)
    base = base / base.std() * 60 + rng.uniform(90, 150, 3)
    return np.clip(base + rng.normal(0, 5, base.shape), 0, 255).astype(np.uint8)


def _save_jpeg(path: Path, pixels: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(pixels, "RGB").save(path, "JPEG", quality=90)


def write_resnet(root: Path, images: int = 32) -> str:
    rng = np.random.default_rng(0)
    wnids = ("n01440764", "n15075141")
    for split, per_class in (("train", images // 2), ("val", 1)):
        for wnid in wnids:
            (root / split / wnid).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                _save_jpeg(root / split / wnid / f"{wnid}_{i}.JPEG", natural_image(375, 500, rng))
    size = np.mean([p.stat().st_size for p in (root / "train").rglob("*.JPEG")]) / 1024
    return f"{images} JPEGs of 500x375, quality 90 ({size:.0f} KB each)"


def _scale_detection(json_path: Path, image_dir: Path, long_side: int, rng: np.random.Generator) -> None:
    """Rewrite a detection fixture's images at ``long_side`` and scale its annotations to match."""
    from trainperf.workloads.common.detection.fixtures import _crowd_rle

    doc = json.loads(json_path.read_text())
    factors = {}
    for im in doc["images"]:
        f = long_side / max(im["width"], im["height"])
        im["width"], im["height"] = round(im["width"] * f), round(im["height"] * f)
        factors[im["id"]] = (f, im["width"], im["height"])
        _save_jpeg(image_dir / im["file_name"], natural_image(im["height"], im["width"], rng))
    for a in doc["annotations"]:
        f, width, height = factors[a["image_id"]]
        a["bbox"] = [min(v * f, (width, height)[i % 2] - 1) for i, v in enumerate(a["bbox"])]
        a["area"] = a["area"] * f * f
        seg = a.get("segmentation")
        if isinstance(seg, list):
            a["segmentation"] = [[v * f for v in poly] for poly in seg]
        elif isinstance(seg, dict):
            x, y, w, h = (int(v) for v in a["bbox"])
            a["segmentation"] = _crowd_rle(x, y, max(1, w), max(1, h), width, height)
    json_path.write_text(json.dumps(doc))


def write_ssd(root: Path) -> str:
    from trainperf.workloads.common.detection import fixtures

    fixtures.write_openimages_mlperf(root)
    rng = np.random.default_rng(1)
    for split in ("train", "validation"):
        _scale_detection(root / split / "labels" / "openimages-mlperf.json", root / split / "data", 1024, rng)
    return "OpenImages-MLPerf layout, 4 training JPEGs with a long side of 1024 (1024x768 and others)"


def write_maskrcnn(root: Path) -> str:
    from trainperf.workloads.maskrcnn.fixture import write_smoke_fixture

    write_smoke_fixture(root)
    rng = np.random.default_rng(2)
    for split in ("train2017", "val2017"):
        _scale_detection(root / "annotations" / f"instances_{split}.json", root / split, 640, rng)
    return "COCO 2017 layout, 4 training JPEGs with a long side of 640 (640x480 and others), polygons and crowds"


def write_rnnt(root: Path) -> str:
    import soundfile as sf

    from trainperf.workloads.rnnt import data, fixture

    fixture.write_smoke_fixture(root)
    rng = np.random.default_rng(3)
    seconds = []
    for flac in sorted((root / "LibriSpeech").rglob("*.flac")):
        n = int(rng.uniform(10.0, 16.5) * data.SAMPLE_RATE)
        parts, total = [], 0
        while total < n:
            parts.append(fixture.utterance_audio(rng))
            total += len(parts[-1])
        sf.write(flac, np.concatenate(parts)[:n], data.SAMPLE_RATE, format="FLAC")
        seconds.append(n / data.SAMPLE_RATE)
    for trans in (root / "LibriSpeech").rglob("*.trans.txt"):  # LibriSpeech's transcripts run to 30-40 words
        lines = [line.split(" ", 1) for line in trans.read_text().splitlines()]
        trans.write_text("".join(f"{u} {' '.join([t] * 4)}\n" for u, t in lines))
    return f"LibriSpeech layout, {len(seconds)} FLAC utterances at 16 kHz of {np.mean(seconds):.1f} s on average"


def write_unet3d(root: Path) -> str:
    from trainperf.workloads.unet3d.generator import write_smoke_fixture

    write_smoke_fixture(root)
    return "KiTS19 layout (the smoke cases), replaced in memory by 4 cases of 190x330x330 voxels"


def real_size_cases(count: int = 4, shape: tuple[int, int, int] = (190, 330, 330)) -> list:
    """KiTS19-size preprocessed cases: a normalized image and a label with two kidneys and a tumour."""
    from trainperf.workloads.unet3d import data

    rng = np.random.default_rng(4)
    cases = []
    z, y, x = np.ogrid[: shape[0], : shape[1], : shape[2]]
    for i in range(count):
        image = rng.normal(0, 1, (1, *shape)).astype(np.float32)
        label = np.zeros((1, *shape), np.uint8)
        for cx in (0.3, 0.7):  # kidneys: ellipsoids of about 60 x 50 x 50 voxels
            c = (shape[0] * 0.5, shape[1] * 0.55, shape[2] * cx)
            inside = ((z - c[0]) / 30) ** 2 + ((y - c[1]) / 25) ** 2 + ((x - c[2]) / 25) ** 2 <= 1
            label[0][inside] = 1
        c = (shape[0] * 0.5, shape[1] * 0.55, shape[2] * 0.3 + 10)
        label[0][((z - c[0]) / 12) ** 2 + ((y - c[1]) / 12) ** 2 + ((x - c[2]) / 12) ** 2 <= 1] = 2
        cases.append(data.Case(f"{i:05d}", image, label))
    return cases


def write_bert(root: Path, examples: int = 4096) -> str:
    from trainperf.workloads.bert import data, reference

    rng = np.random.default_rng(5)
    seq, npred = 512, 76

    def shard(n: int) -> data.Examples:
        lengths = np.minimum(seq, rng.integers(200, seq + 400, n))  # most examples fill the 512 tokens
        mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
        ids = rng.integers(1000, 30522, (n, seq)) * mask
        segment = (np.arange(seq)[None, :] >= (lengths // 2)[:, None]).astype(np.int64) * mask
        positions = np.sort(np.stack([rng.choice(int(k), npred, replace=False) for k in lengths]), axis=1)
        labels, nsp = rng.integers(1000, 30522, (n, npred)), rng.integers(0, 2, n)
        return data.Examples(ids, mask, segment, positions, labels, nsp)

    data.write_examples(root / "training" / "part-00000-of-00500.hdf5", shard(examples))
    data.write_examples(root / "eval" / "eval_10k.hdf5", shard(16))
    (root / reference.CHECKPOINT).parent.mkdir(parents=True, exist_ok=True)
    (root / reference.CHECKPOINT).write_bytes(b"")  # prepare checks that it is there; the model is not built
    return f"one packed HDF5 shard of {examples} examples of 512 tokens and 76 predictions"


def write_dlrm(root: Path, records: int) -> str:
    from trainperf.workloads.dlrm import data
    from trainperf.workloads.dlrm.workload import BINARY_FILES

    rng = np.random.default_rng(6)
    root.mkdir(parents=True, exist_ok=True)
    for name, n in zip(BINARY_FILES, (records, 4096), strict=True):
        labels = rng.integers(0, 2, n)
        dense = rng.integers(0, 1000, (n, data.NUM_DENSE))
        sparse = rng.integers(0, 3, (n, data.NUM_SPARSE))  # rows of a smoke run's small tables (3 rows or more)
        rows = np.concatenate([labels[:, None], dense, sparse], axis=1).astype("<i4")
        (root / name).write_bytes(rows.tobytes())
    return f"the binary records (40 int32 a click): {records:,} training clicks"


# --- workloads ---------------------------------------------------------------------------------------------
def build_workload(key: str, data_dir: Path, batch: int) -> Any:
    """The reference workload on ``data_dir`` as a smoke run builds it (one process, on the CPU), at ``batch``."""
    from trainperf import registry
    from trainperf.dist import init_from_env
    from trainperf.spec import RunConfig

    spec, recipe = registry.get_spec(key, "reference"), registry.default_recipe(key, "reference")
    cls = registry.workload_class(key)
    recipe = dataclasses.replace(recipe, **{cls.BATCH_FIELD: batch})
    w = cls(spec, recipe, RunConfig(seed=0, smoke=True), data_dir=data_dir, dist=init_from_env())
    w.prepare()
    w.load_data()
    return w


def _in_process_loader(*args: Any, **kwargs: Any) -> Any:
    """torch's DataLoader without worker processes: the same dataset, sampler, transform and collation."""
    from torch.utils.data import DataLoader

    kwargs.update(num_workers=0, persistent_workers=False, pin_memory=False)
    return DataLoader(*args, **kwargs)


def resnet_cases(tmp: Path) -> list[Case]:
    from trainperf.workloads.resnet import data
    from trainperf.workloads.resnet import workload as resnet_workload

    described = write_resnet(tmp / "resnet" / "reference")

    def loader(dataset: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(dataset.transform, data.PlainReferenceTrainTransform):
            kwargs["collate_fn"] = None  # the plain path's batches: torch's default collation, as before
        return _in_process_loader(dataset, *args, **kwargs)

    resnet_workload.DataLoader = loader  # type: ignore[attr-defined]
    new = build_workload("resnet", tmp, 16)
    old = build_workload("resnet", tmp, 16)
    from torchvision.datasets.folder import default_loader

    old.train_set.loader = default_loader  # the plain path: PIL's loader and the crop-then-resize transform
    old.train_set.transform = data.PlainReferenceTrainTransform()
    return [
        Case("resnet", "resnet", 16, 4, described, iter(new.train_batches())),
        Case("resnet (plain path, the peer)", "resnet", 16, 4, described, iter(old.train_batches())),
    ]


def detection_case(key: str, tmp: Path, writer: Callable[[Path], str], batch: int, batches: int) -> list[Case]:
    from trainperf.workloads.common.detection import base

    described = writer(tmp / key / "reference")
    base.DataLoader = _in_process_loader  # type: ignore[attr-defined]
    w = build_workload(key, tmp, batch)
    return [Case(key, key, batch, batches, described, iter(w.train_batches()))]


def rnnt_cases(tmp: Path) -> list[Case]:
    described = write_rnnt(tmp / "rnnt" / "reference")
    w = build_workload("rnnt", tmp, 4)
    return [Case("rnnt", "rnnt", 4, 2, described, iter(w.train_batches()))]


def unet3d_cases(tmp: Path) -> list[Case]:
    described = write_unet3d(tmp / "unet3d" / "reference")
    w = build_workload("unet3d", tmp, 2)
    w.train_patch = tuple(w.recipe.training_input_shape)  # the reference's 128^3, not a CPU check's
    w.train_cases = real_size_cases()
    return [Case("unet3d", "unet3d", 2, 4, described, iter(w.train_batches()))]


def bert_cases(tmp: Path) -> list[Case]:
    examples, batch = 4096, 56
    described = write_bert(tmp / "bert" / "reference", examples)
    w = build_workload("bert", tmp, batch)
    # a repetition is a whole epoch of the one shard: the shard's read (HDF5, checked) is in every repetition
    return [Case("bert", "bert", batch, examples // batch, described, iter(w.train_batches()))]


def dlrm_cases(tmp: Path) -> list[Case]:
    from trainperf.scaling import facts

    batch = 8 * facts.published_batch_per_accelerator("dlrm")
    described = write_dlrm(tmp / "dlrm" / "reference", 8 * batch)
    w = build_workload("dlrm", tmp, batch)
    return [Case("dlrm", "dlrm", batch, 2, described, iter(w.train_batches()))]


def setups() -> dict[str, Callable[[Path], list[Case]]]:
    from trainperf.workloads.common.detection.fixtures import write_openimages_mlperf  # noqa: F401 (import check)

    return {
        "resnet": resnet_cases,
        "ssd": lambda tmp: detection_case("ssd", tmp, write_ssd, 4, 2),
        "maskrcnn": lambda tmp: detection_case("maskrcnn", tmp, write_maskrcnn, 4, 2),
        "rnnt": rnnt_cases,
        "unet3d": unet3d_cases,
        "bert": bert_cases,
        "dlrm": dlrm_cases,
    }


# --- NVIDIA's rate -----------------------------------------------------------------------------------------
def published(key: str) -> dict | None:
    """NVIDIA's per-GPU rate: gpu_stack's 8 x H200 figure, else the fastest closed 8-accelerator NVIDIA result."""
    import gpu_stack

    from trainperf.history.query import load_results
    from trainperf.scaling import facts

    try:
        best = gpu_stack.published_rate(key)
    except (KeyError, ValueError, LookupError):
        best = None
    if best is not None:
        return {**best, "accelerator": gpu_stack.PUBLISHED_ACCELERATOR}
    rows = [
        r
        for r in load_results()
        if r.benchmark == key and r.org == "NVIDIA" and r.division == "closed" and r.n_acc == 8 and r.raw_score_min
    ]
    if not rows:
        return None
    row = min(rows, key=lambda r: r.raw_score_min)
    batch = 8 * facts.published_batch_per_accelerator(key)
    try:
        mean, _warning = facts.rcp_table(key, "reference").at(batch)
    except (KeyError, ValueError, LookupError):
        return None
    samples = mean * facts.train_samples(key)
    return {
        "round": row.round,
        "system": row.system,
        "accelerator": row.accelerator,
        "minutes": row.raw_score_min,
        "global_batch": batch,
        "samples_to_converge": samples,
        "samples_per_second_per_gpu": samples / (row.raw_score_min * 60) / 8,
    }


# --- timing ------------------------------------------------------------------------------------------------
def time_case(case: Case) -> float:
    t = time.perf_counter()
    for _ in range(case.batches):
        next(case.batches_iter)
    return case.batch * case.batches / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--benchmarks", default=",".join(KEYS), help=f"comma-separated (default {','.join(KEYS)})")
    p.add_argument("--repeats", type=int, default=5, help="interleaved repetitions (default 5)")
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    args = p.parse_args(argv)
    keys = [k.strip() for k in args.benchmarks.split(",") if k.strip()]
    unknown = [k for k in keys if k not in KEYS]
    if unknown or not keys:
        p.error(f"--benchmarks: {', '.join(unknown) or '(none)'}: choose among {', '.join(KEYS)}")
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    import torch

    torch.set_num_threads(1)
    table = setups()
    with tempfile.TemporaryDirectory(prefix="trainperf-data-throughput-") as tmp:
        cases: list[Case] = []
        for key in keys:
            if key in table:
                t = time.perf_counter()
                cases += table[key](Path(tmp))
                print(f"{key}: fixture and loader ready in {time.perf_counter() - t:.1f} s", flush=True)
        for case in cases:  # warm-up: the first batch opens files and starts the epoch
            next(case.batches_iter)
        for rep in range(args.repeats):
            for case in cases:
                case.rates.append(time_case(case))
            print(f"repetition {rep + 1} of {args.repeats} done", flush=True)
    rows = [row_of(c) for c in cases]
    if "minigo" in keys:
        rows.append({"benchmark": "minigo", "not_measured": "its positions come from self-play on the accelerator"})
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def row_of(case: Case) -> dict:
    rate = statistics.median(case.rates)
    nvidia = published(case.key)
    row: dict = {
        "benchmark": case.name,
        "fixture": case.fixture,
        "batch": case.batch,
        "samples_per_second_per_core": rate,
        "repetitions": case.rates,
        "nvidia": nvidia,
    }
    if nvidia:
        need = nvidia["samples_per_second_per_gpu"] / rate
        row.update(cores_per_gpu=need, keeps_up_at_14=need <= CORES_PER_GPU)
    return row


def markdown(rows: list[dict]) -> str:
    lines = [
        "| data path | samples/s per core (median; repetitions) | NVIDIA per GPU | cores per GPU | 14 cores keep up |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "not_measured" in r:
            lines.append(f"| {r['benchmark']} | not measured: {r['not_measured']} | – | – | – |")
            continue
        reps = ", ".join(f"{v:,.1f}" for v in r["repetitions"])
        n = r["nvidia"]
        nvidia = (
            f"{n['samples_per_second_per_gpu']:,.0f} ({n['round']}, 8 x {n['accelerator']}, {n['minutes']:.2f} min)"
            if n
            else "not published"
        )
        need = f"{r['cores_per_gpu']:.1f}" if n else "–"
        keeps = ("yes" if r["keeps_up_at_14"] else "**no**") if n else "–"
        rate = f"{r['samples_per_second_per_core']:,.1f} ({reps})"
        lines.append(f"| {r['benchmark']} | {rate} | {nvidia} | {need} | {keeps} |")
    peers = {r["benchmark"]: r["samples_per_second_per_core"] for r in rows if "not_measured" not in r}
    if "resnet" in peers and "resnet (plain path, the peer)" in peers:
        ratio = peers["resnet"] / peers["resnet (plain path, the peer)"]
        lines.append(f"\nresnet's reference path over the plain path in the same run: x{ratio:.2f}")
    if "resnet" in peers:
        from trainperf.workloads.resnet import data

        how = (
            "the compiled window decoder and resize (_window.c)"
            if data._window is not None
            else "whole-image decodes and the torch resize (_window.c did not build: run `make setup`)"
        )
        lines.append(f"resnet's reference path ran with {how}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
