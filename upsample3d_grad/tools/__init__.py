"""The tools around the operator, none imported by :mod:`upsample3d_grad` itself: the ``upsample3d-grad`` command
line, the smoke matrix and its reports, ``compare`` (docs/operators.md, "The tools")."""
