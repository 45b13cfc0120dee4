"""Random hinge forests and ferns (Lay et al., 2018), trained jointly by minibatch SGD.

- ``_estimator`` (+ ``_docs``, ``_size``, ``_trees``):
  :class:`~obliquetrees.HingeForestClassifier`,
  :class:`~obliquetrees.HingeForestRegressor`, their size bound and the
  stored trees;
- ``training``: ``HingeParams``, ``HingeModel`` and ``fit_hinge``;
- ``_forward``: prediction from a ``HingeModel``; ``_kernels``: the epoch kernel.
"""
