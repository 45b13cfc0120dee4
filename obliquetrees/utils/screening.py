"""Input screening against permuted copies (shadow features) of the inputs.

Ours (issue 39), for learnt layers that weigh every input: on data with many
irrelevant inputs (madelon: 20 relevant of 500) an inner product of all of
them mixes the noise into every decision. The screen keeps the inputs that
an extremely randomised forest finds more important than every shadow: a
copy of the inputs whose rows are permuted, so that no shadow carries
information about the target while each keeps its input's distribution.
The rule is Boruta's (Kursa & Rudnicki, 2010) in one round, with the rows
permuted together (one permutation for every shadow column, which keeps a
CSR matrix sparse) instead of each column on its own.
"""

import os

import numpy as np
from scipy import sparse
from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

from obliquetrees._core._random import generator
from obliquetrees._core.tree import standardization

#: Trees of the screening forest.
SCREEN_TREES = 100
#: Rows the screen reads at most (a random subset beyond): importances of a
#: few thousand rows already separate the inputs from their shadows, and the
#: screen should cost little next to the fit it screens for.
SCREEN_MAX_ROWS = 10_000
#: Largest dense form (bytes: float64, the shadows included) in which the screen
#: reads a sparse input: then as it reads the dense twin, so that dense and sparse
#: fits screen alike (scikit-learn's sparse splitter draws other thresholds).
SCREEN_DENSE_BYTES = 1 << 26
#: Largest standardised value the screen passes on: the forest works in float32.
_FLOAT32_SAFE = 1e30


def shadow_screen(X, y, sample_weight, classification, seed, n_jobs=None):
    """The inputs more important than every shadow, or None when that is all or none of them.

    Parameters
    ----------
    X : ndarray or CSR matrix of float64, shape (n_samples, n_inputs)
        Training inputs without NaN (the rows the screened model fits on).
        A sparse ``X`` whose rows read (at most :data:`SCREEN_MAX_ROWS`)
        and their shadows take at most :data:`SCREEN_DENSE_BYTES` as dense
        float64 is screened as its dense twin (the same keep); a larger one
        stays sparse, and the forest's sparse splitter may then keep a
        borderline input that the dense one drops, or the reverse.
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        Class indices (classification) or targets.
    sample_weight : ndarray of shape (n_samples,)
    classification : bool
    seed : int
        Seeds the row subset, the permutation and the forest.
    n_jobs : int or None
        Threads of the forest; the result does not depend on it.

    Returns
    -------
    keep : ndarray of bool of shape (n_inputs,), or None
        True for the inputs kept; None when every input or none passes (the
        screen then says nothing to act on).
    """
    rng = generator(seed)
    n = X.shape[0]
    if n > SCREEN_MAX_ROWS:
        rows = np.sort(rng.choice(n, SCREEN_MAX_ROWS, replace=False))
        X, y, sample_weight = X[rows], y[rows], sample_weight[rows]
    if sparse.issparse(X) and 2 * X.shape[0] * X.shape[1] * 8 <= SCREEN_DENSE_BYTES:
        X = X.toarray()
    X = _standardised(X)
    shadows = X[rng.permutation(X.shape[0])]
    stack = sparse.hstack if sparse.issparse(X) else np.hstack
    inputs = stack([X, shadows])
    if sparse.issparse(inputs):
        inputs = inputs.tocsc()  # the forest's own sparse layout
    if not sample_weight.sum() > 0:
        sample_weight = None  # rows that all weigh zero are screened unweighted, as fitted
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]  # a forest warns about a column vector
    forest_class = ExtraTreesClassifier if classification else ExtraTreesRegressor
    # joblib refuses a huge n_jobs (the estimators accept any): at most one per core
    n_jobs = None if n_jobs is None else min(int(n_jobs), os.cpu_count() or 1)
    forest = forest_class(
        SCREEN_TREES, max_features="sqrt", random_state=int(seed) % 2**32, n_jobs=n_jobs
    )
    forest.fit(inputs, y, sample_weight=sample_weight)
    importance = forest.feature_importances_
    p = X.shape[1]
    keep = importance[:p] > importance[p:].max()
    if keep.all() or not keep.any():
        return None
    return keep


def _standardised(X):
    """``X`` per input centred (dense only: sparse stays sparse) and scaled, within float32.

    The forest's importances do not depend on a per-input affine change, but
    it reads float32: raw inputs beyond its range raise, and an input of
    large mean and small spread would round to a constant.
    """
    mean, scale = standardization(X)
    with np.errstate(over="ignore", invalid="ignore"):
        if sparse.issparse(X):
            Z = sparse.csr_matrix(X @ sparse.diags(1.0 / scale))  # 1 / inf: an ignored input
            values = Z.data
        else:
            Z = values = (X - mean) / scale
    np.clip(values, -_FLOAT32_SAFE, _FLOAT32_SAFE, out=values)
    values[np.isnan(values)] = 0.0
    return Z
