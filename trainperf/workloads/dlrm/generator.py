"""The mini dlrm data: Criteo-format click logs from a known, seeded latent-factor model.

``trainperf data prepare dlrm`` writes ``<data-dir>/dlrm/mini/day_0`` (training) and ``day_1``
(evaluation) in the Criteo TSV format, and ``manifest.json`` with their SHA-256 and the generator's
facts. The same TSV parser as the reference scale reads them; the mini scale keeps its own mapping of a
categorical value to a row, ``hash % size`` (below), where the reference's TSV days go through the
reference's dictionaries (``preprocess.py``).

The model that draws a sample (all of it from ``numpy.random.default_rng(GENERATOR_SEED)``):

- 26 categorical features with the table sizes ``MINI_TABLE_SIZES``; each feature's value is drawn from
  a Zipf-like law, P(rank r) ∝ (r + 1)^-``ZIPF_EXPONENT``, over a random permutation of its rows. The
  row is written as an 8-digit hexadecimal hash ``row + size * k`` (random k), which the reader maps
  back to the row by ``hash % size``.
- Features 0-12 are user-like, 13-25 item-like. Each row of a feature has a latent vector in R^4
  (scale ``LATENT_SCALE``; the last 4 features of each group carry none: pure noise) and a bias; a
  sample's user factor ``u`` is the sum of its user-like features' vectors, its item factor ``w`` the
  sum of its item-like ones.
- 13 integer features: counts ``Poisson(exp(mu_j + a_j . u + noise))`` with Gaussian noise of standard
  deviation ``DENSE_NOISE`` (noisy views of the user factor); each is missing (empty) with
  probability ``DENSE_MISSING``.
- The label is ``Bernoulli(sigmoid(logit))`` with logit = ``c + beta . x + sum of the feature biases +
  GAMMA * u . w + DELTA * x_0 * (w . e)``, where ``x = log(1 + count)`` (0 when missing), exactly what
  the model reads. The logit is a function of the observed features only, so ranking samples by it is
  the best any model can do: its AUC on the evaluation day is the best achievable AUC, recorded in the
  manifest and printed beside the target.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from trainperf.data import verified
from trainperf.errors import DataError
from trainperf.fileio import atomic_write_text, fsync_dir
from trainperf.workloads.dlrm import MINI
from trainperf.workloads.dlrm.data import NUM_DENSE, NUM_SPARSE

GENERATOR = "trainperf.workloads.dlrm.generator v1"
GENERATOR_SEED = 20220629  # MLPerf Training v2.0 results day; any fixed number would do
TRAIN_SAMPLES, EVAL_SAMPLES = MINI.train_samples, MINI.eval_samples  # the mini spec states them (__init__.py)
MINI_TABLE_SIZES = (
    # user-like (0-12)
    800, 400, 200, 100, 50, 20, 8, 4, 300, 600, 150, 30, 6,
    # item-like (13-25)
    700, 350, 180, 90, 40, 16, 6, 3, 500, 250, 120, 25, 5,
)  # fmt: skip
ZIPF_EXPONENT = 1.1
LATENT_DIM = 4
LATENT_SCALE = 0.25
NOISE_FEATURES = 4  # the last of each group carry no signal
BIAS_SCALE = 0.15
DENSE_NOISE = 0.5
DENSE_MISSING = 0.05
GAMMA = 1.0
DELTA = 0.25
BASE_LOGIT = -1.6  # about a quarter of the samples are clicks, as in Criteo
MINI_SUBDIR = Path("dlrm") / "mini"
TRAIN_FILE, EVAL_FILE, MANIFEST = "day_0", "day_1", "manifest.json"
FIX = "run `trainperf data prepare dlrm` (it regenerates the mini click logs)"


class _Truth:
    """The generator's parameters, all drawn from one seeded stream."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.sizes = np.array(MINI_TABLE_SIZES)
        half = NUM_SPARSE // 2
        self.perm = [rng.permutation(n) for n in self.sizes]
        self.probs = []
        for n in self.sizes:
            p = (np.arange(n) + 1.0) ** -ZIPF_EXPONENT
            self.probs.append(p / p.sum())
        self.latent, self.bias = [], []
        for f, n in enumerate(self.sizes):
            signal = (f % half) < half - NOISE_FEATURES
            self.latent.append(rng.normal(0, LATENT_SCALE if signal else 0.0, (n, LATENT_DIM)))
            self.bias.append(rng.normal(0, BIAS_SCALE if signal else 0.0, n))
        self.mu = rng.uniform(0.5, 3.0, NUM_DENSE)
        self.a = rng.normal(0, 0.5, (NUM_DENSE, LATENT_DIM))
        self.beta = rng.normal(0, 0.15, NUM_DENSE)
        self.e = rng.normal(0, 1.0, LATENT_DIM)
        self.half = half

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(labels, counts with -1 for missing, rows, true logits) of ``n`` samples."""
        rows = np.stack([self.perm[f][rng.choice(len(p), size=n, p=p)] for f, p in enumerate(self.probs)], axis=1)
        u = sum(self.latent[f][rows[:, f]] for f in range(self.half))
        w = sum(self.latent[f][rows[:, f]] for f in range(self.half, NUM_SPARSE))
        rate = np.exp(self.mu + u @ self.a.T + rng.normal(0, DENSE_NOISE, (n, NUM_DENSE)))
        counts = rng.poisson(np.minimum(rate, 1e6))
        counts[rng.random((n, NUM_DENSE)) < DENSE_MISSING] = -1
        x = np.log1p(np.maximum(counts, 0))
        xc = x - np.log1p(np.exp(self.mu))  # centred around each count's typical size
        logit = (
            BASE_LOGIT
            + xc @ self.beta
            + sum(self.bias[f][rows[:, f]] for f in range(NUM_SPARSE))
            + GAMMA * np.einsum("ij,ij->i", u, w)
            + DELTA * xc[:, 0] * (w @ self.e)
        )
        labels = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
        return labels, counts, rows, logit


def _hash_rows(rng: np.random.Generator, rows: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """32-bit hashes that map back to ``rows`` by ``hash % size``."""
    k = rng.integers(0, (2**32 - 1) // sizes, size=rows.shape)
    return rows + sizes * k


def _tsv_lines(labels: np.ndarray, counts: np.ndarray, hashes: np.ndarray) -> str:
    cols = [labels.astype(str)]
    for j in range(NUM_DENSE):
        c = counts[:, j].astype(str)
        cols.append(np.where(counts[:, j] < 0, "", c))
    for j in range(NUM_SPARSE):
        cols.append(np.char.zfill(np.char.lower(np.array([format(int(h), "x") for h in hashes[:, j]])), 8))
    out = cols[0].astype(object)
    for c in cols[1:]:
        out = out + "\t" + c.astype(object)
    return "\n".join(out.tolist()) + "\n"


def generate(n_train: int = TRAIN_SAMPLES, n_eval: int = EVAL_SAMPLES, seed: int = GENERATOR_SEED) -> dict:
    """The two days as TSV text and the best achievable AUC on the evaluation day (in memory)."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    truth = _Truth(rng)
    days, facts = {}, {}
    for name, n in ((TRAIN_FILE, n_train), (EVAL_FILE, n_eval)):
        labels, counts, rows, logit = truth.draw(rng, n)
        days[name] = _tsv_lines(labels, counts, _hash_rows(rng, rows, truth.sizes))
        facts[name] = {
            "samples": n,
            "click_rate": round(float(labels.mean()), 4),
            "best_auc": round(float(roc_auc_score(labels, logit)), 4),
        }
    return {"days": days, "facts": facts}


