"""The oblique-tree core shared by every method (numpy, scipy, numba; nothing above).

- ``tree``: the :class:`ObliqueTree` container (numpy only), standardisation;
- ``forest``: :class:`ObliqueForest`, trees packed for whole-forest kernels;
- ``predict``: the one prediction dispatcher and its cost rule;
- ``traversal`` (numba) and ``traversal_numpy``: hard routing;
- ``machine`` (and ``_machine_kernels``): the decision-machine matrix form;
- ``soft``: soft evaluation of a stored tree; ``importances``: feature importances;
- ``validation``, ``_random``, ``_math``, ``_blas``, ``_jit``: checks, RNG,
  shared math, BLAS thread limits, the numba compilation presets;
- ``row_checks``: a dask worker's checks of a partition's rows (no scikit-learn).
"""
