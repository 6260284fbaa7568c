"""The reference's ImageNet-pretrained backbone: MSRA's ResNet-50 in Detectron's C2 pickle, ``R-50.pkl``.

MLPerf v2.0's Mask R-CNN starts from ``catalog://ImageNetPretrained/MSRA/R-50`` (maskrcnn-benchmark's
``paths_catalog.py``): a Python 2 pickle of a dict of NumPy arrays, optionally under ``"blobs"``, with
Caffe2 names (``conv1_w``, ``res_conv1_bn_s``, ``res2_0_branch2a_w``, ...; ``_s``/``_b`` are the frozen
affine BatchNorm's scale and bias). The reference reads it with ``pickle.load(f, encoding="latin1")``,
renames the blobs (``utils/c2_model_loading.py``) and copies each into the model tensor whose name ends
with the new name (``utils/model_serialization.py``).

The file comes from elsewhere, and unpickling can run code: :class:`_ArraysOnly` resolves only the NumPy
globals that rebuild arrays (``_reconstruct``, ``ndarray``, ``dtype``, ``scalar``) and refuses every other
global with a :class:`~trainperf.errors.DataError` naming the file, before anything is called. (A weights-only
loader that fits does not exist here: ``torch.load(weights_only=True)`` reads torch's own format, and NumPy's
``allow_pickle=False`` applies to ``.npy`` files, not to a pickle.) Names and shapes are then checked
against the model: a missing or wrong-shaped tensor is a DataError naming the file and the tensor.

:func:`write_c2_pickle` writes the same layout byte for byte as Python 2's ``cPickle`` (protocol 2,
NumPy arrays whose data are 8-bit strings) without NumPy's pickler, so tests and the smoke fixture
exercise the loader on the real format; :func:`random_r50_blobs` gives seeded weights of the real names
and shapes for a smoke run (no pretrained weights ship with trainperf).
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from trainperf.errors import DataError
from trainperf.text import printable

R50_FILE = "R-50.pkl"
R50_STAGES = (3, 4, 6, 3)  # blocks in res2..res5 (ResNet-50)
_BRANCHES = ("branch2a", "branch2b", "branch2c")
FIX = (
    "use the MSRA ImageNet-pretrained ResNet-50 of the reference (Detectron's ImageNetPretrained/MSRA/R-50.pkl, "
    "as mlcommons/training object_detection downloads it) or pass --set backbone_checkpoint=PATH"
)


# --- the Caffe2 names --------------------------------------------------------------------------------------
def r50_blob_shapes() -> dict[str, tuple[int, ...]]:
    """Every backbone blob of the MSRA ResNet-50 (C2 name -> shape), in the network's order; 159 blobs.

    ``fc1000_w``/``fc1000_b`` (the ImageNet classifier) are in the file too; the detector does not use them.
    """
    shapes: dict[str, tuple[int, ...]] = {"conv1_w": (64, 3, 7, 7), "res_conv1_bn_s": (64,), "res_conv1_bn_b": (64,)}
    in_channels = 64
    for stage, blocks in enumerate(R50_STAGES, start=2):
        width = 64 * 2 ** (stage - 2)
        out_channels = 4 * width
        for block in range(blocks):
            prefix = f"res{stage}_{block}"
            if block == 0:  # the projection shortcut
                shapes[f"{prefix}_branch1_w"] = (out_channels, in_channels, 1, 1)
                shapes[f"{prefix}_branch1_bn_s"] = shapes[f"{prefix}_branch1_bn_b"] = (out_channels,)
            convs = ((width, in_channels, 1, 1), (width, width, 3, 3), (out_channels, width, 1, 1))
            for branch, shape in zip(_BRANCHES, convs, strict=True):
                shapes[f"{prefix}_{branch}_w"] = shape
                shapes[f"{prefix}_{branch}_bn_s"] = shapes[f"{prefix}_{branch}_bn_b"] = (shape[0],)
            in_channels = out_channels
    return shapes


def c2_to_torchvision(name: str) -> str:
    """The name maskrcnn-benchmark gives a C2 ResNet blob (``_rename_basic_resnet_weights``, the ResNet
    part, applied in the same order): ``res2_0_branch2a_bn_s`` -> ``layer1.0.bn1.weight``."""
    k = name.replace("_", ".")
    for old, new in (
        (".w", ".weight"),
        (".bn", "_bn"),
        (".b", ".bias"),
        ("_bn.s", "_bn.scale"),
        (".biasranch", ".branch"),
        ("res.conv1_", "conv1_"),
        ("_bn.scale", "_bn.weight"),  # Affine-Channel -> BatchNorm
        ("conv1_bn.", "bn1."),
        ("res2.", "layer1."),
        ("res3.", "layer2."),
        ("res4.", "layer3."),
        ("res5.", "layer4."),
        (".branch2a.", ".conv1."),
        (".branch2a_bn.", ".bn1."),
        (".branch2b.", ".conv2."),
        (".branch2b_bn.", ".bn2."),
        (".branch2c.", ".conv3."),
        (".branch2c_bn.", ".bn3."),
        (".branch1.", ".downsample.0."),
        (".branch1_bn.", ".downsample.1."),
    ):
        k = k.replace(old, new)
    return k


# --- reading, without running code from the file ---------------------------------------------------------
def _numpy_reconstruct() -> Any:
    try:
        from numpy._core.multiarray import _reconstruct  # NumPy 2
    except ImportError:  # pragma: no cover - NumPy 1
        from numpy.core.multiarray import _reconstruct
    return _reconstruct


def _numpy_scalar() -> Any:
    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # pragma: no cover - NumPy 1
        from numpy.core.multiarray import scalar
    return scalar


def _empty_array(cls: Any, shape: Any, dtype: Any) -> np.ndarray:
    """``_reconstruct`` as pickled arrays call it: an empty ndarray that ``__setstate__`` then fills from the
    file's bytes. Anything else (another class, a shape that would allocate before any data is read) is refused."""
    if cls is not np.ndarray or tuple(shape) != (0,):
        raise pickle.UnpicklingError(
            f"_reconstruct({getattr(cls, '__name__', cls)!s}, {shape!r}) is not an empty array"
        )
    return _numpy_reconstruct()(cls, shape, dtype)


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that can build dicts, lists, strings, numbers and NumPy arrays, and nothing else."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _empty_array,  # Python 2 / NumPy 1 pickles
        ("numpy._core.multiarray", "_reconstruct"): _empty_array,  # NumPy 2 pickles
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "scalar"): None,  # NumPy scalars, resolved lazily
        ("numpy._core.multiarray", "scalar"): None,
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise _Refused(f"{module}.{name}")
        found = self._ALLOWED[(module, name)]
        return _numpy_scalar() if found is None else found


