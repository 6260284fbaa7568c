"""The batch pipeline: batches in channels-last layout or in pinned memory, read ahead in a background thread,
and copied to a GPU one step ahead on a side stream. :mod:`trainperf.harness.switches` puts them on a run's
data path (``--channels-last``, ``--pin-memory``, ``--prefetch``, ``--device-prefetch``).

Torch-free at import time, like the switches; the functions import torch when called.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def layout(t: torch.Tensor) -> torch.Tensor:
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


def map_tensors(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to every tensor of a batch made of tuples, lists and dicts (other values kept as they are).

    Written here rather than with torch's pytree helpers, which are private API.
    """
    import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        return type(batch)(*(map_tensors(x, fn) for x in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(map_tensors(x, fn) for x in batch)
    if isinstance(batch, dict):
        return {k: map_tensors(v, fn) for k, v in batch.items()}
    return batch


def channels_last_batch(batch: Any) -> Any:
    """Floating-point 4-D and 5-D tensors of a batch (the images and volumes) in channels-last layout."""
    return map_tensors(batch, lambda t: layout(t) if t.is_floating_point() else t)


def pinned_batch(batch: Any) -> Any:
    return map_tensors(batch, lambda t: t if t.device.type != "cpu" else t.pin_memory())


class Prefetcher:
    """An iterator that reads ``depth`` items ahead of its consumer, in one background thread, in order.

    The producer thread holds only the source iterator, the queue and a stop flag, so a Prefetcher that is
    dropped (the run ended) stops its thread through ``weakref.finalize``. An error of the source is raised
    to the consumer at the item where it happened. Written here because torch's DataLoader prefetches only
    for its own worker processes, and a workload's batches come from an iterator of its own.
    """

    _DONE = object()

    def __init__(self, source: Iterator[Any], depth: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_produce, args=(source, self._queue, self._stop), name="trainperf-prefetch", daemon=True
        )
        self._thread.start()
        self._finalizer = weakref.finalize(self, self._stop.set)

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Any:
        item = self._queue.get()
        if item is Prefetcher._DONE:
            self._stop.set()
            raise StopIteration
        if isinstance(item, _Failure):
            self._stop.set()
            raise item.error
        return item

    def close(self) -> None:
        self._finalizer()


@dataclass
class _Failure:
    error: BaseException


def _produce(source: Iterator[Any], q: queue.Queue, stop: threading.Event) -> None:
    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        for item in source:
            if not put(item):
                return
    except BaseException as e:  # handed to the consumer, raised there
        put(_Failure(e))
        return
    put(Prefetcher._DONE)


class CudaCopies:
    """Copies of batches to one CUDA device on a side stream, and the hand-over to the stream the step runs on."""

    def __init__(self, device: torch.device) -> None:
        import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

        self.device = device
        self.stream = torch.cuda.Stream(device=device)

    def issue(self, batch: Any) -> tuple[Any, Any]:
        """Start the copies of every tensor of ``batch`` (asynchronous from pinned memory); (copies, their event)."""
        import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

        with torch.cuda.stream(self.stream):
            moved = map_tensors(batch, lambda t: t.to(self.device, non_blocking=True))
            event = torch.cuda.Event()
            event.record(self.stream)
        return moved, event

    def ready(self, moved: Any, event: Any) -> Any:
        """The copies, usable on the current stream: it waits for them on the GPU (the host does not wait), and
        the caching allocator is told the current stream uses them (so their memory is not reused too early)."""
        import torch  # torch-free at import (`trainperf --help` loads this module): torch when called

        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        map_tensors(moved, lambda t: t.record_stream(current) if t.device.type == "cuda" else t)
        return moved


class DeviceCopier:
    """An iterator of batches already on the device: batch k+1's copy is started when batch k is handed over,
    so it runs while step k computes (the data prefetcher of NVIDIA's reference ResNet training, for any batch
    made of tensors, tuples, lists and dicts). ``copies``: an object with ``issue(batch) -> (copies, event)``
    and ``ready(copies, event) -> batch``, :class:`CudaCopies` for a GPU. An error of the source is raised at the
    item where it happened. Written here because torch has no device-side prefetcher for an arbitrary iterator
    (its DataLoader pins memory but leaves the copy to the step)."""

    def __init__(self, source: Iterator[Any], copies: Any) -> None:
        self._source = source
        self._copies = copies
        self._next = self._issue()

    def _issue(self) -> Any:
        try:
            batch = next(self._source)
        except StopIteration:
            return None
        except Exception as e:  # raised to the consumer when this item is due
            return _Failure(e)
        return self._copies.issue(batch)

    def __iter__(self) -> DeviceCopier:
        return self

    def __next__(self) -> Any:
        item = self._next
        if item is None:
            raise StopIteration
        if isinstance(item, _Failure):
            self._next = None
            raise item.error
        batch = self._copies.ready(*item)
        self._next = self._issue()  # the next copy overlaps this step
        return batch

    def close(self) -> None:
        self._next = None
        close = getattr(self._source, "close", None)
        if close is not None:
            close()
