"""Categorical features: the one coordinate each category takes in every split.

A categorical feature enters a split as one number per category, not as one
input per category (one-hot) nor as its arbitrary codes (ordinal): the
category's *coordinate*, learned from the training target
(:mod:`obliquetrees._training.categories` derives it). The trees are then
grown, stored and walked on numbers as for any feature: a split reads
``w_j * coordinate(x_j)``, so every prediction path, the missing-value rule
and the container stay as they are. A missing value or a category the fit
never saw becomes NaN and takes the feature's learned missing-value term
(:mod:`obliquetrees._core.missing`), as a missing number does.

:class:`CategoryCoordinates` is the fitted table, saved as plain arrays (with a
format version, so a file from a newer release is refused clearly) and
checked when unpickled. Imports numpy only.
"""

import numbers

import numpy as np

from obliquetrees._core.validation import INDEX_DTYPE, VALUE_DTYPE, check_array

#: Most categories a categorical feature may have in training. A column with
#: more is an identifier or free text, not a category; its error says so.
MAX_CATEGORIES = 1000

#: Version of the table's saved state (a state without one is version 1).
FORMAT_VERSION = 1


def is_missing_label(values):
    """Boolean mask of the missing labels of a 1-D array: NaN, None or pandas' NA/NaT.

    ``values`` is float (NaN is missing) or object; an object entry is
    missing when it is ``None`` or unequal to itself (float NaN, NaT), or
    when comparing it raises or gives no boolean (pandas' ``NA``).
    """
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind != "O":
        return np.zeros(values.shape[0], dtype=bool)
    try:
        equal = values == values  # elementwise: False for NaN and NaT
    except TypeError:  # pandas' NA has no truth value: one entry at a time
        equal = np.array([_equals_itself(v) for v in values.tolist()], dtype=bool)
    return ~equal | np.equal(values, None)


def _equals_itself(value):
    try:
        return bool(value == value)
    except TypeError:
        return False


