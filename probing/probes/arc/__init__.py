"""The attention-only arc probe (Clark et al. 2019): ``probe`` fits and scores it, ``blocks`` holds its features
a block of dependents at a time, ``solver`` fits it by Newton's method, ``kernels`` are its compiled inner loops."""
