"""``python -m upsample3d_grad``: the ``upsample3d-grad`` command line."""

from __future__ import annotations

from .tools.cli import main

raise SystemExit(main())
