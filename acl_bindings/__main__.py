"""``python -m acl_bindings``: which backend, which libraries, how found, version, SoC, devices."""

import sys

from .report import main

sys.exit(main())
