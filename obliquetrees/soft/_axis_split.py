"""The hard axis-aligned split that initialises a soft tree's new split.

A node about to be split starts from the best hard split of the data weighted
by its soft membership (the authors' code; see ``_initial_point`` in
:mod:`obliquetrees.soft.training`). :func:`best_axis_split` scans presorted
dense columns, :func:`best_axis_split_sparse` the stored entries of sparse
rows (:func:`~obliquetrees._training._rows.sorted_columns`); both return the
same split. Once per split attempt, serial.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline


@jit_inline
def _split_score(ss, tot_s, sw, tot_w, x_here, x_next):
    """``sum_k (S_L^2 / W_L + S_R^2 / W_R)``: the SSE reduction plus ``S^2 / W``, or -inf.

    Of the split between the values ``x_here`` and ``x_next``: ``ss``/``sw``
    are the left side's weighted target sums and weight; the right side is
    the rest of ``tot_s``/``tot_w``. -inf when the values are not
    increasing or a side has no weight.
    """
    rw = tot_w - sw
    if x_next <= x_here or sw <= 0.0 or rw <= 0.0:
        return -np.inf
    g = 0.0
    for k in range(tot_s.shape[0]):
        rs = tot_s[k] - ss[k]
        g += ss[k] * ss[k] / sw + rs * rs / rw
    return g


@jit_inline
def _node_totals(u, Y, n):
    """The node's weight ``W``, weighted target sums ``S`` and ``sum_k S_k^2 / W`` (0 if no weight).

    The last is what a split's :func:`_split_score` is compared with: its gain.
    """
    K = Y.shape[1]
    tot_w = 0.0
    tot_s = np.zeros(K)
    for i in range(n):
        tot_w += u[i]
        for k in range(K):
            tot_s[k] += u[i] * Y[i, k]
    base = 0.0
    if tot_w > 0.0:
        for k in range(K):
            base += tot_s[k] * tot_s[k] / tot_w
    return tot_w, tot_s, base


@jit_inline
def _against(direction, ss, tot_s, sw, tot_w):
    """Whether the split's side means go against ``direction`` (+1: left above right; -1: below).

    Monotonic constraints (one output): scikit-learn's rule, a split whose
    children contradict the constraint of its feature is not a candidate.
    """
    if direction == 0.0 or sw <= 0.0 or tot_w - sw <= 0.0:
        return False
    return direction * ((tot_s[0] - ss[0]) / (tot_w - sw) - ss[0] / sw) < 0.0


@jit_inline
def _no_split(K):
    """What the searches return when no split separates weighted rows."""
    return -1, 0.0, np.zeros(K), np.zeros(K), 0.0


@jit
def best_axis_split(X, sorted_index, sorted_values, u, Y, direction=None, allowed=None):
    """Best hard axis-aligned split of the weighted data by weighted SSE.

    Parameters
    ----------
    X : (n, d) inputs; sorted_index : (d, n) argsort of every column of X;
    sorted_values : (d, n) every column of X in that order (the scan reads
    them in sequence rather than gathering ``X[i, f]`` row by row);
    u : (n,) non-negative sample weights (soft membership x sample weight);
    Y : (n, K) targets (regression values or one-hot classes).
    direction : (d,) or None
        Monotonic constraints (K = 1): splits of feature ``f`` whose left
        mean is above (``direction[f] = 1``) or below (-1) the right one are
        skipped; None: none.
    allowed : (d,) bool or None
        The features the search may split on; None: every one.

    Returns
    -------
    feature : int (-1 if no split separates two distinct values with weight
    on both sides), threshold : float (midpoint), left_mean, right_mean :
    (K,) weighted side means, gain : reduction of the weighted SSE.
    The SSE is sum_k sum_i u_i (y_ik - mean_k)^2; ties in gain go to the
    lowest feature, then the lowest threshold.
    """
    n, d = X.shape
    K = Y.shape[1]
    tot_w, tot_s, base = _node_totals(u, Y, n)
    # u_i and u_i y_ik side by side: the scan's one gathered read per row
    uy = np.empty((n, K + 1))
    for i in range(n):
        uy[i, 0] = u[i]
        for k in range(K):
            uy[i, k + 1] = u[i] * Y[i, k]
    # best gain per feature, then the first maximum
    gains = np.full(d, -np.inf)
    thresholds = np.zeros(d)
    for f in range(d):
        if allowed is not None and not allowed[f]:
            continue
        idx = sorted_index[f]
        values = sorted_values[f]
        sw = 0.0
        ss = np.zeros(K)
        best = -np.inf
        thr = 0.0
        for q in range(n - 1):
            i = idx[q]
            sw += uy[i, 0]
            for k in range(K):
                ss[k] += uy[i, k + 1]
            x_here = values[q]
            x_next = values[q + 1]
            if direction is not None:
                if _against(direction[f], ss, tot_s, sw, tot_w):
                    continue
            g = _split_score(ss, tot_s, sw, tot_w, x_here, x_next)
            if g > best:
                best = g
                thr = 0.5 * (x_here + x_next)
        gains[f] = best - base
        thresholds[f] = thr
    feature = -1
    best_gain = -np.inf
    for f in range(d):
        if gains[f] > best_gain:
            best_gain = gains[f]
            feature = f
    if feature < 0 or not np.isfinite(best_gain):
        return _no_split(K)
    left_mean = np.zeros(K)
    right_mean = np.zeros(K)
    thr = thresholds[feature]
    lw = 0.0
    rw = 0.0
    for i in range(n):
        if X[i, feature] <= thr:
            lw += u[i]
            for k in range(K):
                left_mean[k] += u[i] * Y[i, k]
        else:
            rw += u[i]
            for k in range(K):
                right_mean[k] += u[i] * Y[i, k]
    for k in range(K):
        left_mean[k] /= lw
        right_mean[k] /= rw
    return feature, thr, left_mean, right_mean, max(best_gain, 0.0)


@jit
def best_axis_split_sparse(columns, u, Y, direction=None, allowed=None):
    """:func:`best_axis_split` of sparse input, from its sorted columns (and the masks).

    The columns are :func:`~obliquetrees._training._rows.sorted_columns`'s.

    Per feature, the stored entries are walked in increasing standardised
    value and the rows that store none form one block at ``zero_z[f]``,
    whose weight and target sums are the column totals minus the stored
    entries' (so a feature costs O(its stored entries + K), not O(n)). Same
    criterion, thresholds (midpoints of standardised values) and ties as the
    dense kernel; sums are taken in a different order, so results can
    differ from it in the last bits.
    """
    col_ptr, col_row, col_z, zero_z, n = columns
    d = zero_z.shape[0]
    K = Y.shape[1]
    tot_w, tot_s, base = _node_totals(u, Y, n)
    best_gain = -np.inf
    feature = -1
    best_thr = 0.0
    ss = np.zeros(K)
    zs = np.zeros(K)
    for f in range(d):
        if allowed is not None and not allowed[f]:
            continue
        lo, hi = col_ptr[f], col_ptr[f + 1]
        n_zero = n - (hi - lo)
        # the zero block: column totals minus the stored entries
        zw = tot_w
        for k in range(K):
            zs[k] = tot_s[k]
        for q in range(lo, hi):
            i = col_row[q]
            zw -= u[i]
            for k in range(K):
                zs[k] -= u[i] * Y[i, k]
        sw = 0.0
        ss[:] = 0.0
        best = -np.inf
        thr = 0.0
        q = lo
        zero_done = n_zero == 0
        while q < hi or not zero_done:
            # next group: the zero block goes before the first stored value above it
            if not zero_done and (q >= hi or col_z[q] > zero_z[f]):
                x_here = zero_z[f]
                sw += zw
                for k in range(K):
                    ss[k] += zs[k]
                zero_done = True
            else:
                i = col_row[q]
                x_here = col_z[q]
                sw += u[i]
                for k in range(K):
                    ss[k] += u[i] * Y[i, k]
                q += 1
            if q < hi:
                x_next = col_z[q]
                if not zero_done and zero_z[f] < x_next:
                    x_next = zero_z[f]
            elif not zero_done:
                x_next = zero_z[f]
            else:
                break  # last group: nothing to its right
            if direction is not None:
                if _against(direction[f], ss, tot_s, sw, tot_w):
                    continue
            g = _split_score(ss, tot_s, sw, tot_w, x_here, x_next)
            if g > best:
                best = g
                thr = 0.5 * (x_here + x_next)
        if best - base > best_gain:
            best_gain = best - base
            feature = f
            best_thr = thr
    if feature < 0 or not np.isfinite(best_gain):
        return _no_split(K)
    left_mean = np.zeros(K)
    right_mean = np.zeros(K)
    lw = 0.0
    zw = tot_w
    for k in range(K):
        zs[k] = tot_s[k]
    for q in range(col_ptr[feature], col_ptr[feature + 1]):
        i = col_row[q]
        zw -= u[i]
        for k in range(K):
            zs[k] -= u[i] * Y[i, k]
        if col_z[q] <= best_thr:
            lw += u[i]
            for k in range(K):
                left_mean[k] += u[i] * Y[i, k]
    if zero_z[feature] <= best_thr:  # the rows without a stored entry go left
        lw += zw
        for k in range(K):
            left_mean[k] += zs[k]
    rw = tot_w - lw
    for k in range(K):
        right_mean[k] = (tot_s[k] - left_mean[k]) / rw
        left_mean[k] /= lw
    return feature, best_thr, left_mean, right_mean, max(best_gain, 0.0)
