"""The scaling model: all-reduce formulas, RCP interpolation, `trainperf scale` on a fake results folder."""

from __future__ import annotations

import json
import math
import sys

import pytest

from trainperf.cli import main
from trainperf.errors import DataError, UsageError
from trainperf.scaling import facts, model, validate
from trainperf.scaling.facts import RCPTable
from trainperf.scaling.measured import read_measured

# --- the all-reduce formulas, on cases computed by hand ----------------------------------------------------


def test_ring_allreduce_by_hand():
    # 8 accelerators, 100 MB, 10 GB/s, 5 us: 2*7/8 * 0.01 s + 14 * 5e-6 s = 0.0175 + 0.00007
    assert model.allreduce_seconds(100e6, 8, 10.0, 5.0, "ring") == pytest.approx(0.01757)
    # 2 accelerators: each sends and receives half the buffer twice: 2*1/2 * 1e9/1e9 + 2 * 1e-6
    assert model.allreduce_seconds(1e9, 2, 1.0, 1.0, "ring") == pytest.approx(1.000002)


def test_tree_allreduce_by_hand():
    # 8 accelerators: 2 * log2(8) = 6 levels of (5 us + 100 MB / 10 GB/s)
    assert model.allreduce_seconds(100e6, 8, 10.0, 5.0, "tree") == pytest.approx(6 * (5e-6 + 0.01))
    # 1,024 accelerators, latency only: 2 * 10 * 2 us
    assert model.allreduce_seconds(0.0, 1024, 1.0, 2.0, "tree") == pytest.approx(40e-6)


def test_one_accelerator_communicates_nothing():
    assert model.allreduce_seconds(1e9, 1, 1.0, 100.0, "ring") == 0.0
    assert model.allreduce_seconds(1e9, 1, 1.0, 100.0, "tree") == 0.0


@pytest.mark.parametrize(
    "n, bw, lat, topology, words",
    [(0, 1.0, 1.0, "ring", "at least 1"), (4, 0.0, 1.0, "ring", "--bandwidth"), (4, 1.0, -1.0, "ring", "--latency-us"),
     (4, math.inf, 1.0, "ring", "--bandwidth"), (4, 1.0, 1.0, "torus", "unknown topology")],
)  # fmt: skip
def test_bad_network_is_refused(n, bw, lat, topology, words):
    with pytest.raises(UsageError, match=words):
        model.allreduce_seconds(1e6, n, bw, lat, topology)


# --- the RCP tables ----------------------------------------------------------------------------------------

TABLE = RCPTable("resnet", "epochs", "test", (1000.0, 2000.0, 4000.0), (30.0, 40.0, 60.0))


def test_rcp_interpolates_between_batch_sizes():
    assert TABLE.at(1500) == (35.0, None)
    assert TABLE.at(3000) == (50.0, None)
    assert TABLE.at(2000) == (40.0, None)


def test_rcp_clamps_outside_its_batch_sizes_with_a_warning():
    value, warning = TABLE.at(500)
    assert value == 30.0 and "outside the RCP batch sizes (1000-4000" in warning and "batch 1000" in warning
    value, warning = TABLE.at(10_000)
    assert value == 60.0 and "batch 4000" in warning


def test_the_facts_are_the_benchmarks_own():
    # rnnt: the v2.0 reference configuration's model (baseline_v3-1023sp.yaml: pred_n_hid 512), 49,006,080
    # parameters, not a count made with a 320-wide prediction network (46,152,384); and its mini model's
    assert facts.gradient_bytes("rnnt", "reference") == 49_006_080 * 4
    assert facts.gradient_bytes("rnnt", "mini") == 897_286 * 4
    assert facts.gradient_bytes("dlrm", "reference") == 2_368_897 * 4  # the dense MLPs only: the tables are sharded
    assert facts.train_samples("resnet") == 1_281_167 and facts.train_samples("bert") == 1  # bert's RCPs: samples
    assert facts.published_batch_per_accelerator("dlrm") == 6_912
    assert facts.scalable() == ("resnet", "ssd", "maskrcnn", "unet3d", "rnnt", "bert", "dlrm")
    with pytest.raises(UsageError, match="minigo cannot be scaled by this model: its work is self-play"):
        facts.gradient_bytes("minigo", "reference")


