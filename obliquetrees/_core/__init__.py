"""The oblique-tree core shared by every method.

- ``tree``: the :class:`ObliqueTree` container (numpy only);
- ``forest``: :class:`ObliqueForest`, trees packed for whole-forest kernels;
- ``traversal``: numba kernels for hard routing (imports numba);
- ``_jit``: the numba compilation presets.
"""