def mini_dir(data_dir: Path) -> Path:
    return data_dir / MINI_SUBDIR


def _header() -> dict:
    return {
        "generator": GENERATOR,
        "seed": GENERATOR_SEED,
        "train_samples": TRAIN_SAMPLES,
        "eval_samples": EVAL_SAMPLES,
        "table_sizes": list(MINI_TABLE_SIZES),
    }


def read_manifest(data_dir: Path) -> dict:
    return verified.read_manifest(mini_dir(data_dir) / MANIFEST, FIX)


def verify_mini(data_dir: Path, *, checksums: bool = True) -> list[str]:
    """Problems with the mini data ([] when it is whole); ``checksums=False`` checks names and sizes only."""
    try:
        manifest = read_manifest(data_dir)
    except DataError as e:
        return [str(e)]
    root = mini_dir(data_dir)
    found = {k: manifest.get(k) for k in _header()}
    if found != _header():
        return [f"{root / MANIFEST} was written by another generator version or settings: {FIX}"]
    problems = []
    for name in (TRAIN_FILE, EVAL_FILE):
        entry = manifest["files"].get(name)
        path = root / name
        if not isinstance(entry, dict) or not path.is_file():
            problems.append(f"{path} is missing")
        elif path.stat().st_size != entry.get("bytes"):
            problems.append(f"{path} is {path.stat().st_size} bytes, the manifest says {entry.get('bytes')}")
        elif checksums and verified.sha256(path) != entry.get("sha256"):
            problems.append(f"{path} does not match its checksum in the manifest")
    return problems


def prepare_mini(data_dir: Path) -> list[Path]:
    """Write the mini click logs and their manifest (idempotent: nothing is rewritten when they verify)."""
    root = mini_dir(data_dir)
    if not verify_mini(data_dir):
        return []
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create data folder {root} ({e.strerror}): choose another with --data-dir") from None
    made = generate()
    files = {}
    written = []
    for name, text in made["days"].items():
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="ascii", newline="\n") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)  # mkstemp makes files private; datasets are meant to be shared
            os.replace(tmp, root / name)
        finally:
            Path(tmp).unlink(missing_ok=True)
        path = root / name
        files[name] = {"bytes": path.stat().st_size, "sha256": verified.sha256(path), **made["facts"][name]}
        written.append(path)
    fsync_dir(root)
    manifest = {**_header(), "best_auc": made["facts"][EVAL_FILE]["best_auc"], "files": files}
    atomic_write_text(root / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    written.append(root / MANIFEST)
    print(
        f"dlrm mini: best achievable AUC on the evaluation day {manifest['best_auc']:.4f} "
        f"(the generator's own logit); click rate {files[EVAL_FILE]['click_rate']:.3f}"
    )
    return written
