"""A short tour of the Session API of upsample3d_grad.

A :class:`upsample3d_grad.Session` owns a device, a stream and a reusable workspace.
``Session.backward`` takes numpy in and gives numpy out, or works on device arrays
that stay on the device between calls.  Every result is checked here against the
numpy reference (``upsample3d_grad.reference``, the CANN window law in float32);
the exit code is 1 if one differs.

Runs unchanged on an NPU and on the CPU simulator::

    python examples/session_api.py
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from upsample3d_grad import AclnnParamError, Session, reference

# the NPU may sum in another order: float32 within 1e-5 relative, float16 / bfloat16 within one rounding
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2.0 ** -10, np.dtype(ml_dtypes.bfloat16): 2.0 ** -7}


def check(label: str, got: object, want: np.ndarray) -> bool:
    """Print one line; True when *got* matches *want* within the summation-order tolerance."""
    assert isinstance(got, np.ndarray)  # numpy in, numpy out
    ok = got.shape == want.shape and got.dtype == want.dtype and np.allclose(
        got.astype(np.float32), want.astype(np.float32), rtol=RTOL[want.dtype], atol=1e-4)
    print(f"  {'ok  ' if ok else 'FAIL'} {label}: gradInput {got.shape} {got.dtype}")
    return ok


def main() -> int:
    """Run the tour; return 0 when every result matches the reference."""
    rng = np.random.default_rng(7)
    ok = True
    with Session(0) as s:
        print(f"session_api: {s!r}")  # the repr names the backend: CANN or the simulator

        # 1. numpy in, numpy out: upsampling (1,2,2,3,4) -> (1,2,4,6,8) sized by output_size alone
        g = rng.standard_normal((1, 2, 4, 6, 8)).astype(np.float32)
        got = s.backward(g, output_size=(4, 6, 8), input_size=(1, 2, 2, 3, 4))
        ok &= check("sizes only", got, reference.upsample_nearest_exact3d_backward(g, (4, 6, 8), (1, 2, 2, 3, 4)))

        # 2. forward scale factors: CANN uses them only when all three are > 0
        g = rng.standard_normal((1, 2, 4, 8, 12)).astype(np.float32)
        got = s.backward(g, (4, 8, 12), (1, 2, 2, 4, 8), 2.0, 2.0, 1.5)
        want = reference.upsample_nearest_exact3d_backward(g, (4, 8, 12), (1, 2, 2, 4, 8), 2.0, 2.0, 1.5)
        ok &= check("scales (2, 2, 1.5)", got, want)

        # 3. channels-last: NDHWC arrays hold physical [N, D, H, W, C]; input_size stays (N, C, D, H, W)
        g = rng.standard_normal((1, 4, 6, 8, 3)).astype(np.float16)
        got = s.backward(g, (4, 6, 8), (1, 3, 2, 3, 4), layout="NDHWC")
        ok &= check("NDHWC float16", got,
                    reference.upsample_nearest_exact3d_backward(g, (4, 6, 8), (1, 3, 2, 3, 4), layout="NDHWC"))

        # 4. strided views go up as they are (their strides become the aclTensor's), bfloat16 too
        big = rng.standard_normal((1, 2, 4, 6, 16)).astype(ml_dtypes.bfloat16)
        view = big[..., ::2]  # every other W element: not contiguous
        got = s.backward(view, (4, 6, 8), (1, 2, 2, 3, 4))
        ok &= check("strided bfloat16 view", got,
                    reference.upsample_nearest_exact3d_backward(view, (4, 6, 8), (1, 2, 2, 3, 4)))

        # 5. device arrays: upload once, run many times into a preallocated result, download once
        g = rng.standard_normal((2, 3, 9, 9, 9)).astype(np.float32)
        go = s.upload(g)
        gi = s.empty((2, 3, 3, 3, 3), np.float32)
        for _ in range(3):
            s.backward(go, (9, 9, 9), (2, 3, 3, 3, 3), out=gi)  # queued on the session's stream, no sync
        got = gi.download()  # synchronises the stream, then copies
        print(f"  workspace of the last call: {s.last_workspace_size} bytes")
        ok &= check("device arrays, downsampled x3", got,
                    reference.upsample_nearest_exact3d_backward(g, (9, 9, 9), (2, 3, 3, 3, 3)))
        go.close()
        gi.close()

        # 6. errors speak CANN's codes: 161002 (ACLNN_ERR_PARAM_INVALID), before any device call
        try:
            s.backward(np.zeros((1, 2, 4, 6, 8), np.float32), (4, 6, 9), (1, 2, 2, 3, 4))  # W: 8 != 9
        except AclnnParamError as exc:  # also a ValueError
            print(f"  ok   rejected as CANN would: code {exc.code} from {exc.func}")
            print(f"       {exc.detail}")
        else:
            print("  FAIL a shape mismatch was not rejected")
            ok = False
    print("all results match the reference" if ok else "SOME RESULTS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
