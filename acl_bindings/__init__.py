"""ctypes bindings over the CANN runtime, nnopbase and aclnn operator libraries.

Importing loads nothing; the first call chooses a backend (real CANN, or the embedded CPU simulator) and says which.
Where the simulator was not built at install and no CANN is found, importing warns once (SimulatorNotBuiltWarning).
Its layers and modules: docs/design.md, "Inside acl_bindings".
"""

from __future__ import annotations

import logging

from ._lib import MissingSymbolError, lib, recent_error_message
from ._loader import Backend, LibraryInfo, simulator_not_built, warn_if_simulator_not_built
from ._loader import load as load_backend
from ._loader import loaded as loaded_backend
from .enums import DataType, Format, MemAttr, MemcpyKind, MemMallocPolicy, acl_to_dtype, dtype_to_acl
from .errors import (
    AclError,
    AclMemoryError,
    AclnnInnerError,
    AclnnParamError,
    AclParamError,
    AclRuntimeError,
    AclStateError,
    AclTypeError,
    BackendFallbackWarning,
    ClosedError,
    LibraryNotFoundError,
    LoaderWarning,
    ProcessForkedError,
    SimulatorNotBuiltWarning,
    SimulatorUnavailableError,
    TwoRuntimesError,
)
from .memory import DeviceBuffer, HostBuffer, host_span
from .meta import IntArray, Tensor, contiguous_strides
from .op import Executor, TwoPhaseOp, Workspace
from .runtime import (
    Device,
    acl_version,
    cann_version,
    current_context,
    device_count,
    ensure_initialized,
    finalize,
    soc_name,
)
from .streams import Event, Stream

logging.getLogger("acl_bindings").addHandler(logging.NullHandler())
warn_if_simulator_not_built()

__version__ = "0.1.0"

__all__ = [
    "lib", "recent_error_message", "MissingSymbolError", "Backend", "LibraryInfo", "load_backend",
    "loaded_backend", "DataType", "Format", "MemAttr", "MemcpyKind", "MemMallocPolicy", "acl_to_dtype",
    "dtype_to_acl", "AclError", "AclMemoryError", "AclnnInnerError", "AclnnParamError", "AclParamError",
    "AclRuntimeError", "AclStateError", "AclTypeError", "BackendFallbackWarning", "LoaderWarning", "ClosedError",
    "LibraryNotFoundError", "TwoRuntimesError", "ProcessForkedError",
    "SimulatorNotBuiltWarning", "SimulatorUnavailableError", "simulator_not_built", "DeviceBuffer", "HostBuffer",
    "host_span", "IntArray", "Tensor", "contiguous_strides", "Executor", "TwoPhaseOp", "Workspace", "Device", "Event",
    "Stream", "acl_version",
    "cann_version", "current_context", "device_count", "ensure_initialized", "finalize", "soc_name", "__version__",
]
