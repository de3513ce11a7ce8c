"""Why a shared library failed to load, in words, from ``dlopen``'s message and the file's ELF header (how, and the
usual remedy: docs/design.md, "Finding and loading the libraries")."""

from __future__ import annotations

import os
import re
import sys

__all__ = ["explain", "missing_dependency", "elf_mismatch", "DEPENDENCY_HINT"]

DEPENDENCY_HINT = ("dependencies are found through LD_LIBRARY_PATH as it was when the process started: source "
                   "CANN's set_env.sh before starting Python (setting ASCEND_HOME_PATH or os.environ inside "
                   "Python does not reach them)")

_CANNOT_OPEN = re.compile(r"^(?P<name>.+?): cannot open shared object file: (?P<why>.*)$")
_UNDEFINED = re.compile(r"undefined symbol: (?P<symbol>\S+)")

# e_machine values of the ELF specification (the System V gABI), for the architectures CANN ships
_MACHINES = {0x03: "x86", 0x28: "arm", 0x3E: "x86_64", 0xB7: "aarch64", 0xF3: "riscv"}


def missing_dependency(path: str, message: str) -> str | None:
    """The library that *path* needs and that could not be found, from ``dlopen``'s *message*, else None."""
    match = _CANNOT_OPEN.match(message.strip().splitlines()[0] if message.strip() else "")
    if match is None:
        return None
    name = match.group("name")
    if os.path.abspath(name) == os.path.abspath(path) or name == os.path.basename(path):
        return None  # the library asked for is the one that failed
    return name


def _header(path: str) -> tuple[int, int, int] | None:
    """``(class, data, machine)`` of an ELF file (class 1: 32-bit, 2: 64-bit), or None when it is not one."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    return head[4], head[5], machine


def elf_mismatch(path: str) -> str | None:
    """Why *path* is not a library for this process (not ELF, other class or architecture), else None."""
    mine = _header(sys.executable) or _header("/proc/self/exe")
    theirs = _header(path)
    if theirs is None:
        return "not a shared library (no ELF header: the file is truncated, corrupt or not a library)"
    if mine is None:
        return None
    bits = {1: "32-bit", 2: "64-bit"}
    if theirs[0] != mine[0]:
        return f"built as a {bits.get(theirs[0], '?')} library, but this Python is {bits.get(mine[0], '?')}"
    if theirs[2] != mine[2] or theirs[1] != mine[1]:
        return (f"built for another architecture ({_MACHINES.get(theirs[2], f'machine {theirs[2]:#x}')}), but "
                f"this machine is {_MACHINES.get(mine[2], f'machine {mine[2]:#x}')}")
    return None


def explain(path: str, message: str) -> str:
    """One line saying why *path* did not load, naming a missing dependency; ``dlopen``'s text at the end."""
    raw = " ".join(message.split())
    dep = missing_dependency(path, message)
    if dep is not None:
        return f"it needs {dep}, which was not found ({DEPENDENCY_HINT}) [dlopen: {raw}]"
    if os.path.isfile(path):
        mismatch = elf_mismatch(path)
        if mismatch is not None:
            return f"{mismatch} [dlopen: {raw}]"
    undefined = _UNDEFINED.search(message)
    if undefined is not None:
        return (f"a symbol it needs, {undefined.group('symbol')}, is missing from the libraries it loaded "
                f"(libraries of different CANN versions mixed, or a dependency found in another install) "
                f"[dlopen: {raw}]")
    return raw
