"""Monotonic constraints of the hinge forests: the model's structure and its projections.

Derivation (the estimators' Notes say the same for users). Along a
constrained direction (raw feature ``x_j`` moved by ``c_j``, others fixed),
every hinge feature ``u_h = (A_h . z - bn_mean_h) / sd_h`` moves linearly
with slope sign ``dir_h`` (``z`` is ``x`` standardised by a positive scale,
``sd_h > 0``). A hinge tree outputs ``|r*| w_leaf``: it is *continuous*
(the output is 0 on every decision boundary, where the smallest margin is 0)
and, inside a leaf's cell, ``w_leaf min_d |r_d|`` over the path's decisions
``d``, where ``|r_d| = s_d (u_{f_d} - t_d)`` with ``s_d = +1`` if the path
goes right at ``d``, ``-1`` if left. So the tree is monotone along the
direction if, for every leaf and every decision on its path,
``w_leaf s_d dir_{f_d} >= 0``: then every ``|r_d|`` moves one way, their
minimum too, times a weight of the matching sign; a continuous function
monotone on every cell is monotone. That is the exact sufficient condition
this module enforces; it is also necessary wherever each decision of a path
is the smallest margin somewhere in the cell (the generic case). Sums over
trees, a non-negative head (``head="linear"``: the head's weight of every
tree, or its difference between the two classes, kept ``>= 0``) and the
softmax of two logits keep it.

The condition forces a leaf to 0 as soon as its path turns both ways at
decisions on hinge features that move along the direction, so with a dense
layer (every hinge feature moves with every constrained input) nearly every
leaf of a deep tree would be 0. Our restriction: the hinge features are split
into a *monotone pool* and free ones; the decisions of every tree's (fern's)
first :data:`POOL_LEVELS` levels test pool features and every other decision a
free one. Pool features have ``c_j A_hj >= 0`` (they rise along every
constrained direction), free ones ``A_hj = 0`` on the constrained columns (and
any weights on the others). With one pool level, a tree's leaves under the
root's right child take weights ``>= 0``, under its left child ``<= 0``, and
are otherwise free: constrained inputs act through each tree's root margin,
the free inputs everywhere. With ``k`` levels, only the leaves below the ``k``
pool decisions' all-right path (``>= 0``) and all-left path (``<= 0``) can be
non-zero: the constrained inputs act through an intersection of ``k`` oblique
half-spaces (on both sides), a finer monotone region than one margin, at the
price of the other leaves, kept at 0. The binary classifiers' validation runs
chose 4 levels on three seeds and 3 on ten, the regressors' 1 on both. Without
the linear layer (``n_hinge_features=None``) the hinge features are the
inputs: the pool is the constrained inputs (``dir = c``), and if every input
is constrained, deeper decisions use them too and the condition zeroes the
leaves it must. Projections after every optimiser step (projected
Adam/AdaGrad/SGD) keep the condition; the missing-value indicator inputs are
free.
"""

import numpy as np

from obliquetrees.hinge import _kernels as K

#: Fraction of the learnt hinge features in the monotone pool (at least one);
#: chosen on validation parts (``benchmarks/monotonic_defaults.py``, family
#: ``hinge-pool``; 0.5 before; chosen again at the regressor's ``"auto"``
#: defaults).
POOL_FRACTION = 0.9

#: Levels of every tree (fern) whose decisions test pool features (the others
#: test free ones), per task; chosen on validation parts
#: (``benchmarks/monotonic_defaults.py``, families ``hinge-pool-levels`` and
#: ``hinge-pool-levels-classifier``; 1 for both before; the regressor's
#: chosen again at its ``"auto"`` defaults).
POOL_LEVELS = {"regression": 1, "classification": 3}


