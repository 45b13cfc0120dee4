"""The out-of-bag test of CO2's oblique splits (``oblique_test="out_of_bag"``).

A tree grown on a bootstrap carries the rows its bootstrap left out (the
out-of-bag rows: drawn no time, with positive ``sample_weight`` times
``class_weight``) and their weights. The grower keeps, per node, the slice
``ostart[node]:oend[node]`` of one array of out-of-bag row indices, as it
keeps the in-bag rows' slices; once a node's split is final,
:func:`split_oob` partitions the node's out-of-bag rows by the stored split
(the in-bag rows' routing, :func:`~obliquetrees.co2._rows.row_side`) into
its children's slices. A split kernel asks :func:`oob_keeps` whether its
oblique split beats the axis-aligned start on the node's out-of-bag rows,
which the tree never trained on.

Outside that mode the growth carries :func:`no_out_of_bag`: no rows, and no
slices (arrays of length 0), so nothing is read, partitioned or allocated
per node.

Importing this module imports numba.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline
from obliquetrees._training.axis_split import split_gain
from obliquetrees._training.grower import grow_capacity
from obliquetrees._training.targets import copy_target, empty_targets
from obliquetrees.co2._rows import row_side, row_value

#: ``CO2KernelParams.oblique_test`` of ``oblique_test="out_of_bag"`` (``"fit"``: 0).
OUT_OF_BAG = 1


@jit_inline
def tests_out_of_bag(params):
    """Whether the axis-or-oblique choice is made on out-of-bag rows (not on the fit rows)."""
    return params.oblique_penalty >= 0.0 and params.oblique_test == OUT_OF_BAG


def no_out_of_bag():
    """The growth's out-of-bag rows when it has none: ``(rows, weight, ostart, oend)``, empty."""
    return (
        np.empty(0, dtype=np.int64),
        np.empty(0),
        np.empty(0, dtype=np.int64),
        np.empty(0, dtype=np.int64),
    )


def out_of_bag(oob_weight):
    """The growth's out-of-bag rows ``flatnonzero(oob_weight > 0)``, all at the root.

    ``(rows, oob_weight, ostart, oend)``: the slices of the root only (the
    grower gives them room for its node table, :func:`grow_oob`).
    """
    rows = np.flatnonzero(oob_weight > 0)
    return rows, oob_weight, np.zeros(1, dtype=np.int64), np.full(1, rows.shape[0])


@jit_inline
def node_oob(oob, node):
    """``(rows, weight, start, end)``: the out-of-bag rows of ``node`` (none without slices)."""
    rows, weight, ostart, oend = oob
    if ostart.shape[0] == 0:
        return rows, weight, 0, 0
    return rows, weight, ostart[node], oend[node]


@jit
def grow_oob(oob, capacity):
    """``oob`` with slices for ``capacity`` nodes (unchanged without slices)."""
    rows, weight, ostart, oend = oob
    if ostart.shape[0] == 0:
        return oob
    return rows, weight, grow_capacity(ostart, capacity, 0), grow_capacity(oend, capacity, 0)


@jit_inline
def only_feature(w):
    """The index of ``w``'s one nonzero entry; -1 when it has none or several."""
    f = -1
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            if f >= 0:
                return -1
            f = j
    return f


@jit
def split_oob(oob, source, w, b, node, left):
    """Partition ``node``'s out-of-bag rows by its split ``(w, b)``; slice them to its children.

    Rows with ``w.x + b > 0`` (:func:`~obliquetrees.co2._rows.row_side`) go
    to the right child ``left + 1``, the others to ``left``. Nothing without slices.
    """
    # indexed, not unpacked: numba 0.68's dead-code elimination drops stores to arrays
    # unpacked from a tuple argument (as in co2._node.split_sampled)
    rows, ostart, oend = oob[0], oob[2], oob[3]
    if ostart.shape[0] == 0:
        return
    xr = np.empty(w.shape[0])
    f = only_feature(w)
    lo = ostart[node]
    hi = oend[node] - 1
    while lo <= hi:
        r = rows[lo]
        # an axis-aligned split reads one entry: the zero weights add nothing to w.x + b
        if f >= 0:
            right = b + w[f] * row_value(source, r, f) > 0.0
        else:
            right = row_side(source, r, w, b, xr)
        if right:
            rows[lo] = rows[hi]
            rows[hi] = r
            hi -= 1
        else:
            lo += 1
    ostart[left] = ostart[node]
    oend[left] = lo
    ostart[left + 1] = lo
    oend[left + 1] = oend[node]


@jit
def oob_keeps(data, w, b, mu, feature, threshold, n_classes, params):
    """Whether the node keeps its oblique split ``(w, b)`` by the out-of-bag test.

    ``data`` is the split kernel's ``(source, y, row_weight, rows, oob)``
    with ``oob`` the node's out-of-bag rows (:func:`node_oob`). ``(w, b)``
    acts on the node's rows centred on ``mu``; the axis-aligned start sends
    a row right when its centred column ``feature`` exceeds ``threshold``.
    Both are applied to the uncentred rows (the bias shifted by ``w.mu`` as the
    kernels store it). True when the log-likelihood the oblique split gains
    over the start on the node's out-of-bag rows
    (:func:`~obliquetrees._training.axis_split.split_gain`, nats) is at
    least ``params.oblique_penalty``: a tie keeps the oblique split (the
    paper's choice), and so does a node without out-of-bag rows (no gain)
    when the margin is 0. On letter (validation splits, 2 seeds, margin 0)
    ties kept as the start gave 0.959, kept oblique 0.963 (madelon 0.646 and
    0.643).
    Always True unless ``params`` asks for the test (:func:`tests_out_of_bag`).
    """
    if not tests_out_of_bag(params):
        return True
    source, y = data[0], data[1]
    rows, weight, start, end = data[4]
    n = end - start
    if n == 0:
        return params.oblique_penalty <= 0.0
    c = b
    for j in range(w.shape[0]):
        c -= w[j] * mu[j]  # back to uncentred inputs, as the kernels store it
    c_axis = -threshold - mu[feature]
    yo = empty_targets(y, n)
    wo = np.empty(n)
    right = np.empty(n, dtype=np.bool_)
    right_axis = np.empty(n, dtype=np.bool_)
    xr = np.empty(w.shape[0])
    for t in range(n):
        r = rows[start + t]
        copy_target(yo, t, y, r)
        wo[t] = weight[r]
        right[t] = row_side(source, r, w, c, xr)
        right_axis[t] = c_axis + row_value(source, r, feature) > 0.0
    return split_gain(yo, wo, n, right_axis, right, n_classes) >= params.oblique_penalty
