"""A stream-ordered caching allocator: device memory reused without aclrtMalloc/aclrtFree (docs/design.md, "The
allocator's ordering")."""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from typing import Any, Callable

import numpy as np

from .errors import AclMemoryError, ClosedError
from .memory import DeviceBuffer
from .runtime import Device
from .streams import Stream

__all__ = ["CachingAllocator", "PooledBuffer", "StreamClock", "ROUND", "DEFAULT_CAPACITY"]

#: Allocation granularity in bytes (requests are rounded up to a multiple).
ROUND = 512
#: Default cap on the bytes of idle cached blocks.
DEFAULT_CAPACITY = 1 << 30


def _rounded(nbytes: int) -> int:
    return max(ROUND, -(-int(nbytes) // ROUND) * ROUND)


class StreamClock:
    """How much of the work queued on one stream is known to be finished: :attr:`launched` counts the work queued
    (:meth:`queued`), :attr:`done` is the count a synchronisation saw when it began (:meth:`sync`)."""

    __slots__ = ("launched", "done", "synchronize")

    def __init__(self, synchronize: Callable[[], Any] | None = None) -> None:
        self.launched = 0
        self.done = 0
        #: waits for the stream (the stream's own method: a clock refers to no owner of its blocks)
        self.synchronize = synchronize

    @property
    def pending(self) -> bool:
        """Whether work may be queued that no synchronisation has waited for."""
        return self.launched > self.done

    def queued(self) -> None:
        """Work is about to be queued on the stream (call it right before the C call)."""
        self.launched += 1

    def sync(self, synchronize: Callable[[], Any] | None = None) -> None:
        """Synchronise the stream (with *synchronize*, else :attr:`synchronize`); then everything counted before
        it began is done."""
        mark = self.launched
        (synchronize or self.synchronize)()  # type: ignore[misc]
        if mark > self.done:
            self.done = mark

    def ready_mark(self) -> int:
        """The value of :attr:`done` from which memory used until now is safe to reuse."""
        return self.launched


class _Block:
    __slots__ = ("buffer", "clock", "ready")

    def __init__(self, buffer: DeviceBuffer) -> None:
        self.buffer = buffer
        self.clock: StreamClock | None = None
        self.ready = 0

    def idle(self) -> bool:
        return self.clock is None or self.clock.done >= self.ready


class PooledBuffer:
    """*nbytes* of device memory from a :class:`CachingAllocator`, with :class:`~acl_bindings.DeviceBuffer`'s
    interface; ``close()`` returns the block, reused once the stream of *clock* passed the work queued so far."""

    def __init__(self, allocator: CachingAllocator, block: _Block, nbytes: int, clock: StreamClock) -> None:
        self._allocator = allocator
        self._block: _Block | None = block
        self.device = block.buffer.device
        self.nbytes = int(nbytes)
        self.ptr = block.buffer.ptr
        self.clock = clock
        # dropped unclosed: an atomic append drained later (the garbage collector never changes the cache)
        self._fin = weakref.finalize(self, allocator._dropped.append, (block, clock))
        self._fin.atexit = False

    @property
    def closed(self) -> bool:
        """True once returned to the cache."""
        return self._block is None

    @property
    def _as_parameter_(self) -> Any:
        return self._open_block().buffer._as_parameter_

    def _check_open(self) -> None:
        self._open_block()

    def _open_block(self) -> _Block:
        block = self._block
        if block is None:
            raise ClosedError("this device buffer is closed")
        return block

    def _range(self, offset: object, nbytes: object, what: str) -> tuple[int, int]:
        block = self._open_block()
        offset, n = block.buffer._range(offset, nbytes, what)
        if offset + n > self.nbytes:
            raise ValueError(f"{what}: range [{offset}, {offset + n}) is outside this {self.nbytes}-byte buffer")
        return offset, n

    def upload(self, array: np.ndarray, offset: int = 0, stream: Stream | None = None) -> None:
        """As :meth:`acl_bindings.DeviceBuffer.upload`, inside these *nbytes*."""
        self._range(offset, np.asarray(array).nbytes, "upload")
        self._open_block().buffer.upload(array, offset, stream)

    def download(self, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """As :meth:`acl_bindings.DeviceBuffer.download`, inside these *nbytes*."""
        self._range(offset, out.nbytes, "download")
        return self._open_block().buffer.download(out, offset)

    def copy_from(self, src: Any, nbytes: int | None = None, stream: Stream | None = None) -> None:
        """As :meth:`acl_bindings.DeviceBuffer.copy_from`, inside these *nbytes*."""
        self._range(0, src.nbytes if nbytes is None else nbytes, "copy_from destination")
        self._open_block().buffer.copy_from(src, src.nbytes if nbytes is None else nbytes, stream)

    def memset(self, value: int = 0, nbytes: int | None = None, stream: Stream | None = None) -> None:
        """As :meth:`acl_bindings.DeviceBuffer.memset`, inside these *nbytes*."""
        self._range(0, self.nbytes if nbytes is None else nbytes, "memset")
        self._open_block().buffer.memset(value, self.nbytes if nbytes is None else nbytes, stream)

    def close(self) -> None:
        """Return the block to the cache (stream-ordered).  Idempotent."""
        block, self._block = self._block, None
        self.ptr = 0  # (a call refuses address 0: acl_bindings.engine.Call.run)
        if block is not None:
            self._fin.detach()
            self._allocator._give_back(block, self.clock)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.ptr:#x}"
        return f"<PooledBuffer {self.nbytes} bytes {state} on device {self.device.id}>"


class CachingAllocator:
    """Device memory of one :class:`~acl_bindings.Device`, cached between uses.

    ``capacity`` is the most bytes of idle blocks kept; ``mallocs`` and ``reuses`` count the blocks made with
    ``aclrtMalloc`` and the requests served from the cache.
    """

    def __init__(self, device: Device, capacity: int = DEFAULT_CAPACITY, *, lock: Any = None) -> None:
        self.device = device
        self._lock = lock  # the owner's, for the device buffers it makes (see acl_bindings._resource)
        self.capacity = int(capacity)
        self._free: OrderedDict[int, list[_Block]] = OrderedDict()  # rounded size -> blocks, most recent last
        self._cached = 0
        self._live: dict[int, _Block] = {}  # id -> blocks handed out (released by release_all)
        self._dropped: deque[tuple[_Block, StreamClock]] = deque()  # from buffers dropped unclosed
        self.mallocs = 0
        self.reuses = 0

    @property
    def holds_memory(self) -> bool:
        """Whether any block (cached or handed out) is still allocated."""
        return bool(self._free or self._live or self._dropped)

    @property
    def blocks(self) -> int:
        """How many device buffers the allocator owns (cached, handed out, or dropped and not drained yet)."""
        return self.cached_blocks + len(self._live)

    @property
    def cached_blocks(self) -> int:
        """How many of those are cached for reuse (not handed out)."""
        return sum(map(len, self._free.values())) + len(self._dropped)

    @property
    def cached_bytes(self) -> int:
        """Bytes held in idle (or not yet idle) cached blocks."""
        return self._cached

    def allocate(self, nbytes: int, clock: StreamClock) -> PooledBuffer:
        """A buffer of at least *nbytes*, used on the stream of *clock*."""
        size = _rounded(nbytes)
        self._drain()
        block = self._take(size)
        if block is None:
            try:
                block = _Block(self._malloc(size))
            except AclMemoryError:
                self.empty_cache(wait=True)  # out of memory: free the cache, then once more
                block = _Block(self._malloc(size))
            self.mallocs += 1
        else:
            self.reuses += 1
        self._live[id(block)] = block
        return PooledBuffer(self, block, nbytes, clock)

    def _malloc(self, size: int) -> DeviceBuffer:
        buffer = DeviceBuffer(self.device, size)
        if self._lock is not None:
            buffer._lock = self._lock
        return buffer

    def _drain(self) -> None:
        while self._dropped:
            block, clock = self._dropped.popleft()
            self._give_back(block, clock)

    def _take(self, size: int) -> _Block | None:
        blocks = self._free.get(size, [])
        for k in reversed(range(len(blocks))):  # the most recently freed first
            if blocks[k].idle():
                block = blocks.pop(k)
                self._cached -= size
                return block
        return None

    def _give_back(self, block: _Block, clock: StreamClock) -> None:
        self._live.pop(id(block), None)
        if block.buffer.closed:
            return
        block.clock, block.ready = clock, clock.ready_mark()
        size = block.buffer.nbytes
        self._free.setdefault(size, []).append(block)
        self._free.move_to_end(size)
        self._cached += size
        if self._cached > self.capacity:
            self._trim(self.capacity)

    def _trim(self, limit: int, wait: bool = False) -> None:
        """Free idle blocks, oldest size class first, to *limit* cached bytes (*wait*: busy ones after a sync)."""
        self._drain()
        first: Exception | None = None
        for size in list(self._free):
            blocks = self._free[size]
            for block in list(blocks):
                if self._cached <= limit:
                    break
                if not block.idle():
                    if not wait or block.clock is None:
                        continue
                    block.clock.sync()
                try:
                    block.buffer.close()
                except Exception as exc:  # a refused free stays owned by its buffer (closed again later)
                    first = first or exc
                    continue
                blocks.remove(block)
                self._cached -= size
            if not blocks:
                del self._free[size]
        if first is not None:
            raise first

    def empty_cache(self, wait: bool = True) -> None:
        """Free every cached block (after its stream finished with it, when *wait*)."""
        self._trim(0, wait)

    def release_all(self) -> None:
        """Free the cache and every block still handed out (the owner synchronised its streams first)."""
        first: Exception | None = None
        try:
            self.empty_cache(wait=True)
        except Exception as exc:
            first = exc
        for key, block in list(self._live.items()):
            try:
                block.buffer.close()
            except Exception as exc:
                first = first or exc
                continue
            del self._live[key]
        if first is not None:
            raise first

    def __repr__(self) -> str:
        return (f"<CachingAllocator device={self.device.id} cached={self._cached} bytes "
                f"live={len(self._live)} blocks>")
