"""Soft decision trees (Irsoy et al., 2012): grown node by node, each split by SGD.

- ``_estimator``: :class:`~obliquetrees.SoftTreeClassifier`,
  :class:`~obliquetrees.SoftTreeRegressor`;
- ``training``: ``SoftTreeParams`` and ``fit_soft_tree``;
- ``_kernels``, ``_axis_split``, ``_finetune``: a split's SGD, its
  axis-aligned start, and the whole tree's fine-tuning.
"""
