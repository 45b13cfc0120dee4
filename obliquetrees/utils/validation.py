"""Input validation shared by every estimator (wraps scikit-learn's helpers).

This is the one module that imports scikit-learn's validation helpers,
including the private ``_check_sample_weight`` and ``_check_monotonic_cst``.
"""

import numpy as np
from scipy import sparse
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_monotonic_cst,
    _check_sample_weight,
    check_array,
    check_is_fitted,
    validate_data,
)

from obliquetrees._core.missing import nan_columns, observed_moments
from obliquetrees._core.tree import feature_moments
from obliquetrees._core.validation import bounded_weights
from obliquetrees.utils.categorical import (
    apply_categories,
    fit_categories,
    learn_category_coordinates,
)

__all__ = [
    "bounded_weights",
    "check_is_fitted",
    "check_monotonic_cst",
    "same_constraints",
    "validate_fit_data",
    "validate_leaf_rows",
    "validate_more_fit_data",
    "validate_part_weights",
    "validate_predict_data",
]


def validate_fit_data(
    estimator, X, y, sample_weight, *, classifier, accept_sparse=False, multi_output=False
):
    """Validate training data and set ``n_features_in_`` (and ``classes_``).

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator being fitted; receives ``n_features_in_``,
        ``feature_names_in_`` and, for classifiers, ``classes_`` and
        ``n_classes_``.
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Sparse input raises a ``TypeError`` unless ``accept_sparse``.
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        2-D only with ``multi_output``.
    sample_weight : array-like of shape (n_samples,) or None
    classifier : bool
        Encode ``y`` as class indices (classifier) or as float64 targets.
    accept_sparse : bool, default=False
        Accept CSR, CSC and COO input, returned as canonical CSR
        (:func:`as_training_csr`).
    multi_output : bool, default=False
        Accept 2-D regression targets (returned as they are; a column vector
        stays 2-D).

    The estimator's ``categorical_features`` (if it has the parameter) picks
    categorical columns; each enters ``X`` as the coordinate its category
    takes, learned from ``y`` and cross-fitted
    (:mod:`obliquetrees.utils.categorical`), and the estimator receives
    ``is_categorical_`` and ``category_coordinates_`` (None without any).

    Returns
    -------
    X : ndarray of float64, C-contiguous and writeable, or canonical CSR matrix
        A read-only array (a memory map, say) is copied: the kernels shipped
        in the wheel are compiled for writeable arrays, and numba would
        compile every training kernel again for a read-only one.
    y : ndarray of int64 class indices (classifier) or float64 targets
    sample_weight : ndarray of float64, shape (n_samples,)
        The one form of the weights every training path receives: ones when
        none were given (so no layer below re-derives them). Negative weights and weights summing
        to zero raise a ``ValueError``; weights whose total is beyond
        ``2**128`` (or below ``2**-128``) are divided by a power of two
        (:func:`bounded_weights`).
    """
    _refuse_dask(estimator, X, y, sample_weight)  # before a dask frame's columns are read
    X, categories = fit_categories(estimator, X)  # categorical columns as their codes
    X, y, sample_weight = _validate_training_arrays(
        estimator,
        X,
        y,
        sample_weight,
        classifier=classifier,
        reset=True,
        accept_sparse=accept_sparse,
        multi_output=multi_output,
    )
    if isinstance(X, np.ndarray) and not X.flags.writeable:
        X = X.copy()
    if classifier:
        estimator.classes_, y = np.unique(y, return_inverse=True)
        estimator.n_classes_ = len(estimator.classes_)
        y = y.astype(np.int64, copy=False)
    estimator.category_coordinates_ = None
    if categories is not None:  # the codes become coordinates, learned from y
        n_classes = estimator.n_classes_ if classifier else None
        X = learn_category_coordinates(estimator, X, categories, y, sample_weight, n_classes)
    # Training standard deviation of every feature (weighted by sample_weight;
    # over the observed values where some are missing), kept privately for
    # feature_importances_, which shares a split's impurity decrease among its
    # features by |w_j| * std(x_j) (obliquetrees.inspection).
    if nan_columns(X).any():
        estimator._feature_std = observed_moments(X, sample_weight)[1]
    else:
        estimator._feature_std = feature_moments(X, sample_weight)[1]
    return X, y, sample_weight


