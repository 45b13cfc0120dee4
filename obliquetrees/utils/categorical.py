"""``categorical_features``: which columns are categories, and their coordinates in and out.

Every estimator takes ``categorical_features`` with the semantics of
scikit-learn's ``HistGradientBoostingClassifier`` (None, a boolean mask,
indices, feature names, or ``"from_dtype"``) and one rule of its own for
``"from_dtype"``: a pandas column of ``category``, ``object`` or string dtype
is categorical (scikit-learn's histogram trees take only ``category``; a
string column there is an error, here it is what it looks like). A
categorical column's labels are ``str`` or numbers, missing where NaN,
``None``, ``pd.NA`` or ``NaT``.

At ``fit`` (:func:`fit_categories`) the categorical columns become their
codes before the usual validation, and then, once the target is encoded,
their coordinates (:mod:`obliquetrees._training.categories`); the fitted
table is the estimator's ``category_coordinates_``
(:class:`~obliquetrees._core.categories.CategoryCoordinates`). At predict
and for later ``partial_fit`` batches (:func:`apply_categories`) the labels
become the table's coordinates, NaN for a missing or unseen category.
"""

import numpy as np
from scipy import sparse

from obliquetrees._core.categories import (
    MAX_CATEGORIES,
    CategoryCoordinates,
    category_positions,
    is_missing_label,
)
from obliquetrees.utils.seeds import draw_seeds

__all__ = ["apply_categories", "categorical_mask", "fit_categories", "learn_category_coordinates"]

#: pandas dtype names ``"from_dtype"`` takes as categorical (``str``: pandas 3's strings).
_CATEGORICAL_DTYPES = ("category", "object", "string", "str")


def categorical_mask(X, categorical_features):
    """Boolean mask of the categorical columns of ``X``, or None when there is none.

    Parameters
    ----------
    X : array-like, pandas DataFrame or sparse matrix of shape (n_samples, n_features)
    categorical_features : "from_dtype", array-like of bool, int or str, or None
        As the estimators' parameter (module docstring).

    Raises
    ------
    ValueError
        For an invalid ``categorical_features``, as scikit-learn's histogram
        gradient boosting raises it.
    """
    if categorical_features is None:
        return None
    columns = getattr(X, "columns", None)
    dtypes = getattr(X, "dtypes", None)
    if isinstance(categorical_features, str) and categorical_features == "from_dtype":
        if columns is None or dtypes is None or not hasattr(X, "iloc"):
            return None  # arrays have no per-column dtype
        mask = np.array([dtype.name in _CATEGORICAL_DTYPES for dtype in dtypes], dtype=bool)
        return mask if mask.any() else None
    given = np.asarray(categorical_features)
    if given.size == 0:
        return None
    if given.dtype.kind not in "iubUO" or (
        given.dtype.kind == "O" and not all(isinstance(f, str) for f in given.tolist())
    ):
        raise ValueError(
            "categorical_features must be an array-like of bool, int or str, got "
            f"{given.dtype.name}."
        )
    n_features = X.shape[1]
    mask = np.zeros(n_features, dtype=bool)
    if given.dtype.kind in "UO":
        if columns is None:
            raise ValueError(
                "categorical_features should be passed as an array of integers or as a "
                "boolean mask when the model is fitted on data without feature names."
            )
        names = [str(c) for c in columns]
        for name in given.tolist():
            if name not in names:
                raise ValueError(
                    f"categorical_features has an item value '{name}' which is not a valid "
                    f"feature name of the training data. Observed feature names: {names}"
                )
            mask[names.index(name)] = True
    elif given.dtype.kind == "b":
        if given.shape != (n_features,):
            raise ValueError(
                "categorical_features set as a boolean mask must have shape (n_features,), "
                f"got: {given.shape}"
            )
        mask = given.copy()
    else:
        if given.max() >= n_features or given.min() < 0:
            raise ValueError(
                "categorical_features set as integer indices must be in [0, n_features - 1]"
            )
        mask[given] = True
    return mask if mask.any() else None


def fit_categories(estimator, X):
    """``X`` with its categorical columns as category codes, before the usual validation.

    Sets ``estimator.is_categorical_`` (the mask, or None). Returns ``X``
    unchanged when no column is categorical; otherwise a new DataFrame or
    float array whose categorical columns hold each row's code (NaN where
    missing), and the sorted categories of each categorical column, for
    :func:`learn_category_coordinates` to finish once ``y`` is encoded.

    Returns
    -------
    X : the input or a new DataFrame / ndarray
    categories : list of ndarray or None
    """
    given = getattr(estimator, "categorical_features", None)
    if given is not None and not isinstance(given, str):
        X = _as_table(X)
    mask = categorical_mask(X, given)
    estimator.is_categorical_ = mask
    if mask is None:
        return X, None
    _refuse_sparse(X, "categorical_features")
    columns = np.flatnonzero(mask)
    categories, coded = [], []
    for j in columns:
        known, codes = _factorize(_labels(X, j), _column_name(X, j))
        codes = codes.astype(np.float64)
        codes[codes < 0] = np.nan
        categories.append(known)
        coded.append(codes)
    return _replace_columns(X, columns, coded), categories


