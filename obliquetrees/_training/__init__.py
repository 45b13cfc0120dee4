"""Training algorithms: pure functions over arrays that return ObliqueTrees.

One module per method (``co2``, ``e2edt``, ``soft``, ``hinge``), each with a
sibling ``_<method>_kernels`` module of numba inner loops. Nothing here
imports scikit-learn.
"""
