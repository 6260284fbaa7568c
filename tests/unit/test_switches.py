"""The optimization switches: parsed from the command line, logged, compared on resume, and really applied."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import threading
import time

import pytest
import torch
from helpers import FakeWorkload, first
from test_honest_runs import options, results
from test_runner import run_once

from trainperf.cli import build_parser
from trainperf.contract.switches import Switches
from trainperf.dist import DistContext
from trainperf.errors import ResultsError, UsageError
from trainperf.harness import switches as sw
from trainperf.harness.suite import run_suite
from trainperf.harness.switches import Prefetcher
from trainperf.results import first_values, read_mllog
from trainperf.spec import RunConfig


class ConvWorkload(FakeWorkload):
    """The fake workload with a convolution, recording the model, batches and optimizer the harness used."""

    seen: dict = {}

    def build_model(self):
        return torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.Flatten(), torch.nn.Linear(48, 2))

    def build_optimizer(self, model):
        opt = torch.optim.SGD(model.parameters(), lr=self.recipe.learning_rate, momentum=0.9)
        ConvWorkload.seen["optimizer"] = opt
        return opt, None

    def train_batches(self):
        g = torch.Generator().manual_seed(self.config.seed)
        while True:
            yield (
                torch.randn(self.local_batch_size, 2, 4, 4, generator=g),
                torch.randint(0, 2, (self.local_batch_size,)),
            )

    def synthetic_batch(self):
        return torch.randn(self.local_batch_size, 2, 4, 4), torch.randint(0, 2, (self.local_batch_size,))

    def loss(self, model, batch):
        ConvWorkload.seen.setdefault("models", []).append(model)
        ConvWorkload.seen.setdefault("inputs", []).append(batch[0])
        out = model(batch[0])  # the model's output dtype: what autocast made of the step
        ConvWorkload.seen.setdefault("dtypes", []).append(str(out.dtype).removeprefix("torch."))
        return super().loss(model, batch)


@pytest.fixture
def conv(monkeypatch):
    import test_runner

    ConvWorkload.seen = {}
    FakeWorkload.qualities = [0.5, 0.9]
    FakeWorkload.interrupt_at_step = None
    monkeypatch.setattr(test_runner, "FakeWorkload", ConvWorkload)
    return ConvWorkload.seen


# --- the command line -------------------------------------------------------------------------------------
def test_each_switch_is_parsed_from_the_run_command_and_none_is_the_old_default():
    args = build_parser().parse_args(["run", "resnet"])
    assert sw.from_args(args) == Switches() and not Switches().any_on
    flags = ["--compile", "--channels-last", "--cuda-graphs", "--optimizer-impl", "fused", "--ddp-bucket-mb", "8.5"]
    args = build_parser().parse_args(["run", "resnet", *flags, "--pin-memory", "--prefetch", "3", "--device-prefetch"])
    assert sw.from_args(args) == Switches(
        compile=True,
        channels_last=True,
        cuda_graphs=True,
        optimizer_impl="fused",
        ddp_bucket_mb=8.5,
        pin_memory=True,
        prefetch=3,
        device_prefetch=True,
    )
    assert Switches(compile=True, prefetch=2).short() == "--compile --prefetch 2"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--prefetch", "-1"], "--prefetch: '-1': give 0 (off) to 64 batches"),
        (["--prefetch", "two"], "'two' is not a whole number of batches"),
        (["--ddp-bucket-mb", "0"], "--ddp-bucket-mb: '0': give a size above 0"),
        (["--ddp-bucket-mb", "nan"], "give a size above 0"),
        (["--optimizer-impl", "apex"], "invalid choice: 'apex'"),
    ],
)
def test_bad_values_get_a_clear_error(flags, message, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["run", "resnet", *flags])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_values_are_refused_by_the_dataclass_too():
    with pytest.raises(UsageError, match="--prefetch -1"):
        Switches(prefetch=-1)
    with pytest.raises(UsageError, match="--optimizer-impl 'apex'"):
        Switches(optimizer_impl="apex")
    with pytest.raises(UsageError, match="--ddp-bucket-mb 0"):
        Switches(ddp_bucket_mb=0)


def test_gpu_switches_are_an_error_on_a_cpu_before_anything_runs(tmp_path):
    with pytest.raises(UsageError, match="--cuda-graphs needs a CUDA device"):
        sw.check_device(Switches(cuda_graphs=True), "cpu")
    with pytest.raises(UsageError, match="--pin-memory needs a CUDA device"):
        sw.check_device(Switches(pin_memory=True), "cpu")
    with pytest.raises(UsageError, match="--device-prefetch needs a CUDA device"):
        sw.check_device(Switches(device_prefetch=True), "cpu")
    sw.check_device(Switches(cuda_graphs=True, pin_memory=True, device_prefetch=True), "cuda")
    if torch.cuda.is_available():
        return
    for flag in ("--cuda-graphs", "--device-prefetch"):
        r = subprocess.run(
            [sys.executable, "-m", "trainperf", "run", "resnet", flag, "--out", str(tmp_path / "o")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"{flag} needs a CUDA device (this run is on cpu)" in r.stderr
        assert not (tmp_path / "o" / "results").exists()


# --- logged and applied -----------------------------------------------------------------------------------
def test_no_switch_logs_the_defaults_and_leaves_the_run_as_it_was(tmp_path, conv):
    outcome, path = run_once(tmp_path)
    assert outcome.status == "success"
    logged = first_values(read_mllog(path))
    assert {k: logged[k] for k in Switches().as_logged()} == Switches().as_logged()
    assert logged["trainperf_optimizer_impl_used"] == "SGD: for-loop"  # torch's own default on a CPU
    assert logged["trainperf_switches_ignored"] == {}
    opt = conv["optimizer"]
    assert opt.param_groups[0]["foreach"] is None and opt.param_groups[0]["fused"] is None  # untouched
    model = conv["models"][0]
    assert not sw.compiled(model) and model[0].weight.is_contiguous()
    assert all(x.is_contiguous() for x in conv["inputs"])


def test_channels_last_converts_the_model_and_the_batches(tmp_path, conv):
    outcome, path = run_once(tmp_path, switches=Switches(channels_last=True))
    assert outcome.status == "success"
    weight = conv["models"][0][0].weight
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    assert all(x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous() for x in conv["inputs"])
    assert first(path, "trainperf_channels_last")["value"] is True
    assert first(path, "trainperf_switches_ignored")["value"] == {}


def test_channels_last_3d_for_volumes():
    model = sw.to_channels_last(torch.nn.Sequential(torch.nn.Conv3d(2, 2, 3), torch.nn.Conv2d(2, 2, 1)))
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last_3d)
    assert model[1].weight.is_contiguous(memory_format=torch.channels_last)
    batch = sw.channels_last_batch({"image": torch.randn(2, 2, 4, 4, 4), "label": torch.zeros(2, 2, 4, 4, 4).long()})
    assert batch["image"].is_contiguous(memory_format=torch.channels_last_3d)
    assert batch["label"].is_contiguous()  # labels are not images: left as they are


def test_channels_last_without_convolutions_is_left_off_and_says_why(tmp_path):
    outcome, path = run_once(tmp_path, switches=Switches(channels_last=True))  # the fake's linear model
    assert outcome.status == "success"
    assert first(path, "trainperf_channels_last")["value"] is True  # asked
    assert "no 2-D or 3-D convolutions" in first(path, "trainperf_switches_ignored")["value"]["channels_last"]


@pytest.mark.parametrize(("impl", "used"), [("foreach", "SGD: foreach"), ("fused", "SGD: fused")])
def test_the_optimizer_runs_the_kernels_asked_for(tmp_path, conv, impl, used):
    outcome, path = run_once(tmp_path, switches=Switches(optimizer_impl=impl))
    assert outcome.status == "success"
    group = conv["optimizer"].param_groups[0]
    assert group["foreach"] is (impl == "foreach") and group["fused"] is (impl == "fused")
    assert first(path, "trainperf_optimizer_impl")["value"] == impl
    assert first(path, "trainperf_optimizer_impl_used")["value"] == used


def test_fused_kernels_match_the_default_step():
    """The switch changes how the update is computed, not what it is."""
    torch.manual_seed(0)
    a = torch.nn.Linear(5, 3)
    b = torch.nn.Linear(5, 3)
    b.load_state_dict(a.state_dict())
    oa = torch.optim.AdamW(a.parameters(), lr=0.1)
    ob = torch.optim.AdamW(b.parameters(), lr=0.1)
    assert sw.optimizer_impl(ob, "fused") == ("AdamW: fused", "")
    x = torch.randn(8, 5)
    for model, opt in ((a, oa), (b, ob)):
        for _ in range(3):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    assert torch.allclose(a.weight, b.weight, atol=1e-6)


def test_adagrad_whose_constructor_makes_its_state_takes_the_kernels_too():
    """dlrm's Adagrad creates its state (at step 0) in its constructor; after a step it is too late."""
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    assert sw.optimizer_impl(opt, "fused") == ("Adagrad: fused", "")
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    with pytest.raises(RuntimeError, match="before the optimizer's first step"):
        sw.optimizer_impl(opt, "foreach")


