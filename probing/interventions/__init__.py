"""Interventions on a model's heads from inside its own modules: gates (ablation, gradient importance) and
patches (activations copied from another run), shared by ``task=importance`` and ``task=patching``."""
