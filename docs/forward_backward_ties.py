#!/usr/bin/env python3
"""Where CANN's nearest-exact 3-D forward and backward disagree, in a float32 emulation.

A checked example for docs/cann-forward-facts.md (section 6). It needs numpy only; with ``--torch`` it also
cross-checks the forward law against torch CPU, when torch is importable.

Per dimension (I = input size, O = output size):

- forward ``aclnnUpsampleNearestExact3d`` maps output index o to input index
  ``f(o) = min(floor(f32(f32(o + 0.5) * r)), I - 1)``, where ``r`` is a float32 "input/output" ratio:
  ``f32(I) / f32(O)`` without scales; with all three scales > 0 it is ``f32(1.0 / scale)`` (reciprocal in double,
  Atlas A2/A3) or ``1.0f / f32(scale)`` (reciprocal in float, Ascend950, which also takes each dim's scale on its own).
- backward ``aclnnUpsampleNearestExact3dBackward`` sums gradOut over ``[lo(i), lo(i + 1))`` with
  ``lo(i) = min(ceil(f32(f32(i) * s) - 0.5), O)`` and ``s = f32(O) / f32(I)`` or ``f32(scale)`` (all three > 0).
  So it implies a map ``b(o)`` = the i whose window holds o (none when o >= lo(I)).

With F the forward and B the backward, ``<F(x), g> - <x, B(g)> = sum over o in M of g[o] * (x[f(o)] - x[b(o)])``,
M the set of o with ``f(o) != b(o)`` (``x[b(o)] = 0`` when o is in no window). In 3-D the maps are separable and M
is the set of (od, oh, ow) where at least one dim disagrees.

Run: ``python docs/forward_backward_ties.py`` (examples, about a second); add ``--torch`` for the torch CPU
cross-check (about a minute) and ``--sweep`` for all 1 <= I, O <= 300 with O <= 50 I (a few minutes).
"""

from __future__ import annotations

import sys

import numpy as np

F32 = np.float32


def forward_ratio(in_size: int, out_size: int, scale: float | None, soc: str = "a2") -> np.float32:
    """The float32 ratio r of the forward kernel for one dim (``scale`` None or <= 0: no user scale)."""
    if scale is not None and scale > 0:
        if soc == "950":
            return F32(1.0) / F32(scale)  # host narrows to float, tiling divides in float
        return F32(1.0 / scale)  # host divides in double, then narrows
    return F32(in_size) / F32(out_size)


def forward_map(in_size: int, out_size: int, r: np.float32) -> np.ndarray:
    """f(o) for o in [0, O): add 0.5, multiply by r (two float32 roundings), floor, clamp to I - 1."""
    o = np.arange(out_size, dtype=F32)
    p = (o + F32(0.5)) * r  # float32 throughout: the add is exact for o < 2**23, the multiply rounds once
    return np.minimum(np.floor(p), F32(in_size - 1)).astype(np.int64)


def backward_lo(in_size: int, out_size: int, s: np.float32) -> np.ndarray:
    """lo(i) for i in [0, I]: the Atlas A2/A3 (unfused) window starts of the backward kernel."""
    i = np.arange(in_size + 1, dtype=F32)
    p = i * s  # Muls: one float32 rounding
    q = p - F32(0.5)  # Adds(-0.5): a second float32 rounding
    return np.minimum(np.maximum(np.ceil(q), F32(0)), F32(out_size)).astype(np.int64)


def backward_map(in_size: int, out_size: int, s: np.float32) -> np.ndarray:
    """b(o) for o in [0, O): the input index whose backward window holds o, or -1 when none does."""
    lo = backward_lo(in_size, out_size, s)
    b = np.full(out_size, -1, dtype=np.int64)
    for i in range(in_size):
        b[lo[i]:lo[i + 1]] = i
    return b


def backward_scale(in_size: int, out_size: int, scale: float | None) -> np.float32:
    """The float32 s of the backward kernel for one dim (the all-or-none choice is the caller's)."""
    if scale is not None and scale > 0:
        return F32(scale)
    return F32(out_size) / F32(in_size)


def mismatch_set(in_size: int, out_size: int, fwd_scale: float | None, bwd_scale: float | None,
                 soc: str = "a2") -> list[tuple[int, int, int]]:
    """[(o, f(o), b(o))] where the forward map and the backward window disagree for one dim."""
    f = forward_map(in_size, out_size, forward_ratio(in_size, out_size, fwd_scale, soc))
    b = backward_map(in_size, out_size, backward_scale(in_size, out_size, bwd_scale))
    return [(int(o), int(f[o]), int(b[o])) for o in np.nonzero(f != b)[0]]


