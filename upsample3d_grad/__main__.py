"""``python -m upsample3d_grad``: the ``upsample3d-grad`` command line (the console script also covers a Ctrl-C
during the imports, which have run by now)."""

from __future__ import annotations

from upsample3d_grad_cli import main

raise SystemExit(main())
