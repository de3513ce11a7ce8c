"""A prepared call: one call shape of a declared operator on a session's device arrays, owned by the caller."""

from __future__ import annotations

from typing import Any, Sequence

from ._resource import releases_allowed
from .engine import Call
from .errors import AclnnParamError, ClosedError
from .op import ArgKind, TwoPhaseOp

__all__ = ["PreparedCall"]


class PreparedCall:
    """One call shape of *op* on a session's device arrays, made once (:meth:`Session.prepare_call`); each run
    synchronises the stream unless *sync* is False.  A context manager, closed with the session too.

    Attributes: ``plan``, ``fallback``, ``workspace_size``, ``calls``, ``retry_after`` (of its
    :class:`~acl_bindings.engine.Call`), ``sync``, ``session``, ``op``."""

    def __init__(self, session: Any, op: TwoPhaseOp, values: Sequence[Any], *, plan: bool = True,
                 sync: bool = True) -> None:
        self.session, self.op, self.sync = session, op, bool(sync)
        self._closed = True
        self._tensors = op.inputs + op.outputs
        self._result = op.outputs[0] if op.outputs else None
        with session._lock, session._active():
            self._values = session.values_of(op, values)
            self._check_distinct(self._values)
            self._call = Call(op, self._values, plan=plan, probe=True, lock=session._lock)
            session._prepared.add(self)
            session.workspace.reserve(self._call.workspace_size)  # (now: a call allocates nothing)
        self._closed = False

    plan = property(lambda self: self._call.plan, doc="Whether calls use a repeatable executor.")
    fallback = property(lambda self: self._call.fallback, doc="The refusal of a plan asked for, else None.")
    workspace_size = property(lambda self: self._call.workspace_size, doc="Bytes of workspace phase 1 asked for.")
    calls = property(lambda self: self._call.calls, doc="Completed calls.")
    retry_after = Call.retry_after

    @property
    def closed(self) -> bool:
        """True after ``close()`` (or the session's)."""
        return self._closed or self.session.closed

    def _check_distinct(self, values: Sequence[Any]) -> None:
        if len({id(values[pos].buffer) for pos in self._tensors}) < len(self._tensors):
            names = " and ".join(self.op.schema[pos].name for pos in self._tensors)
            raise AclnnParamError(161002, self.op.phase1_name,
                                  f"{names} share one device buffer; they must not overlap")

    def run(self, replace: Sequence[tuple[int, Any]] = ()) -> Any:
        """Run it, using the arrays of *replace* (``(schema position, array)``; None keeps one) from now on;
        returns the first output's array.  161002 for another session's array, a shared buffer, or an array
        unlike the one it replaces; ClosedError once closed."""
        session = self.session
        with session._lock:
            if self._closed or session.closed:
                raise ClosedError(f"this {type(self).__name__} is closed" if self._closed
                                  else f"this {type(session).__name__} is closed")
            if replace:
                self._use(replace)
            with session.device.active():  # (a closed array's address is 0: Call.run refuses it)
                self._call.run(self._values, session.workspace, session.stream, session.clock)
                if self.sync:
                    session.clock.sync()
            result = self._values[self._result] if self._result is not None else None  # (the arrays it ran on)
        return result

    def _use(self, replace: Sequence[tuple[int, Any]]) -> None:
        values = list(self._values)
        for pos, arr in replace:  # (None: kept)
            if arr is None:
                continue
            param = self.op.schema[pos].name
            self.session.own_array(arr, param, self.op.phase1_name)
            old = values[pos]
            values[pos] = arr
            self._check_distinct(values)
            if arr.arg[:5] != old.arg[:5]:  # (the storage may differ: phase 2 reads only the address)
                want, got = old.arg, arr.arg
                raise AclnnParamError(
                    161002, self.op.phase1_name,
                    f"{param}: a prepared call takes arrays like the one it was prepared with: shape "
                    f"{want.shape} dtype {want.dtype} layout {old.layout} strides {want.strides} offset "
                    f"{want.offset}; got shape {got.shape} dtype {got.dtype} layout {arr.layout} strides "
                    f"{got.strides} offset {got.offset}")
        self._values = values

    def close(self) -> None:
        """Release the executor and descriptors (after the stream finished with them).  Idempotent; a refused
        release is retried by the next close() (or the session's)."""
        session = self.session
        with session._lock:
            self._closed = True
            if not self._call.closed and releases_allowed():
                with session.device.active():
                    if session.clock.pending and not session.stream.closed:
                        session._sync()  # (fails: nothing was released; queued work may still use it)
                    self._call.close()
            session._prepared.discard(self)

    def __enter__(self) -> PreparedCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "plan" if self.plan else "one-shot"
        arrays = " ".join(f"{a.name}={tuple(v)}" for a, v in zip(self.op.schema, self._values)
                          if a.kind is ArgKind.INT_ARRAY)
        return f"<{type(self).__name__} {mode} {arrays} {'closed' if self.closed else 'open'}>"
