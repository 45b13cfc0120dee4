"""Training algorithms: pure functions over arrays that return ObliqueTrees.

One module per method (``co2``, ``e2edt``, ``soft``, ``hinge``), each with a
frozen config dataclass named after the estimator's parameters, one ``fit_*``
entry and sibling ``_<method>_*`` modules of numba inner loops; ``finetune``
for decision machines. Shared: ``grower`` (greedy growth), ``_optim``
(momentum SGD, Adam, AdaGrad), ``_parallel`` (joblib over trees). Imports only
``_core`` and ``_training``; nothing here imports scikit-learn.
"""