class _Refused(pickle.UnpicklingError):
    """A global that a weights file has no business asking for."""


def read_c2_pickle(path: Path) -> dict[str, np.ndarray]:
    """The blobs of a Detectron C2 pickle (``{"blobs": {name: array}}`` or ``{name: array}``), read with
    ``encoding="latin1"`` as the reference reads it; ``*_momentum`` blobs (optimizer state) are left out as the
    reference leaves them out. DataError (naming the file) for anything that is not such a pickle."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = _ArraysOnly(f, encoding="latin1").load()
    except FileNotFoundError:
        raise DataError(
            f"backbone weights {path} not found: the reference backbone starts from {R50_FILE}; {FIX}"
        ) from None
    except IsADirectoryError:
        raise DataError(f"backbone weights {path} is a folder, not the {R50_FILE} file; {FIX}") from None
    except _Refused as e:
        raise DataError(
            f"backbone weights {path} asks to call {printable(str(e))[:120]}, and unpickling that could run code from "
            f"the file: it was refused unread (a C2 weights pickle holds NumPy arrays only); {FIX}"
        ) from None
    except Exception as e:  # a truncated, foreign or corrupt file: unpickling raises many types
        first = (printable(str(e)).strip().splitlines() or [type(e).__name__])[0][:200]
        raise DataError(
            f"backbone weights {path} cannot be read as a Detectron C2 pickle of NumPy arrays ({type(e).__name__}: "
            f"{first}); {FIX}"
        ) from None
    blobs = data.get("blobs", data) if isinstance(data, dict) else data
    if not isinstance(blobs, dict):
        raise DataError(
            f"backbone weights {path} holds a {type(blobs).__name__}, not a dict of named arrays (a C2 pickle is "
            f"{{'blobs': {{name: array}}}}); {FIX}"
        )
    out: dict[str, np.ndarray] = {}
    for name, value in blobs.items():
        if not isinstance(name, str):
            raise DataError(
                f"backbone weights {path} has a blob named {printable(repr(name))[:80]}, not a string; {FIX}"
            )
        if name.endswith("_momentum"):
            continue
        if isinstance(value, np.ndarray):
            out[name] = value
    return out


def load_r50_into(body: Any, path: Path) -> list[str]:
    """Copy the MSRA ResNet-50 of the C2 pickle ``path`` into ``body`` (our ResNet-50, torchvision's names).

    Every parameter and frozen-BatchNorm scale and bias of ``body`` must come from the file with its exact
    shape; the BatchNorm statistics stay at mean 0, variance 1, as the reference leaves them (the C2 file
    holds the affine form only). Returns the C2 names loaded. DataError, naming the file and the tensor,
    when one is missing, not a floating-point array, or of another shape.
    """
    import torch

    blobs = read_c2_pickle(path)
    state = body.state_dict()
    wanted = {k for k in state if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))}
    by_name = {c2_to_torchvision(c2): c2 for c2 in blobs}
    loaded: dict[str, torch.Tensor] = {}
    for name in (n for n in state if n in wanted and n in by_name):
        c2, array = by_name[name], blobs[by_name[name]]
        if not np.issubdtype(array.dtype, np.floating):
            raise DataError(
                f"backbone weights {path}: tensor {printable(c2)} ({name}) is of type {array.dtype}, not floating "
                f"point; {FIX}"
            )
        if tuple(array.shape) != tuple(state[name].shape):
            raise DataError(
                f"backbone weights {path}: tensor {printable(c2)} ({name}) has shape {tuple(array.shape)}; the "
                f"reference ResNet-50 needs {tuple(state[name].shape)}. {FIX}"
            )
        loaded[name] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    missing = [name for name in state if name in wanted and name not in loaded]
    if missing:
        expected = {c2_to_torchvision(c2): c2 for c2 in r50_blob_shapes()}
        names = ", ".join(f"{expected.get(m, m)} ({m})" for m in missing[:3])
        raise DataError(
            f"backbone weights {path} lack {len(missing)} of the reference ResNet-50's {len(wanted)} tensors "
            f"(first: {names}); {FIX}"
        )
    with torch.no_grad():
        for name, value in loaded.items():
            state[name].copy_(value)  # state_dict() shares storage with the module's tensors
    return [by_name[name] for name in loaded]


# --- writing the same layout (tests, smoke fixtures) -----------------------------------------------------
def _int(value: int) -> bytes:
    if 0 <= value < 256:
        return b"K" + bytes([value])  # BININT1
    if 0 <= value < 65536:
        return b"M" + struct.pack("<H", value)  # BININT2
    return b"J" + struct.pack("<i", value)  # BININT


def _str8(data: bytes) -> bytes:
    """A Python 2 8-bit string (SHORT_BINSTRING / BINSTRING), read back by ``encoding="latin1"`` as str."""
    if len(data) < 256:
        return b"U" + bytes([len(data)]) + data
    return b"T" + struct.pack("<I", len(data)) + data


def _tuple(items: list[bytes]) -> bytes:
    return b"(" + b"".join(items) + b"t"  # MARK ... TUPLE


def _array(a: np.ndarray) -> bytes:
    """What Python 2's cPickle wrote for a little-endian C-ordered array (NumPy 1's ``ndarray.__reduce__``)."""
    a = np.ascontiguousarray(a)
    kind = a.dtype.str.lstrip("<>|=")  # 'f4'
    dtype = (
        b"cnumpy\ndtype\n" + _tuple([_str8(kind.encode()), _int(0), _int(1)]) + b"R"
        + _tuple([_int(3), _str8(b"<"), b"N", b"N", b"N", b"J\xff\xff\xff\xff", b"J\xff\xff\xff\xff", _int(0)])
        + b"b"
    )  # fmt: skip
    state = _tuple([_int(1), _tuple([_int(d) for d in a.shape]), dtype, b"\x89", _str8(a.astype("<" + kind).tobytes())])
    reconstruct = b"cnumpy.core.multiarray\n_reconstruct\n" + _tuple(
        [b"cnumpy\nndarray\n", _tuple([_int(0)]), _str8(b"b")]
    )
    return reconstruct + b"R" + state + b"b"


def c2_pickle_bytes(blobs: Mapping[str, np.ndarray], *, under_blobs: bool = True) -> Iterator[bytes]:
    """The pickle of ``{"blobs": blobs}`` (or of ``blobs``) as Python 2's cPickle wrote it, in pieces."""
    yield b"\x80\x02}"  # PROTO 2, EMPTY_DICT
    if under_blobs:
        yield _str8(b"blobs") + b"}"
    for name, array in blobs.items():
        yield _str8(name.encode("latin1")) + _array(np.asarray(array)) + b"s"  # key, value, SETITEM
    if under_blobs:
        yield b"s"
    yield b"."