def test_official_rcp_tables_are_read_as_means_per_batch():
    resnet = facts.rcp_table("resnet", "reference")
    assert resnet.batches[0] == 1632 and resnet.batches[-1] == 67840
    assert resnet.at(1632)[0] == pytest.approx(35.0)  # 17 runs, all 35 epochs (rcps_resnet.json)
    bert = facts.rcp_table("bert", "reference")
    assert bert.unit == "samples" and bert.at(256)[0] == pytest.approx(2552704.0)
    assert facts.rcp_table("ssd", "mini") is None  # no mini RCP for ssd: the model says so with a warning


def test_convergence_factor_is_the_ratio_of_rcp_means():
    factor, warnings = model.convergence_factor(TABLE, 1000, 3000)
    assert factor == pytest.approx(50 / 30) and warnings == []
    factor, warnings = model.convergence_factor(None, 1000, 3000)
    assert factor == 1.0 and "no RCP table" in warnings[0]


def test_bad_rcp_file_is_a_data_error():
    with pytest.raises(DataError, match="'Epochs to converge'"):
        facts._parse_rcp('{"r": {"BS": 8, "Epochs to converge": ["1; rm -rf /"]}}', "resnet", "x.json", "epochs")
    with pytest.raises(DataError, match="not JSON"):
        facts._parse_rcp("{", "resnet", "x.json", "epochs")


# --- the prediction ----------------------------------------------------------------------------------------

RUN = model.Measured(benchmark="resnet", scale="reference", accelerators=8, global_batch=1000.0, minutes=10.0,
                     samples_to_converge=600_000.0)  # fmt: skip


def test_prediction_by_hand():
    # measured step: 600 s / 600 steps = 1 s; its all-reduce (100 MB, 10 GB/s, no latency) 2*7/8*0.01 = 0.0175 s
    p = model.predict(RUN, 16, gradient_bytes=100e6, table=TABLE, bandwidth_gbps=10.0, latency_us=0.0)
    assert p.measured_communication_s == pytest.approx(0.0175)
    assert p.throughput_per_accelerator == pytest.approx(125 / 0.9825)  # 125 local samples per 0.9825 s
    assert p.global_batch == 2000 and p.compute_s == pytest.approx(0.9825)
    assert p.communication_s == pytest.approx(2 * 15 / 16 * 0.01)
    assert p.convergence_factor == pytest.approx(40 / 30)
    assert p.minutes == pytest.approx(600_000 * 40 / 30 / 2000 * (0.9825 + 0.01875) / 60)


def test_prediction_to_the_measured_size_returns_the_measured_time():
    p = model.predict(RUN, 8, gradient_bytes=100e6, table=TABLE, bandwidth_gbps=10.0, latency_us=5.0)
    assert p.minutes == pytest.approx(RUN.minutes) and p.convergence_factor == 1.0


def test_a_network_slower_than_the_measured_step_is_refused():
    with pytest.raises(UsageError, match="longer than the measured step"):
        model.predict(RUN, 16, gradient_bytes=100e9, table=TABLE, bandwidth_gbps=1.0, latency_us=0.0)


def test_fewer_than_one_accelerator_is_refused():
    with pytest.raises(UsageError, match="at least 1"):
        model.predict(RUN, 0, gradient_bytes=1e6, table=TABLE)


# --- `trainperf scale` on a results folder of the harness's fake workload ------------------------------


