"""The number of candidate features of a split, from a ``max_features`` parameter (numpy only)."""

import numpy as np


def resolve_max_features(max_features, n_features):
    """Number of candidate features of a split, in ``[1, n_features]``.

    ``"sqrt"`` and ``"log2"`` of ``n_features`` (rounded down), an int as
    given, a float as that fraction of ``n_features``, None all of them.
    """
    if max_features == "sqrt":
        q = int(np.sqrt(n_features))
    elif max_features == "log2":
        q = int(np.log2(n_features))
    elif max_features is None:
        q = n_features
    elif isinstance(max_features, (int, np.integer)):
        q = int(max_features)
    else:
        q = int(max_features * n_features)
    return int(min(max(q, 1), n_features))
