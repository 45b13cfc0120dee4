"""CO2 forests (Norouzi et al., 2015): greedy oblique trees, each split by CCCP.

- ``_estimator``, ``_regressor``: :class:`~obliquetrees.CO2ForestClassifier`,
  :class:`~obliquetrees.CO2ForestRegressor`;
- ``training``: ``CO2Params``, ``CO2KernelParams`` and ``fit_co2``;
- ``_grow``: one tree's breadth-first growth in one compiled call;
- ``_node``, ``_kernels``: a node's split (best axis-aligned start, its
  support, CCCP, the axis-or-oblique test on the node's rows);
- ``_sparse_kernels``: the same on a node kept as CSR;
- ``_rows``: one row's standardised values and side, dense or CSR;
- ``_oob``: the out-of-bag rows a tree carries down for the held-out test.
- ``_distributed``, ``_dask_tasks``: a tree grown node by node from rows on
  dask workers (:mod:`obliquetrees.dask`), without scikit-learn.
"""