def monotone_directions(cst, n_hinge, learn_A):
    """``dir`` (int8, one per hinge feature): how each moves along the constrained directions.

    1 for the pool of a learnt layer (its first ``POOL_FRACTION`` of
    features), ``c`` itself without the layer (hinge feature = input), 0 free.
    """
    if not learn_A:
        return np.asarray(cst, dtype=np.int8).copy()
    direction = np.zeros(n_hinge, dtype=np.int8)
    direction[: max(1, int(n_hinge * POOL_FRACTION))] = 1
    return direction


def draw_structure(feat, direction, rng, is_fern, levels):
    """Redraw ``feat`` in place: the first ``levels`` levels from the pool, the others
    from the free features.

    A tree's first ``k`` levels are its first ``2**k - 1`` decisions (breadth
    first), a fern's its first ``k``; at most every decision. With no free
    feature, the other decisions draw from every feature.
    """
    pool = np.flatnonzero(direction)
    free = np.flatnonzero(direction == 0)
    if free.size == 0:
        free = np.arange(direction.shape[0])
    n_trees, n_decisions = feat.shape
    n_pool = min(levels if is_fern else 2**levels - 1, n_decisions)
    feat[:, :n_pool] = pool[rng.integers(0, pool.size, size=(n_trees, n_pool))]
    rest = n_decisions - n_pool
    feat[:, n_pool:] = free[rng.integers(0, free.size, size=(n_trees, rest))]


def leaf_rules(feat, direction, depth, is_fern):
    """The sign rule (``kernels.RULE_*``) of every leaf, shape (n_trees, 2**depth), int8.

    Leaf ``l``'s path turns right at level ``i`` iff bit ``depth - 1 - i`` of
    ``l`` is set; a decision on hinge feature ``f`` makes ``|r|`` rise along
    the constrained directions iff ``dir_f s > 0``.
    """
    M = feat.shape[0]
    leaves = np.arange(2**depth)
    rises = np.zeros((M, leaves.size), dtype=bool)
    falls = np.zeros((M, leaves.size), dtype=bool)
    node = np.zeros(leaves.size, dtype=np.int64)
    for level in range(depth):
        right = (leaves >> (depth - 1 - level)) & 1
        decision = np.full(leaves.size, level) if is_fern else node
        moves = direction[feat[:, decision]] * (2 * right - 1)[None, :]  # (M, L)
        rises |= moves > 0
        falls |= moves < 0
        node = 2 * node + 1 + right
    rule = np.full((M, leaves.size), K.RULE_FREE, dtype=np.int8)
    rule[rises] = K.RULE_UP
    rule[falls] = K.RULE_DOWN
    rule[rises & falls] = K.RULE_ZERO
    return rule


def layer_rules(cst, direction):
    """The sign rule of every weight of the linear layer, shape (H, p), int8.

    Constrained columns ``j``: ``c_j A_hj >= 0`` on pool rows, 0 on free
    rows; other columns free.
    """
    rule = np.full((direction.shape[0], cst.shape[0]), K.RULE_FREE, dtype=np.int8)
    constrained = cst != 0
    rule[:, constrained] = np.where(direction[:, None] > 0, cst[constrained][None, :], K.RULE_ZERO)
    return rule


def kernel_rules(model):
    """``mono`` of :func:`~obliquetrees.hinge._kernels.train_epoch` for ``model``."""
    cst = model.monotonic_cst
    if cst is None:  # placeholders of the right types, never read
        return False, np.zeros((1, 1), dtype=np.int8), np.zeros((1, 1), dtype=np.int8)
    direction = model.monotone_dir
    leaf = leaf_rules(model.feat, direction, model.depth, model.is_fern)
    return True, leaf, layer_rules(cst, direction)


def project(model):
    """Project every parameter of a constrained ``model`` (in place; new and loaded models)."""
    mono = kernel_rules(model)
    if not mono[0]:
        return
    linear = model.head == "linear"
    Q = model.Q if linear else np.zeros((1, 1))
    K.project_dense(model.W, Q, model.A, mono, linear, model.learn_A)
