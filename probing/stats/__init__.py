"""Statistics every analysis shares: the bootstrap over sentences and multiplicity control."""