def test_sparse_embeddings_keep_fused_kernels_off_and_say_so():
    """dlrm's tables have sparse gradients: torch's fused Adagrad would raise at the first step."""
    model = torch.nn.Sequential(torch.nn.EmbeddingBag(10, 4, mode="sum", sparse=True), torch.nn.Linear(4, 1))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    used, why = sw.optimizer_impl(opt, "fused", model)
    assert used == "Adagrad: for-loop" and "sparse" in why and "0" in why
    x = torch.tensor([[1, 2], [3, 4]])
    model(x).sum().backward()
    opt.step()  # the optimizer still steps: left as it was built
    dense = torch.nn.Linear(3, 2)
    assert sw.optimizer_impl(torch.optim.Adagrad(dense.parameters(), lr=0.1), "fused", dense)[0] == "Adagrad: fused"


def test_an_optimizer_without_such_kernels_keeps_its_own_and_says_so():
    from trainperf.workloads.resnet.lars import ReferenceLars

    opt = ReferenceLars(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    used, why = sw.optimizer_impl(opt, "foreach")
    assert used == "ReferenceLars: for-loop" and why == "ReferenceLars has no foreach implementation"
    from timm.optim import Lamb

    lamb = Lamb(torch.nn.Linear(2, 2).parameters(), lr=0.1)  # bert's and rnnt's LAMB has foreach kernels
    assert sw.optimizer_impl(lamb, "foreach") == ("Lamb: foreach", "")
    assert sw.optimizer_impl(Lamb(torch.nn.Linear(2, 2).parameters()), "fused")[1] == "Lamb has no fused implementation"


def test_compile_wraps_the_placed_model(tmp_path, conv, monkeypatch):
    """The wiring, with torch.compile replaced (compiling takes tens of seconds on this CPU)."""
    calls = []

    class Compiled(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self._orig_mod = inner

        def forward(self, x):
            return self._orig_mod(x)

    def fake_compile(model, mode=None):
        calls.append(mode)
        return Compiled(model)

    monkeypatch.setattr(torch, "compile", fake_compile)
    snapped = []  # a workload's snapshot of its weights (flux1's pictures) gets the module, not compile's wrapper
    monkeypatch.setattr(ConvWorkload, "snapshot", lambda self, model: snapped.append(model), raising=False)
    outcome, path = run_once(tmp_path, switches=Switches(compile=True))
    assert outcome.status == "success" and calls == [None]
    assert all(isinstance(m, Compiled) for m in conv["models"])
    assert snapped and not any(isinstance(m, Compiled) or sw.compiled(m) for m in snapped)
    assert first(path, "trainperf_compile")["value"] is True
    sw.compile_model(torch.nn.Linear(1, 1), Switches(cuda_graphs=True))
    assert calls[-1] == "reduce-overhead"  # CUDA graphs: torch.compile's CUDA graph trees


def test_compile_really_compiles_a_tiny_model():
    model = sw.compile_model(torch.nn.Linear(3, 2), Switches(compile=True))
    assert sw.compiled(model)
    assert model(torch.ones(1, 3)).shape == (1, 2)


def test_prefetch_keeps_the_order_and_logs_it(tmp_path, conv):
    outcome, path = run_once(tmp_path, switches=Switches(prefetch=2))
    assert outcome.status == "success"
    assert first(path, "trainperf_prefetch")["value"] == 2
    plain = ConvWorkload.seen["inputs"]
    ConvWorkload.seen.clear()
    (tmp_path / "again").mkdir()
    run_once(tmp_path / "again")
    assert all(torch.equal(a, b) for a, b in zip(plain, ConvWorkload.seen["inputs"], strict=True))


def test_the_prefetcher_reads_ahead_in_order_raises_the_source_error_and_stops_when_dropped():
    produced = []

    def source():
        for i in range(5):
            produced.append(i)
            yield i
        raise ValueError("bad record 5")

    p = Prefetcher(source(), 2)
    time.sleep(0.3)
    assert produced == [0, 1, 2]  # two in the queue, one waiting to be put
    assert [next(p) for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="bad record 5"):
        next(p)

    def endless():
        while True:
            yield 0

    before = threading.active_count()
    q = Prefetcher(endless(), 1)
    next(q)
    del q
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before  # the dropped prefetcher's thread ended


class RecordingCopies:
    """The CUDA side of the device prefetcher, recorded: which batch's copy starts, and which is handed over."""

    def __init__(self, events):
        self.events = events

    def issue(self, batch):
        self.events.append(("copy", batch))
        return f"on-device {batch}", f"event {batch}"

    def ready(self, moved, event):
        self.events.append(("wait", event))
        return moved


def test_the_device_prefetcher_copies_the_next_batch_while_the_step_uses_this_one():
    events = []

    def source():
        for i in range(3):
            events.append(("read", i))
            yield i
        raise ValueError("bad record 3")

    copier = sw.DeviceCopier(source(), RecordingCopies(events))
    assert events == [("read", 0), ("copy", 0)]  # the first copy starts before the first step asks
    got = []
    for _ in range(3):
        got.append(next(copier))
        events.append(("step", got[-1]))
    assert got == ["on-device 0", "on-device 1", "on-device 2"]
    # Each batch is waited for (on the GPU) before the step gets it, and the next one's copy is already started
    # when the step runs: copy k+1 overlaps step k.
    assert events == [
        ("read", 0), ("copy", 0),
        ("wait", "event 0"), ("read", 1), ("copy", 1), ("step", "on-device 0"),
        ("wait", "event 1"), ("read", 2), ("copy", 2), ("step", "on-device 1"),
        ("wait", "event 2"), ("step", "on-device 2"),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="bad record 3"):  # the source's error, at the item where it happened
        next(copier)
    with pytest.raises(StopIteration):
        next(copier)


def test_the_device_prefetcher_is_last_on_the_data_path_and_closes_what_it_reads(monkeypatch):
    closed = []

    class Source:
        def __init__(self):
            self.items = iter([torch.zeros(1, 3, 4, 4)])

        def __next__(self):
            return next(self.items)

        def close(self):
            closed.append(True)

    events = []
    monkeypatch.setattr(sw, "CudaCopies", lambda device: RecordingCopies(events))
    path = sw.data_path(iter([torch.zeros(2, 3, 4, 4)]), Switches(channels_last=True, prefetch=1, device_prefetch=True),
                        torch.device("cuda", 0))  # fmt: skip
    assert isinstance(path, sw.DeviceCopier)
    ((kind, batch),) = [e for e in events if e[0] == "copy"]
    assert batch.is_contiguous(memory_format=torch.channels_last)  # the layout was changed before the copy
    copier = sw.DeviceCopier(Source(), RecordingCopies([]))
    copier.close()
    assert closed == [True]
    with pytest.raises(UsageError, match="--device-prefetch needs a CUDA device"):
        sw.data_path(iter([]), Switches(device_prefetch=True), torch.device("cpu"))


def test_ddp_gets_the_bucket_size(monkeypatch):
    seen = {}

    def fake_ddp(model, device_ids=None, **kw):
        seen.update(kw)
        return model

    monkeypatch.setattr(torch.nn.parallel, "DistributedDataParallel", fake_ddp)
    from helpers import FAKE_SPEC, FakeRecipe

    two = DistContext(rank=0, world_size=2)
    for switches, expected in ((Switches(ddp_bucket_mb=4.0), {"bucket_cap_mb": 4.0}), (Switches(), {})):
        seen.clear()
        w = FakeWorkload(FAKE_SPEC, FakeRecipe(), RunConfig(seed=1, switches=switches), data_dir=None, dist=two)
        w.parallelize(torch.nn.Linear(2, 2))
        assert seen == expected
    assert "one process" in sw.workload_reasons(FakeWorkload, distributed=False)["ddp_bucket_mb"]
    assert "ddp_bucket_mb" not in sw.workload_reasons(FakeWorkload, distributed=True)


def test_a_workload_declares_what_does_not_apply_to_it(tmp_path, monkeypatch):
    from trainperf.workloads.resnet.workload import ResNetWorkload

    assert "channels-last" in sw.workload_reasons(ResNetWorkload, distributed=True)["channels_last"]
    monkeypatch.setattr(FakeWorkload, "SWITCHES_NOT_APPLICABLE", {"prefetch": "batches come from elsewhere"})
    outcome, path = run_once(tmp_path, switches=Switches(prefetch=2))
    assert first(path, "trainperf_switches_ignored")["value"] == {"prefetch": "batches come from elsewhere"}
    monkeypatch.setattr(FakeWorkload, "SWITCHES_NOT_APPLICABLE", {"prefech": "a typo"})
    with pytest.raises(ValueError, match="unknown switches"):
        sw.workload_reasons(FakeWorkload, distributed=False)


# --- resume -----------------------------------------------------------------------------------------------
def test_resume_refuses_runs_made_with_other_switches(tmp_path, fake_registry):
    run_suite(options(tmp_path, runs=1), DistContext())
    with pytest.raises(ResultsError, match=re.escape("prefetch (--prefetch) 0 (this run: 2)")):
        run_suite(options(tmp_path, runs=2, switches=Switches(prefetch=2)), DistContext())
    summary = run_suite(options(tmp_path, runs=2), DistContext())[0]  # the same switches: resumed
    assert summary.runs[0]["resumed"]
    assert first(results(tmp_path) / "result_1.txt", "trainperf_prefetch")["value"] == 0
