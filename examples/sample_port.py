"""A Python port of the official C++ sample of aclnnUpsampleNearestExact3dBackward.

The ops-cv sample ``examples/test_aclnn_upsample_nearest_exact3d_grad.cpp`` (cann-abi.md
§5.6, call sequence §7) takes these steps; this script takes the same ones, through the
``acl_bindings`` objects and the faithful two-phase API of ``upsample3d_grad.op``:

1. ``aclInit``, ``aclrtSetDevice``, ``aclrtCreateStream``;
2. ``aclrtMalloc`` (HUGE_FIRST) and ``aclrtMemcpy`` host-to-device of the input;
3. ``aclCreateTensor`` (contiguous strides, offset 0, NCDHW, storage dims = view dims)
   and ``aclCreateIntArray`` for outputSize and inputSize;
4. phase 1 (``...GetWorkspaceSize``), the workspace (allocated only if its size is > 0),
   phase 2 on the stream;
5. ``aclrtSynchronizeStream``, ``aclrtMemcpy`` device-to-host, print ``result[i]``;
6. release everything: tensors and int arrays, device memory, the stream, the device,
   then ACL itself (``aclFinalizeReference`` where the runtime exports it, else ``aclFinalize``).

Unlike the C++ sample (which never destroys its two aclIntArrays), it leaks nothing:
every handle is owned by a context manager in an ``ExitStack`` and released in reverse
order.  It prints the four results and checks them against the expected
``[36, 100, 164, 228]`` (the sum of each block of 8 inputs); the exit code is 1 if
they differ.

Runs unchanged on an NPU (real CANN) and on the CPU simulator::

    python examples/sample_port.py
    ACL_BINDINGS_BACKEND=sim python examples/sample_port.py
"""

from __future__ import annotations

import sys
from contextlib import ExitStack

import numpy as np

import acl_bindings as acl
from upsample3d_grad import op as aclnn

DEVICE_ID = 0
GRAD_OUT_SHAPE = [2, 2, 2, 2, 2]
GRAD_IN_SHAPE = [2, 2, 1, 1, 1]
OUTPUT_SIZE = [2, 2, 2]  # gradOut's (D, H, W)
INPUT_SIZE = [2, 2, 1, 1, 1]  # gradInput's (N, C, D, H, W)
SCALES = (0.0, 0.0, 0.0)  # scalesD, scalesH, scalesW: 0 = not given, sizes decide
EXPECTED = [36.0, 100.0, 164.0, 228.0]


def main() -> int:
    """Run the sample; return 0 when the result is the expected one."""
    backend = acl.load_backend()
    label = "the CPU simulator (no NPU is used)" if backend.is_simulator else "real CANN"
    print(f"sample_port: backend {backend.kind} - {label}")

    grad_out_host = np.arange(1, 33, dtype=np.float32).reshape(GRAD_OUT_SHAPE)  # 1..32
    grad_in_host = np.zeros(GRAD_IN_SHAPE, dtype=np.float32)
    result = np.empty(GRAD_IN_SHAPE, dtype=np.float32)

    with ExitStack() as stack:
        # 1. init ACL, set the device, create a stream
        acl.ensure_initialized()  # aclInit(NULL)
        stack.callback(acl.finalize)  # aclFinalizeReference (or aclFinalize), the very last release
        device = stack.enter_context(acl.Device(DEVICE_ID))  # aclrtSetDevice / aclrtResetDevice
        stream = stack.enter_context(acl.Stream(device))  # aclrtCreateStream / aclrtDestroyStream

        # 2. device memory, and copy the input to the device
        grad_out_mem = stack.enter_context(acl.DeviceBuffer(device, grad_out_host.nbytes))  # aclrtMalloc
        grad_out_mem.upload(grad_out_host)  # aclrtMemcpy(..., ACL_MEMCPY_HOST_TO_DEVICE)
        grad_in_mem = stack.enter_context(acl.DeviceBuffer(device, grad_in_host.nbytes))
        grad_in_mem.upload(grad_in_host)

        # 3. the aclTensors and aclIntArrays
        # (storage dims = view dims, as the sample: right for a contiguous view at offset 0 of an exact buffer)
        grad_out = stack.enter_context(acl.Tensor(GRAD_OUT_SHAPE, np.float32, grad_out_mem, format=acl.Format.NCDHW,
                                                  storage_dims=GRAD_OUT_SHAPE))  # aclCreateTensor
        grad_in = stack.enter_context(acl.Tensor(GRAD_IN_SHAPE, np.float32, grad_in_mem, format=acl.Format.NCDHW,
                                                 storage_dims=GRAD_IN_SHAPE))
        output_size = stack.enter_context(acl.IntArray(OUTPUT_SIZE))  # aclCreateIntArray
        input_size = stack.enter_context(acl.IntArray(INPUT_SIZE))

        # 4. phase 1, the workspace, phase 2
        workspace_size, executor = aclnn.aclnnUpsampleNearestExact3dBackwardGetWorkspaceSize(
            grad_out, output_size, input_size, *SCALES, grad_in)
        stack.callback(executor.close)  # destroys the executor only if phase 2 never consumed it
        workspace_addr = None
        if workspace_size > 0:
            workspace = stack.enter_context(acl.DeviceBuffer(device, workspace_size))
            workspace_addr = workspace.ptr
        print(f"phase 1: workspace size {workspace_size} bytes")
        aclnn.aclnnUpsampleNearestExact3dBackward(workspace_addr, workspace_size, executor, stream)

        # 5. wait for the stream, copy the result back, print it
        stream.synchronize()  # aclrtSynchronizeStream
        grad_in_mem.download(result)  # aclrtMemcpy(..., ACL_MEMCPY_DEVICE_TO_HOST)
        for i, value in enumerate(result.ravel()):
            print(f"result[{i}] = {value:f}")

    # 6. leaving the ExitStack released, in reverse order: the executor (if unused), the
    #    workspace, the int arrays and tensors, the device memory, the stream, the device
    #    (aclrtResetDevice) and finally ACL itself (aclFinalizeReference, or aclFinalize).
    values = result.ravel().tolist()
    if values != EXPECTED:
        print(f"WRONG: expected {EXPECTED}, got {values}")
        return 1
    print(f"OK: the result is the expected {[int(v) for v in EXPECTED]}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except acl.AclError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
