"""A small parser of C prototypes, to compare the prototype table with documented declarations.

Types are reduced to keys such as ``int32``, ``uint64``, ``char*``, ``void*``,
``ptr(int64)`` and ``ptr(struct aclTensor)``, both from C text and from ctypes objects.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

ENUMS = {"aclDataType", "aclFormat", "aclrtMemcpyKind", "aclrtMemMallocPolicy", "aclrtMemAttr",
         "aclCANNPackageName", "aclrtRunMode", "aclrtEventRecordedStatus", "aclrtStreamStatus"}
OPAQUE = {"aclTensor", "aclIntArray", "aclOpExecutor", "aclScalar", "aclFloatArray", "aclTensorList",
          "aclBoolArray", "aclScalarList", "aclCANNPackageVersion"}
SCALARS = {
    "aclError": "int32", "aclnnStatus": "int32", "int": "int32", "int32_t": "int32", "uint32_t": "uint32",
    "int64_t": "int64", "uint64_t": "uint64", "size_t": "uint64", "float": "float", "double": "double",
    "aclrtStream": "void*", "aclrtContext": "void*", "aclrtEvent": "void*",
}


def c_type_key(text: str) -> str:
    """Key of a C type such as ``const int64_t *`` or ``aclOpExecutor **``."""
    text = text.replace("const", " ").strip()
    stars = text.count("*")
    base = text.replace("*", " ").split()
    name = base[-1] if base else "void"
    if name == "char" and stars:
        key, stars = "char*", stars - 1
    elif name == "void" and stars:
        key, stars = "void*", stars - 1
    elif name in ENUMS:
        key = "int32"
    elif name in OPAQUE:
        if not stars:
            raise ValueError(f"opaque type by value: {text}")
        key, stars = f"ptr(struct {name})", stars - 1
    elif name in SCALARS:
        key = SCALARS[name]
    else:
        raise ValueError(f"unknown C type {text!r}")
    for _ in range(stars):
        key = f"ptr({key})"
    return key


def ctypes_key(t: Any) -> str:
    """Key of a ctypes type."""
    if t is None:
        return "void"
    if t is ctypes.c_char_p:
        return "char*"
    if t is ctypes.c_void_p:
        return "void*"
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        return f"struct {t.__name__}"
    if hasattr(t, "_type_") and isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return f"ptr({ctypes_key(t._type_)})"
    code = getattr(t, "_type_", None)
    if code in ("f", "d"):
        return {"f": "float", "d": "double"}[code]
    if isinstance(code, str) and code in "bBhHiIlLqQ":
        signed = code.islower()
        return f"{'' if signed else 'u'}int{8 * ctypes.sizeof(t)}"
    raise ValueError(f"unknown ctypes type {t!r}")


_DECL = re.compile(r"^(?P<ret>[\w\s\*]+?)\s*(?P<name>\b\w+)\s*\((?P<args>[^()]*)\)\s*$", re.S)


def parse_declarations(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{name: (return key, (arg keys...))}`` for every C declaration in *text* (comments removed)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"#[^\n]*", " ", text)
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for chunk in text.split(";"):
        chunk = " ".join(chunk.split())
        chunk = re.sub(r"\b(extern|ACL_FUNC_VISIBILITY|ACLNN_API|CANNSIM_API|__attribute__\(\(\w+\(\"\w+\"\)\)\))\b",
                       " ", chunk).strip()
        chunk = chunk.split("{")[-1].split("}")[-1].strip()
        m = _DECL.match(chunk)
        if not m or "typedef" in chunk or "(" in m.group("ret"):
            continue
        try:
            ret = c_type_key(m.group("ret"))
        except ValueError:
            continue
        args = []
        raw = m.group("args").strip()
        ok = True
        if raw and raw != "void":
            for arg in raw.split(","):
                tokens = arg.replace("*", " * ").split()
                if len(tokens) > 1 and tokens[-1] not in ("*",) and tokens[-1] not in SCALARS \
                        and tokens[-1] not in ("char", "void") and tokens[-1] not in ENUMS | OPAQUE:
                    tokens = tokens[:-1]  # drop the parameter name
                try:
                    args.append(c_type_key(" ".join(tokens)))
                except ValueError:
                    ok = False
                    break
        if ok:
            out[m.group("name")] = (ret, tuple(args))
    return out


def c_blocks(markdown: str) -> str:
    """The text of every fenced ```c block of a markdown document."""
    return "\n".join(re.findall(r"```c\n(.*?)```", markdown, flags=re.S))
