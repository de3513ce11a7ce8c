"""The tools around the operator: the ``upsample3d-grad`` command line and the smoke matrix with its reports.

* :mod:`.cli`: the command line (``python -m upsample3d_grad``), one module per command
  (:mod:`.cli_doctor` for ``doctor`` and ``run``, :mod:`.cli_smoke`, :mod:`.cli_bench`);
* :mod:`.smoke`: the smoke matrix run against the numpy reference (its cases in :mod:`.smoke_cases`, its
  report in :mod:`.smoke_report`, the adjoint family in :mod:`.adjoint_cases`);
* :mod:`.compare`: smoke reports of several machines in one table;
* the report schemas ``smoke_schema.json`` and ``doctor_schema.json``, checked by :mod:`._schema`, and written
  by :mod:`._jsonout`; :mod:`.hostinfo`: the host facts every report carries.

Nothing here is imported by :mod:`upsample3d_grad` itself.
"""
