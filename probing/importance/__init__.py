"""Head importance: gated passes, readouts, frozen probes, scores, pruning curves, the link to attention
accuracy."""
