"""Facts about the machine that need no CANN library (host name, time, versions, the driver's version), so that a
machine where no library loads still gets a report (sources: docs/operators.md, "hostinfo")."""

from __future__ import annotations

import contextlib
import datetime as _dt
import glob
import os
import platform
import shlex
import socket
import string
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import __version__

__all__ = ["INSTALL_INFO", "DEFAULT_DRIVER_ROOT", "utc_now", "hostname", "read_key_values", "driver_version",
           "toolkit_version", "host_facts", "command_line", "RANK_VARIABLES", "rank", "expand_template"]

#: The driver installer's record of where it installed the driver.
INSTALL_INFO = "/etc/ascend_install.info"
#: The driver's default install folder (used when :data:`INSTALL_INFO` names none).
DEFAULT_DRIVER_ROOT = "/usr/local/Ascend"


def utc_now() -> str:
    """The current time, UTC, ISO 8601 with seconds (``2026-12-01T08:39:39Z``)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def hostname() -> str:
    """This machine's host name (``socket.gethostname``), or ``"unknown"``."""
    try:
        return socket.gethostname() or "unknown"
    except OSError:
        return "unknown"


def read_key_values(path: str) -> dict[str, str]:
    """The ``key=value`` lines of a small text file (other lines are ignored); ``OSError`` if it cannot be read."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh.read(65536).splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip():
                out.setdefault(key.strip(), value.strip().strip('"'))
    return out


def driver_version(install_info: str = INSTALL_INFO, default_root: str = DEFAULT_DRIVER_ROOT) -> dict[str, str]:
    """The NPU driver's version from its ``version.info``: ``{"version": ..., "source": <the file>}``, or
    ``"unknown"`` and a ``source`` that says why."""
    root = default_root
    with contextlib.suppress(OSError):  # no install record: the default folder
        root = read_key_values(install_info).get("Driver_Install_Path_Param") or default_root
    path = os.path.join(root, "driver", "version.info")
    try:
        values = read_key_values(path)
    except OSError as exc:
        return {"version": "unknown", "source": f"not read: {path}: {exc.strerror or exc}"}
    version = values.get("Version") or values.get("version")
    if not version:
        return {"version": "unknown", "source": f"not read: {path} has no Version= line"}
    return {"version": version, "source": path}


def toolkit_version(roots: Sequence[str] | None = None) -> dict[str, str] | None:
    """The CANN toolkit's version from its install record under *roots* (default: ``$ASCEND_HOME_PATH`` and
    ``$ASCEND_TOOLKIT_HOME``): ``{"version": ..., "source": <the file>}``, or None."""
    if roots is None:
        roots = [v for v in map(os.environ.get, ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")) if v]
    for root in roots:
        for path in sorted(glob.glob(os.path.join(glob.escape(root), "*-linux", "ascend_toolkit_install.info"))):
            try:
                version = read_key_values(path).get("version")
            except OSError:
                continue
            if version:
                return {"version": version, "source": path}
    return None


def command_line(argv: Sequence[str]) -> str:
    """*argv* as one shell-quoted line."""
    return " ".join(shlex.quote(a) for a in argv)


def host_facts() -> dict[str, Any]:
    """Host name, package, Python and numpy versions, platform and the driver version (no library needed)."""
    drv = driver_version()
    return {
        "hostname": hostname(),
        "package_version": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "driver_version": drv["version"],
        "driver_version_source": drv["source"],
    }


#: Where ``{rank}`` is read from, first set first: Slurm, Open MPI, MPICH/Intel MPI (PMI), PMIx.
RANK_VARIABLES = ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def rank() -> str | None:
    """This process's rank in its job (:data:`RANK_VARIABLES`), or None outside a parallel launcher."""
    return next((v for v in (os.environ.get(name, "").strip() for name in RANK_VARIABLES) if v), None)


def expand_template(path: str, started_utc: str) -> str:
    """*path* with ``{host}``, ``{rank}`` (:func:`rank`) and ``{time}`` (*started_utc* as ``20260102T030405Z``)
    replaced, ``{{``/``}}`` literal; ``ValueError`` for another placeholder, or ``{rank}`` outside a launcher."""
    try:
        fields = [name for _, name, spec, conv in string.Formatter().parse(path) if name is not None]
    except ValueError as exc:
        raise ValueError(f"bad placeholder in {path!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    unknown = sorted({f for f in fields if f not in ("host", "rank", "time")})
    if unknown:
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} in {path!r}: use {{host}}, {{rank}} or {{time}}")
    values = {"host": _safe(hostname()), "time": started_utc.replace("-", "").replace(":", ""), "rank": ""}
    if "rank" in fields:
        found = rank()
        if found is None:
            raise ValueError(f"{{rank}} in {path!r}, but none of {', '.join(RANK_VARIABLES)} is set (not started by "
                             "srun or mpirun? use {host} instead)")
        values["rank"] = _safe(found)
    try:
        return path.format_map(values)
    except (ValueError, IndexError) as exc:  # a format spec such as {host:>x}
        raise ValueError(f"bad placeholder in {path!r}: {exc}") from None


def _safe(text: str) -> str:
    """*text* fit for a file name: anything but letters, digits, ``.``, ``_`` and ``-`` becomes ``_``."""
    return "".join(ch if ch.isalnum() and ch.isascii() or ch in "._-" else "_" for ch in text) or "_"
