"""Per-tree seeds: one integer per tree drawn up front from ``random_state``.

Tree ``t`` is then the same whichever worker builds it and in whatever order:
the same ``random_state`` gives the same forest for any ``n_jobs`` and any
joblib backend.
"""

import numpy as np
from sklearn.utils import check_random_state

MAX_SEED = np.iinfo(np.int32).max


def draw_seeds(random_state, n):
    """Draw ``n`` integer seeds in ``[0, 2**31 - 1)`` from ``random_state``.

    Parameters
    ----------
    random_state : int, RandomState instance or None
    n : int

    Returns
    -------
    seeds : ndarray of int64, shape (n,)
    """
    rng = check_random_state(random_state)
    return rng.randint(MAX_SEED, size=n).astype(np.int64)
