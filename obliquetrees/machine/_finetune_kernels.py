"""numba kernel of decision-machine fine-tuning (:mod:`obliquetrees.machine._finetune`).

The backward pass of the relaxed forest mixture: responsibilities, ``log p``
and the gradient with respect to ``sigma`` of the margins, pushed through the
normalised template matrix ``B~``. Rows in parallel, each row written by one
iteration, so results do not depend on the number of threads. The forward
pass (soft leaf weights) is prediction, in :mod:`obliquetrees._core._machine_kernels`.
"""

import numpy as np

from obliquetrees._core._jit import jit_parallel, prange


@jit_parallel
def relaxed_backward(
    E, V, y, sw, t_indptr, t_index, t_value, leaf_offset, inv_temperature, R, GH, logp
):
    """Responsibilities, ``log p`` and ``d(-sum sw log p)/d Hs`` of the forest mixture.

    The forest's relaxed class probability is ``p(y|x) = mean_t sum_l
    E[t, l] V[t, l, y]``. For each row: ``R[l] = E[l] V[l, y] / sum E V[:, y]``
    (responsibility of leaf ``l`` over all trees), ``logp = log p`` and the
    score gradient ``GZ[l] = -sw / temperature * (R[l] - E[l] * sum_{l' in
    tree(l)} R[l'])``, pushed through the template: ``GH = GZ B~``
    (overwritten). Rows whose likelihood is 0 get no gradient and no
    responsibility.
    """
    n = E.shape[0]
    n_trees = leaf_offset.shape[0] - 1
    L = E.shape[1]
    m = GH.shape[1]
    for r in prange(n):
        for j in range(m):
            GH[r, j] = 0.0
        yr = y[r]
        total = 0.0
        for leaf in range(L):
            q = E[r, leaf] * V[leaf, yr]
            R[r, leaf] = q
            total += q
        if total <= 0.0:
            logp[r] = -np.inf
            for leaf in range(L):
                R[r, leaf] = 0.0
            continue
        logp[r] = np.log(total / n_trees)
        for leaf in range(L):
            R[r, leaf] /= total
        c = -sw[r] * inv_temperature
        for t in range(n_trees):
            a = leaf_offset[t]
            b = leaf_offset[t + 1]
            rt = 0.0
            for leaf in range(a, b):
                rt += R[r, leaf]
            for leaf in range(a, b):
                g = c * (R[r, leaf] - E[r, leaf] * rt)
                for k in range(t_indptr[leaf], t_indptr[leaf + 1]):
                    GH[r, t_index[k]] += g * t_value[k]
