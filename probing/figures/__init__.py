"""The PNG figures a run writes (matplotlib): ``heads`` for ``task=heads``, ``importance`` for
``task=importance``, ``sweep`` for a collected sweep. The dashboard's interactive figures are in
:mod:`probing.report`."""