def _factorize(labels, name):
    """The sorted categories of one column's labels, and each label's position (-1: missing)."""
    try:
        import pandas as pd
    except ImportError:  # numpy alone: sort every label
        known = _categories(labels, name)
        return known, category_positions(known, labels)
    # pandas hashes the labels (several times faster than sorting them all);
    # only the distinct ones are then sorted and checked
    first_seen, distinct = pd.factorize(labels, use_na_sentinel=True)
    distinct = np.asarray(distinct, dtype=labels.dtype)
    known = _categories(distinct, name)
    return known, np.where(first_seen >= 0, category_positions(known, distinct)[first_seen], -1)


def learn_category_coordinates(estimator, X, categories, y, sample_weight, n_classes):
    """Replace the codes of the categorical columns of a validated ``X`` by coordinates.

    ``X`` is the float array made by the usual validation from the output of
    :func:`fit_categories` (it owns it: written in place). Each training
    row gets its cross-fitted coordinate; ``estimator.category_coordinates_``
    gets the table prediction uses. ``n_classes`` is None for regression.
    """
    # imported here: the training side loads numba, which prediction alone never needs
    from obliquetrees._training.categories import learn_coordinates

    columns = np.flatnonzero(estimator.is_categorical_)
    seed = int(draw_seeds(getattr(estimator, "random_state", None), 1)[0])
    codes = [np.where(np.isnan(X[:, j]), -1, X[:, j]).astype(np.int64) for j in columns]
    numeric = X[:, ~estimator.is_categorical_]
    sizes = [known.size for known in categories]
    tables, train = learn_coordinates(codes, sizes, numeric, y, sample_weight, n_classes, seed)
    X[:, columns] = train
    estimator.category_coordinates_ = CategoryCoordinates(X.shape[1], columns, categories, tables)
    return X


def apply_categories(estimator, X):
    """``X`` with the fitted coordinates in its categorical columns (predict, ``partial_fit``).

    Returns ``X`` itself for a model without categorical features, and when
    ``X`` has not the fitted number of columns (the usual validation then
    says so).
    """
    table = estimator.__dict__.get("category_coordinates_")
    if table is None:
        return X
    X = _as_table(X)
    if X.ndim != 2 or X.shape[1] != table.n_features:
        return X
    _refuse_sparse(X, "a model fitted with categorical features")
    values = [table.coordinates(i, _labels(X, j)) for i, j in enumerate(table.columns)]
    return _replace_columns(X, table.columns, values)


def _as_table(X):
    """``X`` itself if a pandas DataFrame, an ndarray or sparse; else an object array, once.

    Lists of rows and other frames hold labels of any type: one conversion
    here, not one per column.
    """
    if hasattr(X, "iloc") or isinstance(X, np.ndarray) or sparse.issparse(X):
        return X
    return np.asarray(X, dtype=object)


def _refuse_sparse(X, what):
    if sparse.issparse(X):
        raise TypeError(
            f"{what} needs dense input (a DataFrame or an array); got a sparse {type(X).__name__}."
        )


def _labels(X, j):
    """The labels of column ``j`` of a DataFrame or ndarray: float, or object (missing as None)."""
    if hasattr(X, "iloc"):
        column = X.iloc[:, j]
        if column.dtype.name not in _CATEGORICAL_DTYPES and column.dtype.kind in "iufb":
            return column.to_numpy(dtype=np.float64, na_value=np.nan)
        return column.to_numpy(dtype=object, na_value=None)
    column = X[:, j]  # an ndarray (_as_table)
    if column.dtype.kind in "iufb":
        return column.astype(np.float64)
    return column.astype(object)


def _categories(labels, name):
    """The sorted distinct observed labels of one column, checked (type and number)."""
    observed = labels[~is_missing_label(labels)]
    try:
        known = np.unique(observed)
    except TypeError:
        raise ValueError(
            f"The categorical feature {name} mixes labels of several types (str and "
            "numbers, say); give each categorical column labels of one type."
        ) from None
    if known.dtype.kind == "O":
        kinds = {isinstance(k, str) for k in known.tolist()}
        if kinds == {False}:  # numbers in an object column
            known = np.unique(known.astype(np.float64))
        elif kinds != {True}:
            raise ValueError(
                f"The categorical feature {name} mixes str labels with other types; give "
                "each categorical column labels of one type."
            )
    if known.dtype.kind == "f" and not np.all(np.isfinite(known)):
        raise ValueError(f"The categorical feature {name} has an infinite label.")
    if known.size > MAX_CATEGORIES:
        raise ValueError(
            f"The categorical feature {name} has {known.size} categories, more than "
            f"{MAX_CATEGORIES}: an identifier or free text is not a category. Drop the "
            "column, group its rare levels, or leave it out of categorical_features."
        )
    return known


def _column_name(X, j):
    columns = getattr(X, "columns", None)
    return f"{str(columns[j])!r}" if columns is not None else f"at index {j}"


def _replace_columns(X, columns, values):
    """A new DataFrame or float array: ``X`` with ``values[i]`` as column ``columns[i]``."""
    if hasattr(X, "iloc"):
        out = X.copy(deep=False)  # the caller's frame keeps its columns
        for j, v in zip(columns, values, strict=True):
            out.isetitem(int(j), v)
        return out
    out = np.empty(X.shape, dtype=np.float64)  # X is an ndarray here (_as_table)
    numeric = np.ones(X.shape[1], dtype=bool)
    numeric[columns] = False
    if numeric.any():
        try:
            out[:, numeric] = X[:, numeric]
        except (TypeError, ValueError):
            raise ValueError(
                "X has non-numeric values outside its categorical features; add their "
                "columns to categorical_features."
            ) from None
    for j, v in zip(columns, values, strict=True):
        out[:, j] = v
    return out
