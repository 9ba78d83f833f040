"""The PNG figures a run writes (matplotlib), one module per task that draws them: ``heads``, ``importance``,
``inspect``, and ``sweep`` for a collected sweep. The dashboard's interactive figures are in
:mod:`probing.report`."""
