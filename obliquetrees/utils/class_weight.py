"""``class_weight`` of the classifiers: resolved to one weight per class.

The semantics are scikit-learn's (``RandomForestClassifier``): ``"balanced"``
weighs class ``c`` by ``n_samples / (n_classes * count_c)`` (counts of ``y``,
not weighted by ``sample_weight``), a dict maps class labels to weights
(classes it does not name weigh 1), and the weights multiply
``sample_weight``. ``"balanced_subsample"`` is per tree (the counts of its
bootstrap), so it passes through unresolved for the training code.
"""

from numbers import Real

import numpy as np

__all__ = ["class_weight_vector", "expand_class_weight"]


def class_weight_vector(class_weight, y, classes):
    """Per-class weights in the order of ``classes``.

    Parameters
    ----------
    class_weight : {"balanced", "balanced_subsample"}, dict or None
        The estimator's parameter (its type already validated).
    y : ndarray of int64, shape (n_samples,)
        Class indices into ``classes``.
    classes : ndarray of shape (n_classes,)
        The estimator's ``classes_``.

    Returns
    -------
    weights : ndarray of float64, shape (n_classes,), None or "balanced_subsample"
        None and ``"balanced_subsample"`` are returned as given.

    Raises
    ------
    ValueError
        A dict key that is not a class of ``y`` (a typo must not pass
        silently, as in scikit-learn), or a value that is not a finite
        non-negative number.
    """
    if class_weight is None or class_weight == "balanced_subsample":
        return class_weight
    n_classes = classes.shape[0]
    if class_weight == "balanced":
        counts = np.bincount(y, minlength=n_classes)
        return y.shape[0] / (n_classes * np.maximum(counts, 1))
    weight = np.ones(n_classes)
    for label, value in class_weight.items():
        pos = np.flatnonzero(classes == label)
        if not pos.size:
            raise ValueError(
                f"class_weight has label {label!r}, which is not a class of y {classes.tolist()}."
            )
        if not (
            isinstance(value, Real)
            and not isinstance(value, bool)
            and np.isfinite(value)
            and value >= 0
        ):
            raise ValueError(
                f"class_weight[{label!r}] = {value!r}; class weights must be "
                "finite non-negative numbers."
            )
        weight[pos[0]] = value
    return weight


def expand_class_weight(sample_weight, weights, y):
    """``sample_weight`` times the class weight of each sample.

    Parameters
    ----------
    sample_weight : ndarray of float64, shape (n_samples,), or None
        None means ones.
    weights : ndarray of float64, shape (n_classes,)
        From :func:`class_weight_vector`.
    y : ndarray of int64, shape (n_samples,)
        Class indices.

    Returns
    -------
    sample_weight : ndarray of float64, shape (n_samples,)
        A new array.

    Raises
    ------
    ValueError
        When the product is zero for every sample: no class is left to learn from.
    """
    expanded = weights[y] if sample_weight is None else sample_weight * weights[y]
    if not expanded.max(initial=0.0) > 0:
        raise ValueError(
            "sample_weight times class_weight is zero for every training sample: "
            "the weights must not sum to zero."
        )
    return expanded
