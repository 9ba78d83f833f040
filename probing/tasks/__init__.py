"""The tasks: one module per task (``extract``, ``heads``, ``probe``, ``inspect``), each taking the typed
sub-configs it needs and returning a :class:`~probing.tasks.base.TaskResult`; :mod:`probing.tasks.run`
dispatches by ``task.name`` and writes the run dir's ``metrics.json`` and ``run_meta.json``."""