def validate_more_fit_data(
    estimator, X, y, sample_weight, *, classifier, accept_sparse=False, multi_output=False
):
    """Validate another batch of training data for a fitted estimator (``partial_fit``).

    The checks of :func:`validate_fit_data`, against the features seen at the
    first fit (``reset=False``); class labels are returned as given, for the
    caller to map onto its ``classes_``. ``multi_output`` accepts 2-D
    regression targets, as in :func:`validate_fit_data` (a partition of a
    dask fit, :mod:`obliquetrees.dask`).

    Returns
    -------
    X : ndarray of float64, C-contiguous
    y : ndarray of labels (classifier) or float64 targets
    sample_weight : ndarray of float64, shape (n_samples,)
        Ones when none were given, as in :func:`validate_fit_data`.
    """
    _refuse_dask(estimator, X, y, sample_weight)
    return _validate_training_arrays(
        estimator,
        apply_categories(estimator, X),
        y,
        sample_weight,
        classifier=classifier,
        reset=False,
        accept_sparse=accept_sparse,
        multi_output=multi_output,
    )


def check_sparse_structure(X):
    """Raise ``ValueError`` if a sparse ``X``'s index arrays are inconsistent.

    scipy checks index ranges only on request, and a matrix can be edited
    after construction; out-of-range indices or a non-monotone ``indptr``
    would make scipy's own conversions and our kernels (no bounds checks)
    read or write out of bounds. O(nnz), before any conversion. Dense input
    and the formats held in Python structures (LIL, DOK) pass through.
    """
    if not sparse.issparse(X):
        return
    try:
        if X.format in ("csr", "csc", "bsr"):
            X.check_format(full_check=True)
        elif X.format == "coo":
            coords = getattr(X, "coords", None) or (X.row, X.col)
            for axis, index in enumerate(coords):
                if index.size and (index.min() < 0 or index.max() >= X.shape[axis]):
                    raise ValueError(f"axis-{axis} index out of range")
        elif X.format == "dia" and X.offsets.size and np.abs(X.offsets).max() >= max(X.shape):
            raise ValueError("diagonal offset out of range")
    except ValueError as error:
        raise ValueError(f"X is a malformed {X.format.upper()} matrix: {error}") from None


def as_training_csr(X):
    """Canonical CSR form of a validated sparse ``X`` for the training kernels.

    float64 data, int64 ``indptr``/``indices`` (one dtype, so one compiled
    kernel), duplicates summed and column indices sorted within each row.
    Copies only what needs converting.
    """
    X = X.tocsr()
    if X.data.dtype != np.float64:
        X = X.astype(np.float64)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # also sorts the indices
    indptr = X.indptr.astype(np.int64, copy=False)
    indices = X.indices.astype(np.int64, copy=False)
    if indptr is not X.indptr or indices is not X.indices:
        # scipy may downcast index arrays in the constructor: set them directly
        data = X.data
        X = sparse.csr_matrix(X.shape, dtype=np.float64)
        X.data, X.indices, X.indptr = data, indices, indptr
    return X


def validate_part_weights(sample_weight, X):
    """Weights of one part of the training rows: float64, non-negative, one per row of ``X``.

    The checks of :func:`validate_fit_data` but "not all zero", which holds
    for the whole data set, not for each part of it (a dask partition).
    """
    return _check_sample_weight(
        np.asarray(sample_weight), X, dtype=np.float64, ensure_non_negative=True
    )


def is_dask_collection(obj):
    """Whether ``obj`` is a dask collection (duck-typed: imports nothing)."""
    graph = getattr(obj, "__dask_graph__", None)
    return callable(graph) and graph() is not None


def _refuse_dask(estimator, *arrays):
    """Raise ``TypeError`` for dask collections: the in-memory fit would gather them silently."""
    if not any(is_dask_collection(a) for a in arrays):
        return
    name = type(estimator).__name__
    if name.startswith(("CO2", "E2EDT")):
        route = f"or fit obliquetrees.dask.Dask{name}, which trains where the partitions live"
    else:
        route = f"{name} has no dask route (it trains its trees jointly on all rows)"
    raise TypeError(
        f"{name}.fit trains in memory and got a dask collection: call .compute() on X, y "
        f"(and sample_weight) if they fit in this process's memory; {route}."
    )


def _validate_training_arrays(
    estimator, X, y, sample_weight, *, classifier, reset, accept_sparse, multi_output=False
):
    check_sparse_structure(X)
    X, y = validate_data(
        estimator,
        X,
        y,
        reset=reset,
        accept_sparse=("csr", "csc", "coo") if accept_sparse else False,
        dtype=np.float64,
        order="C",
        multi_output=multi_output,
        y_numeric=not classifier,
        ensure_all_finite="allow-nan",  # NaN marks a missing value; infinity is refused
    )
    if sparse.issparse(X):
        X = as_training_csr(X)
    if classifier:
        check_classification_targets(y)
    else:
        y = np.ascontiguousarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
    return X, y, _row_weights(sample_weight, X)


