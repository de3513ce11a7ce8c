"""The public CANN facts the tests check against: ``tests/data/cann_facts.json``.

Every entry there names the public source it was read from (repository, path and
commit prefix), so the tests need no file outside the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._cdecl import parse_declarations

FACTS_PATH = Path(__file__).resolve().parent / "data" / "cann_facts.json"


def facts() -> dict[str, Any]:
    """The whole facts document."""
    with open(FACTS_PATH, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def declarations() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{name: (return key, (arg keys...))}`` of every documented C declaration."""
    text = "\n".join(p["declaration"] for p in facts()["prototypes"].values())
    return parse_declarations(text)
