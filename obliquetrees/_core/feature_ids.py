"""Stored feature ids of the split weights: full rows keep none (container format 4).

A dense oblique split (CO2, E2EDT, soft and hinge trees) stores one weight per
feature, in feature order: its ids ``0, 1, ..., n_features - 1`` say nothing,
yet took a third of such a forest's memory (int32 ids beside float64 values).
So a container stores ``weight_index`` in one of two forms:

- *explicit*: one id per stored weight (every format before 4, and any
  container with a full row whose ids are not ``0 .. n_features - 1`` in order);
- *implicit full rows*: a node with exactly ``n_features`` weights (a *full
  row*) stores no ids, its ``k``-th weight is on feature ``k``; the other
  rows keep theirs, in node order.

The stored array's length tells the form apart: ``n_weights`` (explicit) or
``n_weights - n_features * n_full_rows`` (implicit); when there is no full
row they are the same array. The containers give ``weight_index`` back in
the explicit form (built on access); the traversal kernels read the stored
form (``ObliqueForest.routing_arrays``). Both forms hold the same weights in
the same order, so every result is bit-identical. This module imports numpy only.
"""

import numpy as np

#: Feature ids of stored weights (``weight_index``): int32 halves the largest
#: index array of a dense oblique forest; ``n_features`` is bounded to match.
FEATURE_DTYPE = np.dtype(np.int32)


def node_weight_counts(indptr, node_offset=None):
    """Stored weights per node, in node order.

    Parameters
    ----------
    indptr : ndarray of int64
        ``weight_indptr``: one tree's (``n_nodes + 1`` entries) or a packed
        forest's (``n_nodes + 1`` per tree, each tree's starting at 0).
    node_offset : ndarray of int64, shape (n_trees + 1,), default=None
        A packed forest's node offsets; None for a single tree.
    """
    counts = np.diff(indptr)
    if node_offset is None or node_offset.shape[0] <= 2:
        return counts
    # drop the steps between one tree's last pointer and the next tree's 0
    first = node_offset[:-1] + np.arange(node_offset.shape[0] - 1)
    return np.delete(counts, first[1:] - 1)


def is_implicit(stored, n_weights):
    """Whether ``stored`` ids leave out those of full rows (see the module docstring)."""
    return stored.shape[0] != n_weights


def explicit_feature_ids(counts, stored, n_features):
    """One feature id per stored weight, from either form.

    Parameters
    ----------
    counts : ndarray of int, shape (n_nodes,)
        Weights per node (:func:`node_weight_counts`).
    stored : ndarray of int32
        The stored ids, already checked to be in one of the two forms.
    n_features : int

    Returns
    -------
    ids : ndarray of int32, shape (counts.sum(),)
        ``stored`` itself when it is explicit.
    """
    n_weights = int(counts.sum())
    if not is_implicit(stored, n_weights):
        return stored
    in_full_row = np.repeat(counts == n_features, counts)
    ids = np.empty(n_weights, dtype=FEATURE_DTYPE)
    # place() takes its values in turn, repeating them: 0 .. p-1 for each full row
    np.place(ids, in_full_row, np.arange(n_features, dtype=FEATURE_DTYPE))
    if stored.size:
        np.place(ids, ~in_full_row, stored)
    return ids


def stored_feature_ids(counts, ids, n_features):
    """The form to store for ``ids``: implicit full rows when that is exact.

    Explicit ids lose their full rows' ids iff every full row lists ``0 ..
    n_features - 1`` in order (a full row in another order, or with a
    repeated feature, keeps the whole container explicit). Ids already in
    the implicit form are returned as they are.

    Parameters
    ----------
    counts : ndarray of int, shape (n_nodes,)
        Weights per node.
    ids : ndarray of int32
        Ids in either form.
    n_features : int

    Returns
    -------
    stored : ndarray of int32
        ``ids`` itself when it is implicit already or stays explicit.
    """
    if (counts.size and counts.min() < 0) or ids.shape[0] != counts.sum():
        return ids  # implicit already, or malformed (the container checks report it)
    full = counts == n_features
    n_full = np.count_nonzero(full)
    if not n_full:
        return ids
    in_full_row = np.repeat(full, counts)
    pattern = np.arange(n_features, dtype=ids.dtype)
    if not (ids[in_full_row].reshape(n_full, n_features) == pattern).all():
        return ids
    return np.ascontiguousarray(ids[~in_full_row])


def keeps_full_row_ids(counts, stored, n_features):
    """Whether ``stored`` ids are explicit although some row is full.

    Only a full row listed out of order does that (see
    :func:`stored_feature_ids`); packing such a tree beside implicit ones
    needs the explicit form for all.
    """
    return not is_implicit(stored, counts.sum()) and bool(np.any(counts == n_features))


def id_starts(counts, stored, n_features):
    """Where each node's ids start in ``stored``, and the end: shape (n_nodes + 1,).

    In the explicit form these are the weight starts; in the implicit form a
    full row stores none (its start is the next row's).
    """
    per_node = counts
    if is_implicit(stored, counts.sum()):
        per_node = np.where(counts == n_features, 0, counts)
    starts = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_node, out=starts[1:])
    return starts


def as_feature_index(index):
    """``index`` as a contiguous int32 array, refusing ids an int32 cannot hold.

    A plain cast would wrap such ids silently into valid-looking ones.
    """
    index = np.asarray(index)
    if index.dtype != FEATURE_DTYPE and index.size:
        info = np.iinfo(FEATURE_DTYPE)
        if index.dtype.kind not in "iu" or index.min() < info.min or index.max() > info.max:
            raise ValueError(
                f"weight_index must hold integers in [0, {info.max}]; got {index.dtype} "
                f"values in [{index.min()}, {index.max()}]."
            )
    return np.ascontiguousarray(index, dtype=FEATURE_DTYPE)


class FeatureIds:
    """The ``weight_index`` attribute: one feature id per stored weight.

    The stored array (either form of :mod:`obliquetrees._core.feature_ids`)
    lives in the instance ``__dict__`` under the same name, so pickles and
    the array checks see exactly what is stored; reading the attribute gives
    the explicit form, built on each access when full rows store no ids.
    """

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        stored = obj.__dict__.get("weight_index")
        values = obj.__dict__.get("weight_value")
        if stored is None or values is None or not is_implicit(stored, values.shape[0]):
            return stored
        return explicit_feature_ids(obj.weight_counts(), stored, obj.n_features)

    def __set__(self, obj, value):
        obj.__dict__["weight_index"] = value
