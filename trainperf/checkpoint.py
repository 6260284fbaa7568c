"""Loading a checkpoint's tensors, never its Python objects.

``torch.load`` unpickles: a checkpoint can hold any Python object, and unpickling one can run code from the file.
trainperf loads only tensors and containers of them (``weights_only=True``, which the environment variable
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot override when it is passed explicitly), and a file that needs more
is refused with a :class:`~trainperf.errors.DataError` that names it and says how to save it instead.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from trainperf.errors import DataError
from trainperf.text import printable

# torch's weights-only unpickler names the class or function a checkpoint asks for with this word (torch 2.14)
_NEEDS_OBJECTS = "GLOBAL"
SAVE_AS_TENSORS = "save the weights as a state dict of tensors: torch.save(model.state_dict(), PATH)"


def load_tensors(path: Path, *, what: str) -> dict[str, Any]:
    """The state dict in the checkpoint ``path`` (``what`` names it in errors, e.g. "minigo target checkpoint")."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise DataError(f"{what} {path} not found") from None
    except pickle.UnpicklingError as e:
        if any(words in str(e) for words in _NEEDS_OBJECTS):
            raise DataError(
                f"{what} {path} holds Python objects other than tensors, and unpickling them could run code from the "
                f"file: trainperf loads tensors only; {SAVE_AS_TENSORS}"
            ) from None
        raise DataError(
            f"{what} {path} cannot be read as a torch checkpoint (not a pickle); {SAVE_AS_TENSORS}"
        ) from None
    except Exception as e:  # a truncated or foreign file: torch.load raises many types
        first = (printable(str(e)).strip().splitlines() or [type(e).__name__])[0][:200]
        raise DataError(f"{what} {path} cannot be read as a torch checkpoint ({first}); {SAVE_AS_TENSORS}") from None
    if not isinstance(state, dict):
        raise DataError(f"{what} {path} holds a {type(state).__name__}, not a state dict; {SAVE_AS_TENSORS}")
    return state
