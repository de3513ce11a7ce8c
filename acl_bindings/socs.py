"""The SoC facts: which kernel directory CANN's nnopbase searches for a SoC name, which directories an operator has
kernels in, the simulator's own SoC, and the 16 MiB fixed workspace of the upsample tilings.

They are defined once, in ``sim/src/socs.json`` (sources: docs/cann-abi.md §11); the simulator's C gets them from
the header that ``sim/build.py`` writes from that file, and this module reads the file itself, so that the package
knows them on real CANN too, where no simulator library is loaded.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Optional

__all__ = ["SOCS_FILE", "FIXED_WORKSPACE", "SIMULATOR_SOC", "kernel_dir", "product", "operator_kernel_dirs",
           "names_of", "kernel_support"]

SOCS_FILE = Path(__file__).resolve().parent / "sim" / "src" / "socs.json"


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SOCS_FILE.read_text())
    return data


def _table(key: str) -> dict[str, Any]:
    return {k: v for k, v in _data()[key].items() if k != "source"}


#: The fixed part of the Atlas A2/A3 backward tiling's workspace ask, and the Ascend950 tilings' whole ask (bytes)
FIXED_WORKSPACE: int = int(_data()["fixed_workspace_mib"]["value"]) << 20
#: What ``aclrtGetSocName`` answers on the simulator without ``CANN_SIM_SOC`` (an Atlas A2 to the operators)
SIMULATOR_SOC: str = _data()["simulator_soc"]["name"]


def kernel_dir(soc: str, *, simulator: bool = False) -> Optional[str]:
    """The kernel directory nnopbase searches for the SoC name *soc* (``"ascend910b"``), or None when the name is not
    in its SoC table; on the *simulator* its own name is an Atlas A2."""
    name = str(soc).strip()
    if simulator and name == SIMULATOR_SOC:
        return str(_data()["simulator_soc"]["kernel_dir"])
    exact = _table("soc_kernel_dirs")
    if name in exact:
        return str(exact[name])
    for prefix, folder in _table("soc_kernel_dir_prefixes").items():
        if name.startswith(prefix):
            return str(folder)
    return None


def product(folder: str) -> str:
    """The product of a kernel directory (``"ascend910b"`` → ``"Atlas A2"``)."""
    return str(_data()["products"].get(folder, folder))


def operator_kernel_dirs(op_type: str, *, simulator: bool = False) -> tuple[str, ...]:
    """The kernel directories the L0 kernel *op_type* (``"UpsampleNearestExact3dGrad"``) has kernels in; on the
    *simulator*, those of them whose SoC it models."""
    dirs = tuple(_table("operator_kernel_dirs").get(op_type, ()))
    if simulator:
        dirs = tuple(d for d in dirs if d in _data()["simulated_kernel_dirs"]["dirs"])
    return dirs


def names_of(folder: str) -> tuple[str, ...]:
    """The SoC names of nnopbase's table that take the kernel directory *folder* (``"ascend910"``: the legacy
    Ascend910 training series)."""
    return tuple(name for name, d in _table("soc_kernel_dirs").items() if d == folder)


def kernel_support(op_type: str, soc: str, *, simulator: bool = False) -> tuple[Optional[bool], str]:
    """``(has a kernel, note)`` for the L0 kernel *op_type* on the SoC name *soc*, as nnopbase's lookup decides it
    (None: a name outside nnopbase's table on real CANN; the simulator refuses those).  Where there is no kernel,
    phase 1 succeeds and phase 2 fails with 561000 (cann-abi.md §11)."""
    name = str(soc).strip()
    folder = kernel_dir(name, simulator=simulator)
    has = operator_kernel_dirs(op_type)
    where = ", ".join(has)
    fails = "phase 1 succeeds and phase 2 fails with 561000 (no kernel binary)"
    if folder is None:
        why = (f"{name!r} is not in nnopbase's SoC table, so no kernel directory is searched for it "
               f"({op_type} has kernels in: {where})")
        if simulator:
            return False, f"not supported (simulated): {why}; {fails}"
        return None, f"unknown SoC: {why}; the operator is documented for Atlas A2/A3 and Ascend950 only"
    if folder in operator_kernel_dirs(op_type, simulator=simulator):
        if simulator and name == SIMULATOR_SOC:
            return True, "supported (simulated): the CPU simulator follows the Atlas A2/A3 kernel law"
        return True, f"supported{' (simulated)' if simulator else ''}: {product(folder)} ({name}, {folder}/)"
    if folder in has:  # CANN has the kernel; the simulator does not model that SoC
        return False, (f"not supported (simulated): CANN has a {op_type} kernel in {folder}/ ({product(folder)}), "
                       f"which the simulator does not model; {fails}")
    return False, (f"not supported{' (simulated)' if simulator else ''}: {name} is {product(folder)} (kernel "
                   f"directory {folder}/), for which {op_type} has no kernel (it has kernels in: {where}); {fails}")
