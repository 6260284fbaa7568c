"""`trainperf ablate`: the configurations, their interleaved order, the table, the JSON and the report's chart."""

from __future__ import annotations

import itertools
import json
import re

import pytest
import torch
from helpers import FAKE_SPEC, FakeRecipe, FakeWorkload
from test_report import write_run, write_system
from test_switches import ConvWorkload

from trainperf.ablation.measure import interleaved_order, run_ablation, to_json
from trainperf.cli import main
from trainperf.dist import DistContext
from trainperf.errors import ResultsError
from trainperf.report.ablation import check_ablation, read_ablation
from trainperf.report.html import write_report
from trainperf.spec import RunConfig

PNG = b"\x89PNG\r\n\x1a\n"


def test_every_repeat_times_each_configuration_once_round_robin_rotating():
    order = interleaved_order(["a", "b", "c"], 3)
    assert order == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"), (2, "c"), (2, "a"), (2, "b")]
    for r in range(3):
        assert sorted(name for rep, name in order if rep == r) == ["a", "b", "c"]


@pytest.fixture
def workload(tmp_path):
    ConvWorkload.seen = {}
    FakeWorkload.interrupt_at_step = None
    return ConvWorkload(FAKE_SPEC, FakeRecipe(), RunConfig(seed=3), data_dir=tmp_path, dist=DistContext())


def test_the_configurations_are_timed_in_the_interleaved_order(workload):
    a = run_ablation(
        workload, steps=2, repeats=3, warmup_steps=1, prefetch=2, only=("channels_last", "optimizer_impl", "prefetch")
    )
    names = [m.config.name for m in a.measured]
    assert names == ["baseline", "channels-last", "optimizer foreach", "optimizer fused", "prefetch 2", "all"]
    assert a.by_name("all").config.switches.short() == "--channels-last --optimizer-impl fused --prefetch 2"
    # What really ran: the model of each loss call, in runs of consecutive steps of one configuration.
    runs = [(model, len(list(group))) for model, group in itertools.groupby(map(id, ConvWorkload.seen["models"]))]
    warmup, timed = runs[: len(names)], runs[len(names) :]
    assert [n for _, n in warmup] == [1] * len(names)  # each configuration's warm-up, in order
    name_of = {model: name for (model, _), name in zip(warmup, names, strict=True)}
    assert [(name_of[model], n) for model, n in timed] == [(name, 2) for _, name in a.order]
    assert a.order == interleaved_order(names, 3)
    for m in a.measured:
        assert len(m.samples_per_second) == 3 and all(v > 0 for v in m.samples_per_second) and not m.error
    assert a.speedup(a.by_name("baseline")) == 1.0
    assert a.by_name("optimizer fused").optimizer == "SGD: fused"
    assert a.skipped == {}  # every switch asked for applies to a convolutional model on a CPU


def test_a_switch_that_cannot_apply_is_skipped_and_a_failing_one_reported(workload, monkeypatch):
    class Broken(torch.nn.Module):  # as torch.compile fails: at the first forward pass, not when wrapping
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            raise RuntimeError("no compiler here")

    def broken_compile(model, mode=None):
        return Broken(model)

    monkeypatch.setattr(torch, "compile", broken_compile)
    a = run_ablation(
        workload,
        steps=1,
        repeats=2,
        warmup_steps=1,
        prefetch=2,
        only=("compile", "pin_memory", "ddp_bucket_mb", "prefetch", "device_prefetch"),
    )
    data = to_json(a, device="cpu (test)", command="", threads=1)
    by_name = {c["name"]: c for c in data["configurations"]}
    assert by_name["compile"]["status"] == "failed" and "no compiler here" in by_name["compile"]["error"]
    assert by_name["all"]["status"] == "failed"  # compile is part of it
    assert by_name["prefetch 2"]["status"] == "measured" and by_name["prefetch 2"]["speedup"] > 0
    skipped = {s["name"]: s["reason"] for s in data["skipped"]}
    assert "needs a CUDA device" in skipped["pin-memory"]
    assert "needs a CUDA device" in skipped["device-prefetch"]
    assert "one process" in skipped["ddp-bucket"]
    check_ablation(json.loads(json.dumps(data)), "test")  # what the report accepts


def test_mixed_precision_is_a_configuration_when_the_baseline_trains_in_fp32(workload):
    a = run_ablation(workload, steps=1, repeats=2, warmup_steps=1, prefetch=2, only=("precision", "optimizer_impl"))
    names = [m.config.name for m in a.measured]
    assert names == ["baseline", "optimizer foreach", "optimizer fused", "bf16 autocast", "all"]
    assert [m.autocast for m in a.measured] == ["fp32", "fp32", "fp32", "bf16", "bf16"]
    assert a.by_name("all").config.flags() == "--precision bf16 --optimizer-impl fused"
    # The step really ran under bf16 autocast: the model's output in those two configurations is bf16.
    by_model = {}
    for model, dtype in zip(map(id, ConvWorkload.seen["models"]), ConvWorkload.seen["dtypes"], strict=True):
        by_model.setdefault(model, set()).add(dtype)
    assert sorted(map(sorted, by_model.values())) == [["bfloat16"]] * 2 + [["float32"]] * 3
    data = to_json(a, device="cpu (test)", command="", threads=1)
    assert data["precision"] == "auto" and {c["name"]: c["autocast"] for c in data["configurations"]}["all"] == "bf16"