class CategoryCoordinates:
    """The coordinate of every category of the categorical features of a fit.

    Parameters
    ----------
    n_features : int
        Number of features of the fit (categorical and numeric).
    columns : ndarray of int64, shape (n_categorical,)
        The categorical features, in increasing order.
    categories : list of ndarray, one per entry of ``columns``
        The categories seen in training, sorted and distinct: an object array
        of ``str``, or a float64 array (numeric labels).
    values : list of ndarray of float64, one per entry of ``columns``
        ``values[i][k]`` is the coordinate of ``categories[i][k]``: finite.
    """

    def __init__(self, n_features, columns, categories, values):
        self.n_features = int(n_features)
        self.columns = np.ascontiguousarray(columns, dtype=INDEX_DTYPE)
        self.categories = [_as_labels(c) for c in categories]
        self.values = [np.ascontiguousarray(v, dtype=VALUE_DTYPE) for v in values]
        self.check()

    def codes(self, i, labels):
        """Index in ``categories[i]`` of each label (1-D array); -1 for missing or unknown."""
        return category_positions(self.categories[i], labels)

    def coordinates(self, i, labels):
        """The coordinate of each label of feature ``columns[i]``: NaN for missing or unknown."""
        codes = self.codes(i, labels)
        out = np.full(codes.shape[0], np.nan)
        known = codes >= 0
        out[known] = self.values[i][codes[known]]
        return out

    def same_as(self, other):
        """Whether ``other`` (a table or None) maps every label as this table does."""
        return (
            isinstance(other, CategoryCoordinates)
            and self.n_features == other.n_features
            and np.array_equal(self.columns, other.columns)  # so the lists have equal lengths
            and all(map(np.array_equal, self.categories, other.categories))
            and all(map(np.array_equal, self.values, other.values))
        )

    def __getstate__(self):
        # str categories as fixed-width unicode arrays: plain numpy data in any saved file
        return {
            "format_version": FORMAT_VERSION,
            "n_features": self.n_features,
            "columns": self.columns,
            "categories": [c.astype(str) if c.dtype.kind == "O" else c for c in self.categories],
            "values": list(self.values),
        }

    def __setstate__(self, state):
        # codes() indexes values[i] with positions in categories[i]: check them before use
        if not isinstance(state, dict) or set(state) - {"format_version"} != {
            "n_features",
            "columns",
            "categories",
            "values",
        }:
            raise ValueError(
                "the category coordinates' state must be a dict of n_features, columns, "
                "categories, values and format_version."
            )
        version = state.get("format_version", 1)
        if not isinstance(version, numbers.Integral) or version < 1:
            raise ValueError(f"the category coordinates' format_version is {version!r}.")
        if version > FORMAT_VERSION:
            raise ValueError(
                f"the category coordinates have format version {version}, newer than this "
                f"obliquetrees reads ({FORMAT_VERSION}); upgrade obliquetrees."
            )
        categories, values = state["categories"], state["values"]
        if not isinstance(categories, list | tuple) or not isinstance(values, list | tuple):
            raise ValueError("the category coordinates' categories and values must be lists.")
        for i, c in enumerate(categories):
            if not isinstance(c, np.ndarray) or c.ndim != 1 or c.dtype.kind not in "Uf":
                raise ValueError(f"categories[{i}] must be a 1-D str or float64 array.")
        for i, v in enumerate(values):
            check_array(v, f"the coordinates of categorical feature {i}", VALUE_DTYPE, 1)
        check_array(state["columns"], "the categorical features", INDEX_DTYPE, 1)
        self.__init__(state["n_features"], state["columns"], categories, values)

    def check(self):
        """Raise ``ValueError`` unless the table is consistent (and safe to index)."""
        n, columns = self.n_features, self.columns
        if n < 1:
            raise ValueError(f"the category coordinates' n_features is {n}, not positive.")
        if columns.size == 0 or columns.min() < 0 or columns.max() >= n:
            raise ValueError(f"the categorical features must be indices of {n} features.")
        if np.any(np.diff(columns) <= 0):
            raise ValueError("the categorical features must be increasing and distinct.")
        if not len(self.categories) == len(self.values) == columns.size:
            raise ValueError("one list of categories and of coordinates per categorical feature.")
        for i, (known, value) in enumerate(zip(self.categories, self.values, strict=True)):
            if known.shape != value.shape or known.size > MAX_CATEGORIES:
                raise ValueError(
                    f"categorical feature {columns[i]} has {known.size} categories and "
                    f"{value.size} coordinates (at most {MAX_CATEGORIES})."
                )
            if not np.all(np.isfinite(value)):
                raise ValueError(f"categorical feature {columns[i]} has non-finite coordinates.")
            if known.size and (np.any(is_missing_label(known)) or np.any(known[1:] <= known[:-1])):
                raise ValueError(
                    f"the categories of feature {columns[i]} must be sorted, distinct and "
                    "not missing."
                )


def category_positions(known, labels):
    """Position of each label (1-D array) in the sorted categories ``known``: -1 if unknown.

    ``known`` is an object array of ``str`` or a float64 array; a missing
    label is -1, and so is a label of the other kind (the number 3 for the
    categories ``"3"``, say).
    """
    codes = np.full(labels.shape[0], -1, dtype=INDEX_DTYPE)
    observed = ~is_missing_label(labels)
    if not observed.any() or known.size == 0:
        return codes
    seen = labels[observed]
    if known.dtype.kind == "O" and seen.dtype.kind != "O":
        seen = seen.astype(object)  # a number is then an unknown label, not a str
    try:
        position = np.searchsorted(known, seen)
    except TypeError:  # labels of another type than the categories: none is known
        codes[observed] = [_lookup(known, v) for v in seen]
        return codes
    position = np.minimum(position, known.size - 1)
    hit = known[position] == seen
    codes[np.flatnonzero(observed)[hit]] = position[hit]
    return codes


def _as_labels(categories):
    """A category array in memory: object array of str, or float64."""
    categories = np.asarray(categories)
    if categories.dtype.kind in "UO":
        if not all(isinstance(c, str) for c in categories.tolist()):
            raise ValueError("categories must be all str or all numbers.")
        return categories.astype(object)
    if categories.dtype.kind not in "iufb":
        raise ValueError(f"categories must be str or numbers, not {categories.dtype}.")
    return np.ascontiguousarray(categories, dtype=VALUE_DTYPE)


def _lookup(known, label):
    """Position of ``label`` in ``known`` or -1 (labels of mixed types, one at a time)."""
    # the number 3 is not the category "3", nor the str "3" the category 3.0
    if not isinstance(label, str if known.dtype.kind == "O" else numbers.Real):
        return -1
    position = int(np.searchsorted(known, label))
    return position if position < known.size and known[position] == label else -1
