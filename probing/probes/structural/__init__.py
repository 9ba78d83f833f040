"""Structural probes (Hewitt and Manning 2019): ``probe`` trains the distance and depth probes, ``metrics``
scores them (UUAS, DSpr, root accuracy, NSpr), ``run`` reads their word vectors from a store and runs one."""
