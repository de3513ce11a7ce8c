"""Where the CANN libraries are looked for, in order (docs/design.md, "Finding and loading the libraries"); nothing
is loaded here."""

from __future__ import annotations

import configparser
import logging
import os
import platform
import warnings
from pathlib import Path

from . import _config
from .errors import LoaderWarning

_log = logging.getLogger("acl_bindings")

RUNTIME_NAMES = ("libascendcl.so", "libacl_rt.so")
NNOPBASE_NAME = "libnnopbase.so"
OPAPI_SPLIT = ("libopapi_cv.so", "libopapi_math.so", "libopapi_nn.so", "libopapi_transformer.so",
               "libopapi_oam.so", "libopapi_legacy.so")
OPAPI_LEGACY = "libopapi.so"
CUSTOM_OPAPI = os.path.join("op_api", "lib", "libcust_opapi.so")
BUILTIN_OPAPI_DIR = os.path.join("built-in", "op_impl", "ai_core", "tbe", "op_api", "lib", "linux")
DEFAULT_ROOTS = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")
#: Variables that say a CANN install is meant to be used (their folders count as "CANN present").
INSTALL_VARS = ("ACL_BINDINGS_LIB_DIR", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")


def _arch_dirs(root: str) -> list[str]:
    arch = platform.machine() or "x86_64"
    return [os.path.join(root, "lib64"), os.path.join(root, f"{arch}-linux", "lib64")]


def _absolute(path: str) -> str:
    """*path* made absolute against the current folder, now, once (a later chdir changes nothing)."""
    return os.path.normpath(os.path.abspath(path))


def search_folders() -> list[tuple[str, str]]:
    """The ordered ``(folder, found_via)`` list searched for the runtime and nnopbase (absolute paths)."""
    folders: list[tuple[str, str]] = []
    override = _config.env("ACL_BINDINGS_LIB_DIR")
    if override:
        override = _absolute(override)
        folders += [(override, "ACL_BINDINGS_LIB_DIR"), (os.path.join(override, "lib64"), "ACL_BINDINGS_LIB_DIR")]
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        root = _config.env(var)
        if root:
            folders += [(d, var) for d in _arch_dirs(_absolute(root))]
    entries = (_config.env("LD_LIBRARY_PATH") or "").split(":")
    folders += [(_absolute(entry), "LD_LIBRARY_PATH") for entry in entries if entry]
    for root in DEFAULT_ROOTS:
        folders += [(d, f"default root {root}") for d in _arch_dirs(root)]
    unique: dict[str, tuple[str, str]] = {}  # the first of each folder, in order
    for folder, via in folders:
        unique.setdefault(os.path.normpath(folder), (folder, via))
    return list(unique.values())


def _locate(names: tuple[str, ...], folders: list[tuple[str, str]],
            tried: list[tuple[str, str]] | None) -> list[tuple[str, str, str]]:
    """``(path, name, found_via)`` of every file named *names* in *folders*, in search order (no loading)."""
    out = []
    for folder, via in folders:
        if "stub" in Path(folder).parts:
            if tried is not None:
                tried.append((folder, "skipped: a stub folder holds link-time stubs only"))
            continue
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                out.append((_absolute(path), name, via))
            elif tried is not None:
                tried.append((path, "not found"))
    return out


def _vendor_dirs() -> list[tuple[str, str]]:
    """Custom and vendor ``libcust_opapi.so`` paths (absolute), in lookup order, existing or not."""
    out = [(os.path.join(_absolute(entry), CUSTOM_OPAPI), "ASCEND_CUSTOM_OPP_PATH")
           for entry in (_config.env("ASCEND_CUSTOM_OPP_PATH") or "").split(":") if entry]
    opp = _config.env("ASCEND_OPP_PATH")
    if opp:
        vendors_dir = os.path.join(_absolute(opp), "vendors")
        ini = os.path.join(vendors_dir, "config.ini")
        if os.path.isfile(ini):
            parser = configparser.ConfigParser()
            try:
                with open(ini, encoding="utf-8", errors="replace") as fh:
                    parser.read_string("[top]\n" + fh.read())
                vendors = parser.get("top", "load_priority", fallback="")
            except configparser.Error as exc:
                _log.warning("could not parse %s: %s", ini, exc)
                vendors = ""
            for vendor in (v.strip() for v in vendors.split(",")):
                if not vendor:
                    continue
                if vendor in (".", "..") or "/" in vendor or "\\" in vendor or "\0" in vendor or os.path.isabs(vendor):
                    message = (f"{ini}: load_priority: vendor name {vendor!r} is not a single folder name: it would "
                               "leave the vendors folder; refused (it is not searched)")
                    _log.warning("%s", message)
                    warnings.warn(message, LoaderWarning, stacklevel=2)
                    continue
                out.append((os.path.join(vendors_dir, vendor, CUSTOM_OPAPI), f"{ini} load_priority"))
    return out


def _builtin_opapi() -> list[tuple[str, str]]:
    """The OPP package's built-in ``libopapi.so`` (nnopbase's last entry, cann-abi.md §4.1)."""
    arch = platform.machine() or "x86_64"
    out = []
    home = _config.env("ASCEND_HOME_PATH")
    if home and os.path.isdir(os.path.join(home, "opp_latest")):
        out.append((os.path.join(_absolute(home), "opp_latest"), "ASCEND_HOME_PATH/opp_latest"))
    opp = _config.env("ASCEND_OPP_PATH")
    if opp:
        out.append((_absolute(opp), "ASCEND_OPP_PATH"))
    return [(os.path.join(base, BUILTIN_OPAPI_DIR, arch, OPAPI_LEGACY), f"{via} built-in") for base, via in out]


def op_candidates(runtime_dir: str, folders: list[tuple[str, str]],
                  include_custom: bool = True) -> list[tuple[str, str]]:
    """``(path, found_via)`` of the operator libraries in lookup order; ``libopapi.so`` comes last."""
    out = [(p, via) for p, via in (_vendor_dirs() if include_custom else []) if os.path.isfile(p)]
    dirs = [(runtime_dir, "beside the runtime")] + [(f, v) for f, v in folders
                                                    if os.path.normpath(f) != os.path.normpath(runtime_dir)]
    for name in (*OPAPI_SPLIT, OPAPI_LEGACY):  # the first of each name
        out += [(p, via) for p, _, via in _locate((name,), dirs, None)[:1]]
    if include_custom:
        out += [(_absolute(p), via) for p, via in _builtin_opapi() if os.path.isfile(p)]
    return out


def _orphans(folders: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Where CANN is meant to be but no runtime file is: nnopbase alone, or a named install folder without one."""
    out = []
    for path, name, _ in _locate((NNOPBASE_NAME,), folders, None)[:1]:
        out.append((os.path.dirname(path), f"{name} is there but no runtime ({' or '.join(RUNTIME_NAMES)}) "
                                            "was found in it or in any search folder"))
    for var in INSTALL_VARS:
        value = _config.env(var)
        if value and not out:
            out.append((_absolute(value), f"{var} names it, but no runtime ({' or '.join(RUNTIME_NAMES)}) was "
                                          "found there (lib64, <arch>-linux/lib64)"))
    return out
