"""``python -m upsample3d_grad``: the ``upsample3d-grad`` command line.

(The package's imports have run by now; the console script, :mod:`upsample3d_grad_cli`, also covers a Ctrl-C
during them.)
"""

from __future__ import annotations

from upsample3d_grad_cli import main

raise SystemExit(main())
