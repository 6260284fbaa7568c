"""Shared fixtures: the prepared mini data, a tiny fake workload, and helpers to read MLLOG files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from trainperf.cli import default_data_dir

# Hypothesis (tests/integration/test_fuzz_untrusted.py): CI sees the same examples on every run (derandomized, no
# example database) and no deadline (the machine is shared). HYPOTHESIS_PROFILE=explore draws new examples each run
# and keeps failing ones in .hypothesis/ to replay.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The mini datasets, prepared (idempotently) from Debian's packages as `trainperf data prepare` does."""
    from trainperf.workloads.resnet import data as resnet_data

    root = default_data_dir()
    if not resnet_data.DEBIAN_DIR.exists() and resnet_data.verify_mini(root):
        pytest.fail("Debian's dataset-fashion-mnist is not installed: run `make setup` (scripts/setup.sh)")
    resnet_data.prepare_mini(root)
    from trainperf.workloads.common.detection import coco

    coco.prepare_mini(root)  # the ssd and maskrcnn scenes, composed from the Fashion-MNIST objects above
    from trainperf.workloads.rnnt import generator as rnnt_generator

    rnnt_generator.prepare_mini(root)  # spoken commands synthesized with espeak-ng and flite
    from trainperf.workloads.unet3d import generator as unet3d_generator

    unet3d_generator.prepare_mini(root)  # the unet3d phantoms (drawn, about 10 s)
    from trainperf.workloads.dlrm import generator as dlrm_generator

    dlrm_generator.prepare_mini(root)  # the generated click logs (idempotent)
    from trainperf.workloads.bert import mini as bert_mini

    bert_mini.prepare_mini(root)  # the bert corpus from Debian's dict-gcide, wordnet-base and python3-doc
    return root


@pytest.fixture
def fake_registry(monkeypatch):
    """The registry answers every benchmark key with the fake benchmark of tests/helpers.py (no training)."""
    from helpers import FAKE_BENCHMARK, FakeWorkload

    from trainperf import registry

    monkeypatch.setattr(registry, "benchmark", lambda key: FAKE_BENCHMARK)
    monkeypatch.setattr(registry, "workload_class", lambda key: FakeWorkload)


@pytest.fixture(autouse=True)
def _two_threads(monkeypatch):
    # Keep tests at the machine's size and stop a test from leaking its environment.
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    yield


def trainperf_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env
