"""A torch_npu training step around nearest-exact 3-D upsampling, checked against torch on the CPU.

The model is one learnable per-channel weight ``w`` of shape ``[1, C, 1, 1, 1]``: ``y = upsample(x * w)``, x2
in every dim with mode "nearest-exact".  Each step runs two micro-batches (their gradients accumulate in
``w.grad``), then the optimiser; ``loss.item()`` reads each loss back.  The same steps run on the CPU with torch's
own ``F.interpolate``, and the losses and the final ``w`` must agree.

``--op package`` (the default) upsamples with this package's operators, wrapped in a ``torch.autograd.Function``
(:func:`upsample3d_grad.functional.forward_torch` and :func:`~upsample3d_grad.functional.backward_torch` on the NPU
tensors, on torch_npu's current stream); ``--op torch`` with ``F.interpolate``, which torch_npu runs through its
own binding of the same aclnn operators.  The losses are ``F.mse_loss`` and the hand-written
``((y - t) ** 2).mean()``; the optimisers ``SGD`` with its default foreach implementation, with
``foreach=False``, and with momentum.

Runs unchanged on an NPU, or without one on the simulator with the published torch_npu
(``pip install -e ".[torch-npu-sim]"``)::

    eval "$(python -m acl_bindings.sim env)"
    python examples/torch_npu_train_step.py            # every combination, float32 and float16
    python examples/torch_npu_train_step.py --op torch --loss mse --optim sgd --dtype float32

What the simulator runs and what it refuses: docs/api.md, "torch_npu on the simulator".
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
import torch_npu  # noqa: F401  (registers the "npu" device with torch)

from upsample3d_grad.functional import backward_torch, forward_torch

BATCH, CHANNELS, SIZE = 2, 3, (2, 3, 4)  # x: [N, C, D, H, W]
OUT_SIZE = tuple(2 * s for s in SIZE)  # y: x2 in every dim
LOSSES = ("mse", "manual")
OPTIMS = ("sgd", "sgd-loop", "sgd-momentum")
OPS = ("package", "torch")
#: Per dtype, the tolerance of the comparison with the CPU (float16: the device and the CPU round differently)
TOLERANCE = {"float32": 1e-5, "float16": 2e-2}


class NearestExact3d(torch.autograd.Function):
    """``F.interpolate(x, size, mode="nearest-exact")`` on this package's forward and backward operators."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, size: tuple[int, int, int]) -> torch.Tensor:
        ctx.sizes = (size, tuple(x.shape))
        return forward_torch(x, size)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        size, input_size = ctx.sizes
        return backward_torch(grad, size, input_size), None


def upsample(op: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The x2 nearest-exact upsampling of *op*: "package" (this package's operators) or "torch"."""
    if op == "package":
        return lambda x: NearestExact3d.apply(x, OUT_SIZE)
    return lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact")


def make_optimizer(name: str, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    """SGD as *name* says: "sgd" (torch's default, foreach), "sgd-loop" (foreach=False), "sgd-momentum"."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1)
    if name == "sgd-loop":
        return torch.optim.SGD(params, lr=0.1, foreach=False)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def data(dtype: torch.dtype) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """Two micro-batches of inputs and targets, and w's start value: the same for every run."""
    gen = torch.Generator().manual_seed(38)
    xs = [torch.randn(BATCH, CHANNELS, *SIZE, generator=gen).to(dtype) for _ in range(2)]
    ts = [torch.randn(BATCH, CHANNELS, *OUT_SIZE, generator=gen).to(dtype) for _ in range(2)]
    w0 = (1 + 0.1 * torch.randn(1, CHANNELS, 1, 1, 1, generator=gen)).to(dtype)
    return xs, ts, w0


def train(device: str, interp: Callable[[torch.Tensor], torch.Tensor], loss_name: str, optim: str,
          dtype: torch.dtype, steps: int) -> tuple[list[float], torch.Tensor]:
    """*steps* training steps on *device*; the mean loss of each step and w after the last, on the CPU."""
    xs, ts, w0 = data(dtype)
    xs, ts = [x.to(device) for x in xs], [t.to(device) for t in ts]
    w = torch.nn.Parameter(w0.to(device))
    opt = make_optimizer(optim, [w])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        for x, t in zip(xs, ts):  # two micro-batches: backward() accumulates into w.grad
            y = interp(x * w)
            loss = F.mse_loss(y, t) if loss_name == "mse" else ((y - t) ** 2).mean()
            loss.backward()
            total += loss.item()
        opt.step()
        losses.append(total / len(xs))
    return losses, w.detach().cpu()


def compare(op: str, loss_name: str, optim: str, dtype_name: str, steps: int) -> float:
    """One combination on the NPU and on the CPU; the largest relative difference of the losses and of w."""
    dtype = getattr(torch, dtype_name)
    got, w = train("npu", upsample(op), loss_name, optim, dtype, steps)
    want, w_cpu = train("cpu", upsample("torch"), loss_name, optim, dtype, steps)
    diffs = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got, want)]
    diffs += ((w.float() - w_cpu.float()).abs() / w_cpu.float().abs().clamp_min(1e-6)).flatten().tolist()
    return max(diffs)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the combinations asked for; 0 when every one agrees with the CPU."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=OPS, action="append", help="upsampling (default: both)")
    parser.add_argument("--loss", choices=LOSSES, action="append", help="loss (default: both)")
    parser.add_argument("--optim", choices=OPTIMS, action="append", help="optimiser (default: all three)")
    parser.add_argument("--dtype", choices=sorted(TOLERANCE), action="append", help="dtype (default: both)")
    parser.add_argument("--steps", type=int, default=10, help="training steps (default 10)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps: at least 1, got {args.steps}")
    if not torch.npu.is_available():
        print("torch_npu_train_step: no NPU (on the simulator: eval \"$(python -m acl_bindings.sim env)\" first)",
              file=sys.stderr)
        return 2
    failed = 0
    for op, loss_name, optim, dtype_name in itertools.product(args.op or OPS, args.loss or LOSSES,
                                                             args.optim or OPTIMS, args.dtype or sorted(TOLERANCE)):
        diff = compare(op, loss_name, optim, dtype_name, args.steps)
        ok = diff <= TOLERANCE[dtype_name]
        failed += not ok
        print(f"{op:8} {loss_name:7} {optim:13} {dtype_name:8} {args.steps} steps: largest relative difference "
              f"from the CPU {diff:.2e} {'ok' if ok else 'MISMATCH'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
