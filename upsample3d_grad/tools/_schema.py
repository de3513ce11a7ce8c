"""A small JSON Schema validator for the subset of keywords the report schemas use (docs/operators.md, "Reports");
``jsonschema`` is not a runtime dependency."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

__all__ = ["SchemaError", "validate", "errors", "load_schema", "SMOKE_SCHEMA_PATH", "DOCTOR_SCHEMA_PATH"]

#: The smoke report's schema, kept in the package.
SMOKE_SCHEMA_PATH = Path(__file__).resolve().parent / "smoke_schema.json"
#: The doctor report's schema.
DOCTOR_SCHEMA_PATH = Path(__file__).resolve().parent / "doctor_schema.json"

_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "$defs", "$comment"})
_KEYWORDS = frozenset({"type", "required", "properties", "additionalProperties", "items", "enum", "minimum",
                       "$ref"}) | _ANNOTATIONS


class SchemaError(ValueError):
    """The schema itself uses a keyword or form this validator does not support."""


def load_schema(path: str | Path = SMOKE_SCHEMA_PATH) -> dict[str, Any]:
    """Read a schema file (JSON)."""
    with open(path, encoding="utf-8") as fh:
        schema = json.load(fh)
    if not isinstance(schema, dict):
        raise SchemaError(f"{path}: a schema must be a JSON object")
    return schema


_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _is_type(value: Any, name: str) -> bool:
    if name not in _TYPES:
        raise SchemaError(f"unknown type name {name!r}")
    return _TYPES[name](value)


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise SchemaError(f"$ref {ref!r}: only local '#/$defs/<name>' references are supported")
    target = root.get("$defs", {}).get(ref[len(prefix):])
    if not isinstance(target, dict):
        raise SchemaError(f"$ref {ref!r} does not name a schema in $defs")
    return target


def _path(where: Any) -> str:
    """``$.a.b[3]`` from the chain ``((("$", "a"), "b"), 3)`` (built only for a message)."""
    parts = []
    while isinstance(where, tuple):
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return str(where) + "".join(reversed(parts))


def _check(value: Any, schema: Any, where: Any, root: dict[str, Any], out: list[str], known: set[int]) -> None:
    if schema is True:
        return
    if schema is False:
        out.append(f"{_path(where)}: no value is allowed here")
        return
    if id(schema) not in known:  # each sub-schema's keywords are checked once per document
        if not isinstance(schema, dict):
            raise SchemaError(f"{_path(where)}: a schema must be an object or a boolean, got {type(schema).__name__}")
        unknown = set(schema) - _KEYWORDS
        if unknown:
            raise SchemaError(f"{_path(where)}: unsupported schema keyword(s) {sorted(unknown)}")
        known.add(id(schema))
    if "$ref" in schema:
        _check(value, _resolve(schema["$ref"], root), where, root, out, known)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, n) for n in names):
            out.append(f"{_path(where)}: expected {' or '.join(names)}, got {type(value).__name__} {value!r:.80}")
            return  # the other keywords would only repeat the problem
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{_path(where)}: {value!r:.80} is not one of {schema['enum']}")
    if "minimum" in schema and _is_type(value, "number") and value < schema["minimum"]:
        out.append(f"{_path(where)}: {value!r} is less than the minimum {schema['minimum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                out.append(f"{_path(where)}: missing required property {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                _check(item, props[name], (where, name), root, out, known)
            elif extra is False:
                out.append(f"{_path(where)}: unexpected property {name!r}")
            elif extra is not True:
                _check(item, extra, (where, name), root, out, known)
    if isinstance(value, list) and "items" in schema:
        for k, item in enumerate(value):
            _check(item, schema["items"], (where, k), root, out, known)


def errors(instance: Any, schema: dict[str, Any]) -> list[str]:
    """Every violation of *schema* by *instance*, as ``"$.path: message"`` lines (empty when valid); a
    :class:`SchemaError` if *schema* uses a keyword outside the supported subset."""
    out: list[str] = []
    _check(instance, schema, "$", schema, out, set())
    return out


def validate(instance: Any, schema: dict[str, Any] | None = None) -> None:
    """Raise ``ValueError`` listing every violation if the decoded JSON *instance* does not match *schema*
    (default: the smoke report's, :data:`SMOKE_SCHEMA_PATH`)."""
    found = errors(instance, load_schema() if schema is None else schema)
    if found:
        shown = "\n  ".join(found[:20])
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        raise ValueError(f"the document does not match the schema ({len(found)} problem(s)):\n  {shown}{more}")