def write_c2_pickle(path: Path, blobs: Mapping[str, np.ndarray], *, under_blobs: bool = True) -> None:
    """Write ``blobs`` as a Detectron C2 pickle (see :func:`c2_pickle_bytes`), atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as f:
        for piece in c2_pickle_bytes(blobs, under_blobs=under_blobs):
            f.write(piece)
    tmp.replace(path)


def random_r50_blobs(seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded stand-in weights of the MSRA R-50.pkl's names and shapes (``fc1000`` included): each convolution
    N(0, 1/fan_in) and each frozen BatchNorm the identity. Not pretrained: for smoke runs and tests."""
    rng = np.random.default_rng(seed)
    blobs: dict[str, np.ndarray] = {}
    for name, shape in r50_blob_shapes().items():
        if name.endswith("_bn_s"):
            blobs[name] = np.ones(shape, dtype=np.float32)
        elif name.endswith("_bn_b"):
            blobs[name] = np.zeros(shape, dtype=np.float32)
        else:
            fan_in = int(np.prod(shape[1:]))
            blobs[name] = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(fan_in)).astype(np.float32)
    blobs["fc1000_w"] = np.zeros((1000, 2048), dtype=np.float32)
    blobs["fc1000_b"] = np.zeros((1000,), dtype=np.float32)
    return blobs
