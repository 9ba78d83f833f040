"""Head importance (issue 10): gated passes, readouts, frozen probes, scores, pruning curves, the link to
attention accuracy."""