def _row_weights(sample_weight, X):
    """``sample_weight`` of the rows of ``X`` validated, its total bounded; None: all ones.

    Finite, non-negative and not all zero, else ``ValueError``; rescaled by
    :func:`bounded_weights` (so sums of them cannot overflow).
    """
    if sample_weight is None:  # one form downstream: every row weighs one
        return np.ones(X.shape[0])
    sample_weight = _check_sample_weight(
        sample_weight, X, dtype=np.float64, ensure_non_negative=True
    )
    if not np.any(sample_weight > 0):
        raise ValueError("sample_weight must not be all zero (sum must be > 0).")
    return bounded_weights(sample_weight)


def validate_leaf_rows(X, y, sample_weight, n_outputs):
    """Targets and weights of the rows of a validated ``X``, to record in the leaves they reach.

    Parameters
    ----------
    X : ndarray or CSR matrix, shape (n_samples, n_features), already validated
    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Finite targets.
    sample_weight : array-like of shape (n_samples,) or None
        Finite, non-negative, not all zero (None: all 1); rescaled as
        training rescales it (:func:`bounded_weights`), so a leaf's total
        weight cannot overflow (the quantiles read only their ratios).
    n_outputs : int
        The model's number of outputs.

    Returns
    -------
    y : ndarray of float64, shape (n_samples, n_outputs)
    sample_weight : ndarray of float64, shape (n_samples,)
    """
    y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
    if y.ndim > 2 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y has shape {y.shape}; X has {X.shape[0]} rows.")
    y = y.reshape(X.shape[0], -1)
    if y.shape[1] != n_outputs:
        raise ValueError(f"y has {y.shape[1]} outputs; the model has {n_outputs}.")
    return y, _row_weights(sample_weight, X)


def validate_predict_data(estimator, X, dtype=(np.float64, np.float32)):
    """Check that ``estimator`` is fitted and validate prediction input.

    float32 and float64 input keeps its dtype (kernels take both); other
    dtypes become the first entry of ``dtype``. Dense input is made
    C-contiguous (copied if it is not): the kernels read rows, and one layout
    per dtype means one compiled specialisation, which the shipped kernel
    cache holds. CSR input is accepted. NaN marks a missing value; infinity
    raises a ``ValueError``. A model fitted with categorical features reads
    their labels as its ``category_coordinates_`` map them (NaN for a missing
    or unseen category; :mod:`obliquetrees.utils.categorical`).
    """
    check_is_fitted(estimator)
    check_sparse_structure(X)
    return validate_data(
        estimator,
        apply_categories(estimator, X),
        reset=False,
        accept_sparse="csr",
        dtype=list(dtype),
        order="C",
        ensure_all_finite="allow-nan",
    )


def check_monotonic_cst(estimator, monotonic_cst):
    """``monotonic_cst`` checked as scikit-learn checks it, or None when it constrains nothing.

    Call after :func:`validate_fit_data` (it reads ``n_features_in_``,
    ``feature_names_in_`` and, for classifiers, ``n_classes_``). The errors are
    scikit-learn's: values other than -1, 0 and 1, a length other than
    ``n_features_in_``, a dict without feature names or with unknown names, and
    multiclass or multi-output targets all raise a ``ValueError``.

    Parameters
    ----------
    estimator : BaseEstimator
        The estimator being fitted.
    monotonic_cst : array-like of int of shape (n_features,), dict or None
        1: the prediction (a regressor's output, a binary classifier's
        probability of ``classes_[1]``) may only rise with the feature; -1:
        only fall; 0: no constraint. A dict maps feature names to those values
        (features it leaves out are unconstrained).

    Returns
    -------
    monotonic_cst : ndarray of int8 of shape (n_features_in_,) or None
        None when no feature is constrained, so an estimator trains exactly
        as without the parameter.
    """
    if monotonic_cst is None:
        return None
    if getattr(estimator, "n_classes_", 2) > 2:
        raise ValueError(
            "Monotonicity constraints are not supported with multiclass classification"
        )
    if getattr(estimator, "n_outputs_", 1) > 1:
        raise ValueError("Monotonicity constraints are not supported with multiple outputs.")
    checked = _check_monotonic_cst(estimator, monotonic_cst)
    categorical = getattr(estimator, "is_categorical_", None)
    if categorical is not None and np.any(checked[categorical] != 0):
        raise ValueError("Categorical features cannot have monotonic constraints.")
    return checked if checked.any() else None


def same_constraints(a, b):
    """Whether two checked constraint vectors are the same (None or empty: no constraint).

    Parameters
    ----------
    a, b : array-like of int or None
        Constraint vectors as :func:`check_monotonic_cst` returns them (or as
        an estimator stored them: a list, None when unconstrained).

    Returns
    -------
    same : bool
    """
    return bool(np.array_equal([] if a is None else a, [] if b is None else b))
