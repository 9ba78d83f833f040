"""Context-mixing measures beyond attention weights: hooks on the model's own modules capture, in
the pass that gives the weights, what each measure needs (:mod:`~probing.mixing.layout`), and pure functions
turn it into maps (:mod:`~probing.mixing.measures`)."""

from probing.mixing.families import LayoutError
from probing.mixing.layout import LayerPieces, Norm, capture, layer_parts
from probing.mixing.measures import LAYER_MEASURES, ROLLOUTS, compute, heads_of, needs, rollout

__all__ = ["LAYER_MEASURES", "ROLLOUTS", "LayerPieces", "LayoutError", "Norm", "capture", "compute", "heads_of",
           "layer_parts", "needs", "rollout"]
