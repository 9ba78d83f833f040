"""Causal evidence of what heads carry: activation, residual and attribution patching on minimal pairs."""