@pytest.fixture
def fake_results(tmp_path, monkeypatch):
    """Three successful runs of the fake workload (scripted as resnet at the mini scale: batch 8, 40
    training samples an epoch, the target reached at the second evaluation, i.e. after 80 samples). The fake
    registry answers during the runs only: `trainperf scale` reads the real benchmarks' facts."""
    from helpers import FAKE_BENCHMARK, FakeWorkload

    from trainperf import registry
    from trainperf.dist import DistContext
    from trainperf.harness.suite import SuiteOptions, run_suite

    out = tmp_path / "out"
    opts = SuiteOptions(benchmarks=("resnet",), scale="mini", runs=3, out=out, data_dir=tmp_path,
                        system_name="test-system")  # fmt: skip
    with monkeypatch.context() as m:
        m.setattr(registry, "benchmark", lambda key: FAKE_BENCHMARK)
        m.setattr(registry, "workload_class", lambda key: FakeWorkload)
        run_suite(opts, DistContext())
    return out


def test_measured_run_is_read_from_the_result_files(fake_results):
    run = read_measured(fake_results, "resnet")
    assert (run.scale, run.accelerators, run.global_batch, run.samples_to_converge) == ("mini", 1, 8.0, 80.0)
    assert 0 < run.minutes < 1


def test_scale_command_prints_the_breakdown(fake_results, capsys):
    assert main(["scale", "resnet", "--from", str(fake_results), "--to", "4", "--bandwidth", "10"]) == 0
    out, err = capsys.readouterr()
    for words in ("compute per step", "communication per step", "convergence factor", "predicted time to train on 4"):
        assert words in out
    assert "outside the RCP batch sizes (128 only" in err  # the mini resnet RCP has one batch size
    assert main(["scale", "resnet", "--from", str(fake_results), "--to", "4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["prediction"]
    assert p["global_batch"] == 32 and p["convergence_factor"] == 1.0 and p["minutes"] > 0
    assert p["communication_s"] == pytest.approx(
        model.allreduce_seconds(33_498 * 4, 4, model.DEFAULT_BANDWIDTH_GBPS, model.DEFAULT_LATENCY_US)
    )


def test_scale_command_bad_input(fake_results, tmp_path, capsys):
    cases = [
        (["scale", "resnett", "--from", str(fake_results), "--to", "4"], "unknown benchmark 'resnett'"),
        (["scale", "minigo", "--from", str(fake_results), "--to", "4"], "self-play"),
        (["scale", "resnet", "--from", str(fake_results), "--to", "0"], "at least 1"),
        (["scale", "resnet", "--from", str(tmp_path / "nowhere"), "--to", "4"], "no such folder"),
        (["scale", "ssd", "--from", str(fake_results), "--to", "4"], "no successful ssd run"),
        (["scale", "resnet", "--from", str(fake_results), "--to", "4", "--bandwidth", "-1"], "--bandwidth"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        assert words in capsys.readouterr().err


def test_a_tampered_result_file_is_refused_naming_it(fake_results, capsys):
    path = sorted(fake_results.glob("results/*/resnet/result_*.txt"))[0]
    text = path.read_text().replace(
        '"key": "global_batch_size", "value": 8', '"key": "global_batch_size", "value": "8"'
    )
    path.write_text(text)
    assert main(["scale", "resnet", "--from", str(fake_results), "--to", "4"]) == 2
    err = capsys.readouterr().err
    assert path.name in err and "'global_batch_size'" in err


def test_the_package_imports_no_torch():
    import subprocess

    code = "import sys, trainperf.scaling.cli, trainperf.scaling.validate; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- the validation on the published results ---------------------------------------------------------------


def test_validation_fits_on_single_node_results_and_predicts_larger_systems():
    cases = validate.validate()
    assert cases and all(c.n_acc > max(c.fit) for c in cases)
    single = [c for c in cases if c.mode == "single node"]
    assert len(single) > 100 and {c.benchmark for c in single} >= {"resnet", "bert", "maskrcnn"}
    table = validate.summary(cases)
    assert table["single node"]["all"][0] == len(single) and table["single node"]["all"][1] > 0