def exact_owner(in_size: int, out_size: int, o: int) -> int:
    """The exact-arithmetic input index of o with size-derived scales: floor((2o + 1) I / 2O), clamped."""
    return min((2 * o + 1) * in_size // (2 * out_size), in_size - 1)


def forward3d(x: np.ndarray, maps: list[np.ndarray]) -> np.ndarray:
    """F(x) for NCDHW x: a pure gather, so exact in any dtype."""
    return x[:, :, maps[0]][:, :, :, maps[1]][:, :, :, :, maps[2]]


def backward3d(g: np.ndarray, los: list[np.ndarray]) -> np.ndarray:
    """B(g) for NCDHW g: window sums per dim, accumulated in float64 here (the device sums in float32)."""
    out = g.astype(np.float64)
    for axis, lo in zip((2, 3, 4), los):
        parts = [np.sum(np.take(out, range(lo[i], lo[i + 1]), axis=axis), axis=axis, keepdims=True)
                 for i in range(len(lo) - 1)]
        out = np.concatenate(parts, axis=axis)
    return out


def predicted_residual(x: np.ndarray, g: np.ndarray, fmaps: list[np.ndarray], bmaps: list[np.ndarray]) -> float:
    """sum over the 3-D mismatch set of g[o] * (x[f(o)] - x[b(o)]), in float64 (x[b(o)] = 0 if b(o) is -1)."""
    od, oh, ow = np.meshgrid(*(np.arange(len(m)) for m in fmaps), indexing="ij")
    agree = (fmaps[0][od] == bmaps[0][od]) & (fmaps[1][oh] == bmaps[1][oh]) & (fmaps[2][ow] == bmaps[2][ow])
    sel = ~agree
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    xf = x64[:, :, fmaps[0][od[sel]], fmaps[1][oh[sel]], fmaps[2][ow[sel]]]
    inside = (bmaps[0][od[sel]] >= 0) & (bmaps[1][oh[sel]] >= 0) & (bmaps[2][ow[sel]] >= 0)
    xb = x64[:, :, bmaps[0][od[sel]], bmaps[1][oh[sel]], bmaps[2][ow[sel]]] * inside
    return float(np.sum(g64[:, :, od[sel], oh[sel], ow[sel]] * (xf - xb)))


def adjoint_example(in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int],
                    scales: tuple[float, float, float] | None = None) -> None:
    """Random x, g: <F(x), g> - <x, B(g)> against the prediction from the two index maps (A2/A3 laws).

    ``scales`` (all three > 0, or None) go to both operators, as the all-or-none rule of both requires.
    """
    sc: tuple[float | None, ...] = scales if scales is not None else (None, None, None)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2) + in_dhw).astype(F32)
    g = rng.standard_normal((1, 2) + out_dhw).astype(F32)
    fmaps = [forward_map(i, o, forward_ratio(i, o, k)) for i, o, k in zip(in_dhw, out_dhw, sc)]
    s = [backward_scale(i, o, k) for i, o, k in zip(in_dhw, out_dhw, sc)]
    los = [backward_lo(i, o, sk) for i, o, sk in zip(in_dhw, out_dhw, s)]
    bmaps = [backward_map(i, o, sk) for i, o, sk in zip(in_dhw, out_dhw, s)]
    lhs = float(np.sum(forward3d(x, fmaps).astype(np.float64) * g))
    rhs = float(np.sum(x.astype(np.float64) * backward3d(g, los)))
    pred = predicted_residual(x, g, fmaps, bmaps)
    per_dim = [[int(o) for o in np.nonzero(f != b)[0]] for f, b in zip(fmaps, bmaps)]
    n_agree = np.prod([len(f) - len(m) for f, m in zip(fmaps, per_dim)])
    print(f"  3-D in {in_dhw} -> out {out_dhw}, scales {scales}: mismatch sets per dim (D, H, W) {per_dim}, "
          f"|M| = {np.prod(out_dhw) - n_agree} of {np.prod(out_dhw)}")
    print(f"    <F(x),g> - <x,B(g)> = {lhs - rhs:+.12f}, predicted {pred:+.12f}, "
          f"|difference| = {abs(lhs - rhs - pred):.2e}")
    assert abs(lhs - rhs - pred) <= 1e-9 * (1.0 + np.sum(np.abs(g))), "prediction failed"


def torch_cpu_forward_map(in_size: int, out_size: int) -> np.ndarray:
    """torch CPU's forward index as measured on an FMA-capable x86-64 build (see the cross-check).

    The CPU forward computes ``scale * (o + 0.5) - 0.5`` in float (here contracted to one fused multiply-add,
    one rounding), clamps it at 0, adds 0.5 and floors. Not the law of torch CPU's backward nor of CANN.
    """
    r = np.float64(F32(in_size) / F32(out_size))
    a = np.arange(out_size, dtype=np.float64) + 0.5
    t = np.maximum((r * a - 0.5).astype(F32), F32(0))  # r * a - 0.5 is exact in float64 here: one rounding
    u = (t.astype(np.float64) + 0.5).astype(F32)
    return np.minimum(np.floor(u), F32(in_size - 1)).astype(np.int64)


