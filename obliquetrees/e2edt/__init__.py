"""End-to-end learned decision trees (Hehn et al., 2020): greedy growth, then EM fine-tuning.

- ``_estimator`` (+ ``_docs``): :class:`~obliquetrees.E2EDTClassifier`,
  :class:`~obliquetrees.E2EDTRegressor`;
- ``training``: ``E2EDTParams`` and ``fit_e2edt``;
- ``_greedy``: the stump phase (one split per leaf);
- ``_kernels``, ``_pruned_kernels``, ``_simd``: EM over the whole tree, and
  over each sample's paths of non-negligible probability;
- ``_stump_rows``, ``_sparse``: a stump's products with dense or CSR rows, and
  the products for CSR input.
"""