def test_a_baseline_already_in_mixed_precision_skips_that_configuration(workload):
    workload.config = RunConfig(seed=3, precision="bf16")
    a = run_ablation(workload, steps=1, repeats=1, warmup_steps=0, prefetch=2, only=("precision",))
    assert [m.config.name for m in a.measured] == ["baseline"] and a.by_name("baseline").autocast == "bf16"
    assert "already trains in bf16 autocast" in a.skipped["mixed precision"]
    assert "--precision fp32" in a.skipped["mixed precision"]


def test_ablate_on_mini_resnet_writes_the_table_the_json_and_the_chart(tmp_path, data_dir, capsys):
    out = tmp_path / "out"
    args = ["ablate", "resnet", "--steps", "2", "--repeats", "2", "--warmup-steps", "1", "--threads", "2"]
    args += ["--switches", "optimizer-impl,prefetch,channels-last", "--set", "global_batch_size=32"]
    assert main([*args, "--out", str(out), "--data-dir", str(data_dir)]) == 0
    printed = capsys.readouterr().out
    assert "speed-up" in printed and "×1.00" in printed and "prefetch" in printed
    assert "skipped channels-last: resnet always trains in channels-last" in printed
    data = read_ablation(out / "ablation" / "resnet-mini.json")
    assert data["benchmark"] == "resnet" and data["global_batch_size"] == 32 and data["repeats"] == 2
    assert data["data"] == "mini data (train_batches)"
    names = [c["name"] for c in data["configurations"]]
    assert names == ["baseline", "optimizer foreach", "optimizer fused", "prefetch 2", "all"]
    assert (out / "ablation" / "resnet-mini.png").read_bytes().startswith(PNG)
    # the report of that folder draws it
    write_system(out, "box")
    write_run(out / "results" / "box" / "resnet" / "result_0.txt", system="box", seed=1, minutes=1.0)
    page = write_report([out], tmp_path / "report.html").read_text()
    assert 'id="ablation"' in page and "Optimization switches" in page
    section = page[page.index('id="ablation"') :]
    assert "data:image/png;base64," in section and "optimizer fused" in section


def test_the_report_reads_an_ablation_file_as_untrusted_data(tmp_path):
    good = {
        "format": "trainperf ablation",
        "benchmark": "resnet",
        "scale": "mini",
        "device": "cpu",
        "data": "<script>alert(1)</script>",
        "steps": 2,
        "repeats": 2,
        "global_batch_size": 8,
        "configurations": [{"name": "baseline", "flags": "baseline", "status": "measured", "speedup": 1.0}],
        "skipped": [],
    }
    check_ablation(good, "x.json")
    for field, value, named in (
        ("steps", -1, "'steps'"),
        ("configurations", [{"name": 3}], "'configurations[0].name'"),
        ("configurations", [{"name": "a", "speedup": float("inf")}], "'configurations[0].speedup'"),
        ("skipped", [{"name": "x"}], "'skipped'"),
    ):
        path = tmp_path / "ablation" / "bad.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({**good, field: value}))
        with pytest.raises(ResultsError, match=re.escape(f"bad.json: field {named}")):
            read_ablation(path)
    from trainperf.report.ablation import html_section

    assert "<script>" not in html_section([good]) and "&lt;script&gt;" in html_section([good])


def test_ablate_synthetic_builds_a_reference_workload_without_its_data(tmp_path):
    # bert's reference workload loads its checkpoint from the dataset's folder; --synthetic builds it as a dry run
    # does (the full-size model, no data), so a machine without the dataset measures the step. fp32: bf16 products
    # of BERT-large take minutes on a CPU without bf16 units (the skipped bf16 configuration is tested above).
    out = tmp_path / "out"
    args = ["ablate", "bert", "--scale", "reference", "--synthetic", "--precision", "fp32", "--switches", "prefetch"]
    args += ["--steps", "1", "--repeats", "1", "--warmup-steps", "0", "--set", "global_batch_size=1"]
    assert main([*args, "--out", str(out), "--data-dir", str(tmp_path / "no-data")]) == 0
    data = read_ablation(out / "ablation" / "bert-reference.json")
    by_name = {c["name"]: c for c in data["configurations"]}
    assert by_name["baseline"]["status"] == "measured" and data["precision"] == "fp32"
    assert all(c["status"] == "measured" for c in data["configurations"]) and len(by_name) >= 2
    assert data["data"] == "synthetic batches (synthetic_batch)"