def torch_cross_check() -> None:
    """If torch is importable: the CANN forward law against torch CPU's backward and forward maps (1-D, sizes)."""
    try:
        import torch
        import torch.nn.functional as tf
    except ImportError:
        print("  torch not importable: cross-check skipped")
        return
    bwd_diff = fwd_diff = fused_diff = total = 0
    for i in range(1, 65):
        x = torch.arange(i, dtype=torch.float32).reshape(1, 1, i)
        for o in range(1, 257):
            law = forward_map(i, o, forward_ratio(i, o, None))
            fwd = tf.interpolate(x, size=o, mode="nearest-exact").reshape(-1).numpy().astype(np.int64)
            xg = torch.zeros((o, 1, i), requires_grad=True)  # batch k carries a one-hot gradOut at o = k
            y = tf.interpolate(xg, size=o, mode="nearest-exact")
            g = torch.zeros_like(y)
            g[torch.arange(o), 0, torch.arange(o)] = 1
            y.backward(g)
            assert xg.grad is not None
            bwd = xg.grad[:, 0, :].argmax(dim=1).numpy().astype(np.int64)
            total += o
            bwd_diff += int(np.sum(bwd != law))
            fwd_diff += int(np.sum(fwd != law))
            fused_diff += int(np.sum(fwd != torch_cpu_forward_map(i, o)))
    print(f"  torch {torch.__version__}, 1 <= I <= 64, 1 <= O <= 256, {total} output indices:")
    print(f"    torch CPU backward scatter map vs the CANN forward law: {bwd_diff} differ")
    print(f"    torch CPU forward vs the CANN forward law: {fwd_diff} differ (ties; build dependent)")
    print(f"    torch CPU forward vs its fused-multiply-add emulation: {fused_diff} differ")
    assert bwd_diff == 0


def sweep(max_size: int = 300) -> None:
    """Count the forward/backward mismatches for all I, O in 1..max_size with O <= 50 I (size-derived scales)."""
    pairs = hit_pairs = total = at_ties = outputs = 0
    for i in range(1, max_size + 1):
        for o in range(1, min(max_size, 50 * i) + 1):
            pairs += 1
            outputs += o
            mm = mismatch_set(i, o, None, None)
            if mm:
                hit_pairs += 1
                total += len(mm)
                at_ties += sum(1 for (oo, _, _) in mm if ((2 * oo + 1) * i) % (2 * o) == 0)
    print(f"  sweep 1..{max_size}: {hit_pairs} of {pairs} (I,O) pairs have a mismatch; {total} of {outputs} "
          f"output indices; {at_ties} of them exact ties")


def main() -> int:
    print("1-D mismatch sets [(o, forward f(o), backward b(o))], Atlas A2/A3 laws:")
    for (i, o, fs, bs, note, expected) in [
        (2, 41, None, None, "sizes only: the tie o=20, (20.5) * 2/41 = 1", [(20, 0, 1)]),
        (27, 8, 0.3, 0.3, "scale 0.3 on both: the tie o=7, 7.5 / 0.3 = 25", [(7, 25, 24)]),
        (3, 7, None, None, "sizes only, no tie", []),
        (5, 2, None, None, "downsample, no tie", []),
    ]:
        mm = mismatch_set(i, o, fs, bs)
        print(f"  I={i:3d} O={o:3d} ({note}): {mm}")
        assert mm == expected
    print("Forward ratio r with a user scale: Ascend950 1.0f / f32(scale) against A2/A3 f32(1.0 / scale):")
    for scale in (0.3, 1.1, 2.2):
        r_a2, r_950 = forward_ratio(1, 1, scale, "a2"), forward_ratio(1, 1, scale, "950")
        print(f"  scale {scale}: A2/A3 {r_a2.view(np.uint32):#010x}, 950 {r_950.view(np.uint32):#010x}"
              f"{'  (differ)' if r_a2 != r_950 else ''}")
    f_a2 = forward_map(16, 17, forward_ratio(16, 17, 1.1, "a2"))
    f_950 = forward_map(16, 17, forward_ratio(16, 17, 1.1, "950"))
    print(f"  I=16 O=17 scale 1.1, o=16 (16.5 / 1.1 = 15): A2/A3 f(o) = {f_a2[16]}, 950 f(o) = {f_950[16]}")
    assert (f_a2[16], f_950[16]) == (15, 14)
    print("Adjoint identity with the predicted residual:")
    adjoint_example((2, 3, 2), (41, 7, 5))
    adjoint_example((27, 4, 2), (8, 9, 3), (0.3, 2.25, 1.5))
    adjoint_example((3, 4, 5), (7, 9, 11))
    if "--torch" in sys.argv[1:]:
        print("Cross-check:")
        torch_cross_check()
    if "--sweep" in sys.argv[1:]:
        sweep()
    return 0


if __name__ == "__main__":
    sys.exit(main())
