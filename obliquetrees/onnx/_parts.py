"""The pieces of every exported graph, each the ONNX form of one prediction path.

All arithmetic runs in float64 whatever the input type, as the package's own
kernels do (they read float32 input and compute in float64), so an exported
model routes every row as ``predict`` does, except where a margin is within
rounding of 0 (a matrix product sums in another order than the traversal).

- :func:`hard_sum`: hard routing (the numba traversal), one of two ways.
  :func:`leaf_ranks`: the margins of all oblique splits are one ``MatMul``
  (``Z = X.S + isnan(X).M + b``, so a NaN contributes its weight's
  missing-value term); a standard ``TreeEnsembleRegressor`` then routes on
  these *virtual features* (split ``z <= 0`` goes left, as the package's
  ties) and on the raw features for splits with one weight of +-1
  (converted scikit-learn trees, exact), whose missing values follow the
  split's missing-value term; it returns each tree's leaf rank (exact:
  float32 holds integers below 2**24). :func:`leaf_rows_by_walk`, for deep
  oblique forests: each (row, tree) gathers its current split's weights
  and steps down, level by level. Leaf values are gathered in float64.
- :func:`soft_sum`: soft routing (:mod:`obliquetrees._core.soft`): the
  log-probability of every node, parent's plus ``log sigmoid(+-s z)``,
  level by level, then ``exp`` at the leaves times their values.
- :func:`hinge_decision`: the hinge forest's forward pass
  (:mod:`obliquetrees.hinge._forward`).

Memory of a graph run, in float64 per row: splits + nodes for soft routing,
the oblique splits (at most :data:`MAX_MARGINS`) for the margin product, at
most :data:`GATHER_WIDTH` for a walk or a gather of leaf values.
"""

import numpy as np
from onnx import TensorProto, numpy_helper

from obliquetrees.onnx._graph import ML_DOMAIN

#: ``TreeEnsembleRegressor`` returns float32, exact for node ids below 2**24.
MAX_TREE_NODES = 1 << 24
#: Doubles per row one gather of leaf values may produce (trees x outputs):
#: about 4 KiB per row of intermediate memory, whatever the forest's size.
GATHER_WIDTH = 512
#: Routing walks the trees level by level (:func:`leaf_rows_by_walk`) when a
#: forest has more than this many oblique splits per split a row visits
#: (trees x depth). Measured on letter (``python -m benchmarks onnx``,
#: table "Routing choice"): the margin product was faster at about 10 splits
#: per visit and the walk at about 50.
WALK_RATIO = 20.0
#: ... or more oblique splits than this: the margin product holds one
#: float64 per split and row (32 KiB per row here).
MAX_MARGINS = 4096
#: Groups of at least this many trees take their walk's dot products as a
#: batched ``MatMul`` (see :func:`_row_dots`).
WALK_MATMUL_TREES = 4

DOUBLE = TensorProto.DOUBLE
INT64 = TensorProto.INT64


class DoubleInput:
    """The graph's input in float64, and its NaN parts (built on first use).

    Parameters
    ----------
    g : GraphBuilder
    name : str
        The graph input.
    via_float32 : bool
        Round the input to float32 first (converted scikit-learn models:
        scikit-learn casts prediction input to float32).
    """

    def __init__(self, g, name, via_float32):
        self.g = g
        if via_float32:
            name = g.op("Cast", [name], "x_float32", to=TensorProto.FLOAT)
        self.X = g.op("Cast", [name], "x_double", to=DOUBLE)
        self._nan = self._zeroed = None

    @classmethod
    def of_double(cls, g, name):
        """The input as a float64 matrix the graph already holds (categorical features)."""
        inp = cls.__new__(cls)
        inp.g, inp.X = g, name
        inp._nan = inp._zeroed = None
        return inp

    @property
    def nan(self):
        """``isnan(X)`` (bool)."""
        if self._nan is None:
            self._nan = self.g.op("IsNaN", [self.X], "x_isnan")
        return self._nan

    @property
    def zeroed(self):
        """``X`` with NaN replaced by 0."""
        if self._zeroed is None:
            zero = self.g.const(np.array(0.0), "zero")
            self._zeroed = self.g.op("Where", [self.nan, zero, self.X], "x_nan_zeroed")
        return self._zeroed


# ------------------------------------------------------------------ categories
def category_coordinates(g, name, categories, values):
    """Each row's coordinate of the category in input ``name`` (n, 1); NaN if missing or unseen.

    Mirrors :meth:`~obliquetrees._core.categories.CategoryCoordinates.coordinates`:
    ``str`` categories are looked up by an ``ai.onnx.ml`` ``LabelEncoder``
    (label -> position, -1 if unknown), number categories by an exact float64
    comparison with every category; a position then gathers its coordinate
    from the table with NaN appended (position -1 -> the NaN).
    """
    k = len(categories)
    table = g.const(np.append(values, np.nan), "category_table")
    if categories.dtype.kind == "O":
        position = g.op(
            "LabelEncoder",
            [name],
            "category_position",
            domain=ML_DOMAIN,
            keys_strings=[str(c) for c in categories.tolist()],
            values_int64s=list(range(k)),
            default_int64=-1,
        )
    else:
        x = g.op("Cast", [name], "category_label", to=DOUBLE)
        equal = g.op("Equal", [x, g.const(categories.reshape(1, k), "categories")])
        hits = g.op("Cast", [equal], "category_hits", to=TensorProto.INT32)
        first = g.op("ArgMax", [hits], "category_first", axis=1, keepdims=1)
        found = g.op("GatherElements", [hits, first], "category_found", axis=1)
        found = g.op("Cast", [found], "category_known", to=TensorProto.BOOL)
        minus_one = g.const(np.array(-1, dtype=np.int64), "minus_one")
        position = g.op("Where", [found, first, minus_one], "category_position")
    unknown = g.op("Less", [position, g.const(np.array(0, np.int64), "zero_position")])
    last = g.const(np.array(k, np.int64), "unknown_position")
    index = g.op("Where", [unknown, last, position], "category_index")
    return g.op("Gather", [table, index], "category_coordinate", axis=0)


def assemble_columns(g, parts, order):
    """The float64 matrix whose column ``j`` is column ``order[j]`` of ``parts`` side by side."""
    joined = g.op("Concat", parts, "x_joined", axis=1) if len(parts) > 1 else parts[0]
    order = g.const(np.asarray(order, np.int64), "x_order")
    return g.op("Gather", [joined, order], "x_double", axis=1)


# ------------------------------------------------------------------ margins
def _weight_positions(indptr, nodes):
    """``(column, k)``: stored weights ``k`` of ``nodes``, each with its node's position."""
    starts, stops = indptr[nodes], indptr[nodes + 1]
    counts = stops - starts
    column = np.repeat(np.arange(nodes.shape[0]), counts)
    first_of_column = np.repeat(np.cumsum(counts) - counts, counts)
    k = np.repeat(starts, counts) + np.arange(column.shape[0]) - first_of_column
    return column, k


def split_matrices(trees, nodes_per_tree, n_features):
    """Dense ``S``, ``M`` (n_features x n_splits) and ``b`` of the listed splits.

    Column ``c`` holds the weights, missing-value terms and bias of the
    ``c``-th listed node (trees in order, each tree's nodes as listed).
    """
    n_cols = sum(nodes.shape[0] for nodes in nodes_per_tree)
    S = np.zeros((n_features, n_cols))
    M = np.zeros((n_features, n_cols))
    b = np.zeros(n_cols)
    start = 0
    for tree, nodes in zip(trees, nodes_per_tree, strict=True):
        column, k = _weight_positions(tree.weight_indptr, nodes)
        column += start
        np.add.at(S, (tree.weight_index[k], column), tree.weight_value[k])
        np.add.at(M, (tree.weight_index[k], column), tree.weight_missing[k])
        b[start : start + nodes.shape[0]] = tree.bias[nodes]
        start += nodes.shape[0]
    return S, M, b


def margins(g, inp, S, M, b):
    """``Z = X.S + isnan(X).M + b`` (n_samples x n_splits): ``w . x + b`` of every split."""
    z = g.op("MatMul", [inp.zeroed, g.const(S, "split_weights")], "margins_observed")
    if np.any(M):
        nan = g.op("Cast", [inp.nan], "x_isnan_double", to=DOUBLE)
        z_missing = g.op("MatMul", [nan, g.const(M, "split_missing")], "margins_missing")
        z = g.op("Add", [z, z_missing], "margins_sum")
    return g.op("Add", [z, g.const(b, "split_bias")], "margins")


def internal_nodes(trees):
    """Each tree's internal node ids (ascending)."""
    return [np.flatnonzero(tree.children_left >= 0) for tree in trees]


# ------------------------------------------------------------- hard routing
def _tree_ensemble_nodes(tree, t, offset, virtual_column):
    """``TreeEnsembleRegressor`` node attributes of tree ``t`` (arrays per attribute).

    ``virtual_column[i]`` is the margin column of internal node ``i`` routed
    on its margin (feature ``offset + column`` of the routing input), or -1
    for a one-weight split of weight +-1 routed on the raw feature.
    """
    n = tree.node_count
    left, right = tree.children_left, tree.children_right
    leaf = left < 0
    first = tree.weight_indptr[:-1]
    feature = np.zeros(n, dtype=np.int64)
    threshold = np.zeros(n)
    mode = np.full(n, "BRANCH_LEQ", dtype=object)
    missing_left = np.zeros(n, dtype=np.int64)
    virtual = (virtual_column >= 0) & ~leaf
    axis = ~virtual & ~leaf
    feature[virtual] = offset + virtual_column[virtual]
    k = first[axis]
    w, bias, m = tree.weight_value[k], tree.bias[axis], tree.weight_missing[k]
    feature[axis] = tree.weight_index[k]
    # 1*x + b > 0 (right) is x > -b exactly in IEEE arithmetic; -1*x + b > 0 is x < b
    threshold[axis] = np.where(w > 0, -bias, bias)
    mode[axis] = np.where(w > 0, "BRANCH_LEQ", "BRANCH_GTE")
    # a NaN contributes the missing-value term: the margin is m + b, as summed by the traversal
    missing_left[axis] = (m + bias <= 0.0).astype(np.int64)
    mode[leaf] = "LEAF"
    return {
        "nodes_treeids": np.full(n, t, dtype=np.int64),
        "nodes_nodeids": np.arange(n, dtype=np.int64),
        "nodes_featureids": feature,
        "nodes_modes": mode,
        "nodes_values": threshold,
        "nodes_truenodeids": np.where(leaf, 0, left),
        "nodes_falsenodeids": np.where(leaf, 0, right),
        "nodes_missing_value_tracks_true": missing_left,
        "leaves": np.flatnonzero(leaf),
    }


def _routes_on_raw_feature(tree, nodes):
    """Which of the internal ``nodes`` are one-weight splits of weight exactly +-1."""
    indptr = tree.weight_indptr
    one = indptr[nodes + 1] - indptr[nodes] == 1
    w = np.zeros(nodes.shape[0])
    w[one] = tree.weight_value[indptr[nodes[one]]]
    return one & (np.abs(w) == 1.0)


def leaf_ranks(g, inp, forest, z_all=None):
    """Rank of the leaf each row reaches among its tree's leaves (int64, n_samples x n_trees).

    Leaves are ranked by node id within their tree.

    ``z_all``: the margins of every internal node (:func:`internal_nodes`
    order) when the caller has them already; otherwise the margins of the
    oblique splits are computed here.
    """
    trees = forest.trees
    p = forest.n_features
    inner = internal_nodes(trees)
    too_big = [t.node_count for t in trees if t.node_count >= MAX_TREE_NODES]
    if too_big:
        raise ValueError(
            f"A tree has {too_big[0]} nodes; ONNX export supports trees of fewer than "
            f"{MAX_TREE_NODES} nodes."
        )
    raw = [_routes_on_raw_feature(tree, nodes) for tree, nodes in zip(trees, inner, strict=True)]
    columns, virtual_nodes, start = [], [], 0
    for tree, nodes, on_raw in zip(trees, inner, raw, strict=True):
        col = np.full(tree.node_count, -1, dtype=np.int64)
        if z_all is None:
            routed = nodes[~on_raw]
            col[routed] = start + np.arange(routed.shape[0])
            virtual_nodes.append(routed)
            start += routed.shape[0]
        else:
            col[nodes[~on_raw]] = start + np.flatnonzero(~on_raw)
            start += nodes.shape[0]
        columns.append(col)
    any_raw = any(r.any() for r in raw)
    if z_all is None and start:
        z_all = margins(g, inp, *split_matrices(trees, virtual_nodes, p))
    attrs = {}
    targets = {"target_treeids": [], "target_nodeids": [], "target_ids": [], "target_weights": []}
    offset = p if any_raw else 0
    for t, (tree, col) in enumerate(zip(trees, columns, strict=True)):
        a = _tree_ensemble_nodes(tree, t, offset, col)
        leaves = a.pop("leaves")
        for key, value in a.items():
            attrs.setdefault(key, []).append(value)
        targets["target_treeids"].append(np.full(leaves.shape[0], t, dtype=np.int64))
        targets["target_nodeids"].append(leaves)
        targets["target_ids"].append(np.full(leaves.shape[0], t, dtype=np.int64))
        targets["target_weights"].append(np.arange(leaves.shape[0], dtype=np.float64))
    attrs = {key: np.concatenate(parts) for key, parts in attrs.items()}
    targets = {key: np.concatenate(parts) for key, parts in targets.items()}
    if any_raw and start:
        features = g.op("Concat", [inp.X, z_all], "routing_features", axis=1)
    else:  # raw features only, or no split at all (every tree a single leaf)
        features = z_all if start else inp.X
    ids = g.op(
        "TreeEnsembleRegressor",
        [features],
        "leaf_ranks_float",
        domain=ML_DOMAIN,
        n_targets=len(trees),
        aggregate_function="SUM",
        post_transform="NONE",
        nodes_treeids=attrs["nodes_treeids"].tolist(),
        nodes_nodeids=attrs["nodes_nodeids"].tolist(),
        nodes_featureids=attrs["nodes_featureids"].tolist(),
        nodes_modes=attrs["nodes_modes"].tolist(),
        nodes_values_as_tensor=_double_tensor(attrs["nodes_values"]),
        nodes_truenodeids=attrs["nodes_truenodeids"].tolist(),
        nodes_falsenodeids=attrs["nodes_falsenodeids"].tolist(),
        nodes_missing_value_tracks_true=attrs["nodes_missing_value_tracks_true"].tolist(),
        target_treeids=targets["target_treeids"].tolist(),
        target_nodeids=targets["target_nodeids"].tolist(),
        target_ids=targets["target_ids"].tolist(),
        target_weights_as_tensor=_double_tensor(targets["target_weights"]),
    )
    return g.op("Cast", [ids], "leaf_ranks", to=INT64)


def _double_tensor(values):
    return numpy_helper.from_array(np.ascontiguousarray(values, dtype=np.float64))


def hard_sum(g, inp, forest, z_all=None):
    """Sum over the trees of the reached leaf's value (n_samples x n_outputs, float64).

    Routes with :func:`leaf_ranks` (all oblique margins, then a tree
    ensemble) unless the forest has many more oblique splits than a row
    visits (deep oblique trees), where :func:`leaf_rows_by_walk` is cheaper
    in time and memory; with ``z_all`` given (margins already computed for
    soft routing), always the former.
    """
    leaves = np.flatnonzero(forest.children_left < 0)  # global ids, tree by tree
    if z_all is None and _walk_is_cheaper(forest):
        rows = leaf_rows_by_walk(g, inp, forest, leaves)
    else:
        ranks = leaf_ranks(g, inp, forest, z_all)
        tree_of_leaf = np.searchsorted(forest.node_offset, leaves, side="right") - 1
        offsets = np.searchsorted(tree_of_leaf, np.arange(forest.n_trees))[None, :].astype(np.int64)
        rows = g.op("Add", [ranks, g.const(offsets, "tree_leaf_offset")], "leaf_rows")
    return gather_sum(g, rows, forest.value[leaves], forest.n_trees, hint="leaf")


def _walk_is_cheaper(forest):
    """Whether routing level by level beats computing every oblique margin.

    Per row, the margin product costs one multiply-add per oblique split and
    feature and holds every margin; the walk gathers the weights of each
    split it visits (trees x depth), several times dearer per split, and
    holds one margin per tree (:data:`WALK_RATIO`, :data:`MAX_MARGINS`).
    """
    n_oblique = sum(
        int(np.count_nonzero(~_routes_on_raw_feature(tree, nodes)))
        for tree, nodes in zip(forest.trees, internal_nodes(forest.trees), strict=True)
    )
    visits = forest.n_trees * int(forest.depth.max(initial=0))
    return n_oblique > WALK_RATIO * visits or n_oblique > MAX_MARGINS


def _row_dots(g, w, x, n_trees, shaped):
    """``sum_j w[i, t, j] x[i, j]`` (n, trees) from ``w`` (n, trees, p) and ``x`` (n, p).

    A batched ``MatMul`` with ``x`` as (n, p, 1) when several trees share a
    row; otherwise multiply by ``x`` as (n, 1, p) and sum (onnxruntime's
    batched product of one-row matrices is slow). ``shaped`` caches the
    reshaped ``x`` per (name, axis).
    """
    axis = 2 if n_trees >= WALK_MATMUL_TREES else 1
    if (x, axis) not in shaped:
        shaped[(x, axis)] = g.op("Unsqueeze", [x, g.const(np.array([axis]), "axis")], "x3")
    x3, axis2 = shaped[(x, axis)], g.const(np.array([2]), "axis2")
    if axis == 2:
        return g.op("Squeeze", [g.op("MatMul", [w, x3], "dots3"), axis2], "dots")
    return g.op("ReduceSum", [g.op("Mul", [w, x3], "terms"), axis2], "dots", keepdims=0)


def leaf_rows_by_walk(g, inp, forest, leaves):
    """Row of the leaf-value table (``leaves`` order) each row reaches in each tree.

    Every tree is walked level by level: each (row, tree) gathers the
    weights, missing-value terms and bias of its current node and takes one
    dot product, then moves to a child (a leaf is its own child). Trees go
    in groups of at most :data:`GATHER_WIDTH` gathered weights per row.
    """
    p = forest.n_features
    n_nodes = int(forest.node_offset[-1])
    inner = np.flatnonzero(forest.children_left >= 0)
    S, M, b = split_matrices(forest.trees, internal_nodes(forest.trees), p)
    weights = np.zeros((n_nodes, p))
    weights[inner] = S.T
    missing = np.zeros((n_nodes, p))
    missing[inner] = M.T
    bias = np.zeros(n_nodes)
    bias[inner] = b
    tree_of = np.repeat(np.arange(forest.n_trees), np.diff(forest.node_offset))
    node = np.arange(n_nodes)
    is_leaf = forest.children_left < 0
    start = forest.node_offset[tree_of]
    left = np.where(is_leaf, node, forest.children_left + start)
    right = np.where(is_leaf, node, forest.children_right + start)
    leaf_row = np.zeros(n_nodes, dtype=np.int64)
    leaf_row[leaves] = np.arange(leaves.shape[0])
    depth = int(forest.depth.max(initial=0))
    use_missing = bool(np.any(missing))

    shaped = {}
    nan = g.op("Cast", [inp.nan], "x_isnan_double", to=DOUBLE) if use_missing else None
    names = {
        key: g.const(array, f"walk_{key}")
        for key, array in [("weights", weights), ("bias", bias), ("left", left), ("right", right)]
    }
    if use_missing:
        names["missing"] = g.const(missing, "walk_missing")
    zero = g.const(np.array(0.0), "zero")
    leaf_row = g.const(leaf_row, "leaf_row_of_node")
    group = max(1, GATHER_WIDTH // max(p, 1))
    parts = []
    for t0 in range(0, forest.n_trees, group):
        roots = forest.node_offset[t0 : min(forest.n_trees, t0 + group)]
        # the roots are constants: their margins are one product
        z = g.op("MatMul", [inp.zeroed, g.const(weights[roots].T, "root_weights")], "root_z")
        if use_missing:
            z_nan = g.op("MatMul", [nan, g.const(missing[roots].T, "root_missing")])
            z = g.op("Add", [z, z_nan], "root_z_sum")
        z = g.op("Add", [z, g.const(bias[roots], "root_bias")], "root_margin")
        goes_right = g.op("Greater", [z, zero], "right")
        cur = g.op(
            "Where",
            [
                goes_right,
                g.const(right[roots][None, :], "root_right"),
                g.const(left[roots][None, :], "root_left"),
            ],
            "node",
        )
        for _ in range(depth - 1):
            w = g.op("Gather", [names["weights"], cur], "node_weights", axis=0)  # (n, trees, p)
            z = _row_dots(g, w, inp.zeroed, len(roots), shaped)
            if use_missing:
                m = g.op("Gather", [names["missing"], cur], "node_missing", axis=0)
                z = g.op("Add", [z, _row_dots(g, m, nan, len(roots), shaped)], "node_z")
            z = g.op("Add", [z, g.op("Gather", [names["bias"], cur], axis=0)], "node_margin")
            goes_right = g.op("Greater", [z, zero], "right")
            to_right = g.op("Gather", [names["right"], cur], "to_right", axis=0)
            to_left = g.op("Gather", [names["left"], cur], "to_left", axis=0)
            cur = g.op("Where", [goes_right, to_right, to_left], "node")
        parts.append(g.op("Gather", [leaf_row, cur], "rows", axis=0))
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, "leaf_rows", axis=1)


def gather_sum(g, ids, table, n_trees, weights=None, hint="leaf"):
    """``sum_t table[ids[:, t]] (* weights[:, t])`` (n_samples x n_outputs).

    Trees are gathered in groups of at most :data:`GATHER_WIDTH` values per
    row, so the intermediate tensor stays small for big forests.
    """
    n_out = table.shape[1]
    table_name = g.const(np.ascontiguousarray(table, dtype=np.float64), f"{hint}_values")
    group = max(1, GATHER_WIDTH // max(n_out, 1))
    axis1 = g.const(np.array([1], dtype=np.int64), "axis1")
    total = None
    for t0 in range(0, n_trees, group):
        t1 = min(n_trees, t0 + group)
        idx, w = ids, weights
        if (t0, t1) != (0, n_trees):
            bounds = [g.const(np.array([t0]), "t0"), g.const(np.array([t1]), "t1"), axis1]
            idx = g.op("Slice", [ids, *bounds], f"{hint}_ids_part")
            if weights is not None:
                w = g.op("Slice", [weights, *bounds], f"{hint}_weights_part")
        values = g.op("Gather", [table_name, idx], f"{hint}_gathered", axis=0)
        if w is not None:
            w3 = g.op("Unsqueeze", [w, g.const(np.array([2]), "axis2")], f"{hint}_w3")
            values = g.op("Mul", [values, w3], f"{hint}_weighted")
        part = g.op("ReduceSum", [values, axis1], f"{hint}_part_sum", keepdims=0)
        total = part if total is None else g.op("Add", [total, part], f"{hint}_sum")
    return total


# ------------------------------------------------------------- soft routing
def soft_sum(g, inp, trees, leaf_values, steepness, n_features, z_all=None):
    """Sum over trees and leaves of path probability x leaf value (n_samples x n_outputs).

    ``leaf_values[t]`` is tree ``t``'s (n_nodes, n_outputs) table (leaf rows
    read); ``steepness[t]`` its per-node steepness, or None for 1. Returns
    ``(output, z_all)``, the margins of every internal node before steepness.
    """
    inner = internal_nodes(trees)
    if z_all is None:
        z_all = margins(g, inp, *split_matrices(trees, inner, n_features))
    steep = np.concatenate(
        [
            np.ones(nodes.shape[0]) if s is None else np.asarray(s, dtype=np.float64)[nodes]
            for nodes, s in zip(inner, steepness, strict=True)
        ]
    )
    n_splits = steep.shape[0]
    a = z_all if np.all(steep == 1.0) else g.op("Mul", [z_all, g.const(steep, "steepness")], "a")
    # log sigmoid(+-a) = -(max(+-a, 0) + log(1 + exp(-|a|))), stable for any a
    # (onnxruntime has no float64 Softplus); log(1 + e) for log1p(e) costs at
    # most 1e-16 in a log-probability. Left edges (log sigmoid(-a)), then right.
    zero = g.const(np.array(0.0), "zero")
    neg_a = g.op("Neg", [a], "neg_a")
    tail = g.op("Exp", [g.op("Neg", [g.op("Abs", [a], "abs_a")], "neg_abs_a")], "exp_neg_abs_a")
    log1p = g.op("Log", [g.op("Add", [tail, g.const(np.array(1.0), "one_f")], "one_plus")], "log1p")
    left = g.op("Neg", [g.op("Add", [g.op("Max", [a, zero], "pos_a"), log1p])], "log_left")
    right = g.op(
        "Neg", [g.op("Add", [g.op("Max", [neg_a, zero], "pos_neg_a"), log1p])], "log_right"
    )
    edges = g.op("Concat", [left, right], "log_edges", axis=1)

    # global numbering: nodes of tree t after those of trees < t
    split_col, parent, is_right, depth, is_leaf, values = [], [], [], [], [], []
    node_start = col_start = 0
    for tree, nodes, table in zip(trees, inner, leaf_values, strict=True):
        n = tree.node_count
        col = np.full(n, -1, dtype=np.int64)
        col[nodes] = col_start + np.arange(nodes.shape[0])
        par = np.full(n, -1, dtype=np.int64)
        right = np.zeros(n, dtype=bool)
        par[tree.children_left[nodes]] = nodes + node_start
        par[tree.children_right[nodes]] = nodes + node_start
        right[tree.children_right[nodes]] = True
        split_col.append(col)
        parent.append(par)
        is_right.append(right)
        depth.append(tree.depth)
        is_leaf.append(tree.children_left < 0)
        values.append(np.asarray(table, dtype=np.float64))
        node_start += n
        col_start += nodes.shape[0]
    split_col = np.concatenate(split_col)
    parent, is_right = np.concatenate(parent), np.concatenate(is_right)
    depth, is_leaf = np.concatenate(depth), np.concatenate(is_leaf)
    values = np.concatenate(values)

    position = np.full(depth.shape[0], -1, dtype=np.int64)  # column within its level
    leaf_logp, leaf_rows, logp = [], [], None
    for d in range(1, int(depth.max(initial=0)) + 1):
        level = np.flatnonzero(depth == d)
        position[level] = np.arange(level.shape[0])
        edge = split_col[parent[level]] + np.where(is_right[level], n_splits, 0)
        step = g.op("Gather", [edges, g.const(edge, "edge_cols")], "log_edge", axis=1)
        if d > 1:
            up = g.op(
                "Gather", [logp, g.const(position[parent[level]], "parent_cols")], "logp_up", axis=1
            )
            step = g.op("Add", [up, step], "logp")
        logp = step
        leaves = np.flatnonzero(is_leaf[level])
        if leaves.shape[0]:
            leaf_logp.append(
                g.op("Gather", [logp, g.const(leaves, "leaf_cols")], "logp_leaf", axis=1)
            )
            leaf_rows.append(level[leaves])
    root_leaves = np.flatnonzero(is_leaf & (depth == 0))
    if leaf_logp:
        logp_all = (
            leaf_logp[0]
            if len(leaf_logp) == 1
            else g.op("Concat", leaf_logp, "logp_leaves", axis=1)
        )
        prob = g.op("Exp", [logp_all], "leaf_prob")
        out = g.op(
            "MatMul", [prob, g.const(values[np.concatenate(leaf_rows)], "leaf_table")], "soft"
        )
    else:  # every tree is a single leaf: zeros of the right shape
        zeros = np.zeros((n_features, values.shape[1]))
        out = g.op("MatMul", [inp.zeroed, g.const(zeros, "zeros")], "soft")
    if root_leaves.shape[0]:
        const = values[root_leaves].sum(axis=0)
        out = g.op("Add", [out, g.const(const, "root_leaf_values")], "soft_total")
    return out, z_all


# -------------------------------------------------------------------- hinge
def hinge_decision(g, inp, model, missing, bn_eps):
    """Raw outputs ``F`` of a hinge forest (logits or standardised values).

    ``model`` is the :class:`~obliquetrees.hinge.training.HingeModel`,
    ``missing`` the estimator's :class:`~obliquetrees._core.missing.MissingValues`
    (NaN replaced by its fill, indicator columns appended).
    """
    x = g.op("Where", [inp.nan, g.const(missing.fill, "nan_fill"), inp.X], "x_filled")
    if missing.columns.size:
        flags = g.op("Cast", [inp.nan], "x_isnan_double", to=DOUBLE)
        flags = g.op(
            "Gather", [flags, g.const(missing.columns, "indicator_cols")], "indicators", axis=1
        )
        x = g.op("Concat", [x, flags], "x_augmented", axis=1)
    z = g.op("Sub", [x, g.const(model.x_mean, "x_mean")], "x_centred")
    z = g.op("Div", [z, g.const(model.z_scale(), "z_scale")], "z")
    h = g.op("MatMul", [z, g.const(np.ascontiguousarray(model.A.T), "hinge_A")], "h")
    h = g.op("Sub", [h, g.const(model.bn_mean, "bn_mean")], "h_centred")
    u = g.op("Div", [h, g.const(np.sqrt(model.bn_var + bn_eps), "bn_sd")], "u")

    M, n_thr = model.thr.shape
    L = model.W.shape[1]
    base = (np.arange(M, dtype=np.int64) * n_thr)[None, :]
    leaf = node = rstar = None
    for level in range(int(model.depth)):
        if model.is_fern or level == 0:  # every tree tests the same slot: constants
            slot = level if model.is_fern else 0
            feat = g.op("Gather", [u, g.const(model.feat[:, slot], "feat")], "u_at", axis=1)
            r = g.op("Sub", [feat, g.const(model.thr[:, slot], "thr")], "r")
        else:
            flat = g.op("Add", [node, g.const(base, "tree_base")], "slot")
            f = g.op("Gather", [g.const(model.feat.ravel(), "feat_all"), flat], "feat", axis=0)
            feat = g.op("GatherElements", [u, f], "u_at", axis=1)
            t = g.op("Gather", [g.const(model.thr.ravel(), "thr_all"), flat], "thr", axis=0)
            r = g.op("Sub", [feat, t], "r")
        if rstar is None:
            rstar = r
        else:  # the first margin of smallest |r| on the path (Algorithm 3)
            closer = g.op(
                "Less", [g.op("Abs", [r], "abs_r"), g.op("Abs", [rstar], "abs_rstar")], "closer"
            )
            rstar = g.op("Where", [closer, r, rstar], "rstar")
        bit = g.op("Cast", [g.op("Greater", [r, g.const(np.array(0.0), "zero")], "gt")], to=INT64)
        one = g.const(np.array(1, dtype=np.int64), "one")
        if leaf is None:
            leaf = bit
            node = g.op("Add", [bit, one], "node")
            continue
        two = g.const(np.array(2, dtype=np.int64), "two")
        leaf = g.op("Add", [g.op("Mul", [leaf, two], "leaf2"), bit], "leaf")
        if not model.is_fern:  # heap order: children of v are 2v + 1 and 2v + 2
            node = g.op("Add", [g.op("Mul", [node, two], "node2"), g.op("Add", [bit, one])], "node")
    weight = g.op("Abs", [rstar], "abs_rstar_final")
    ids = g.op("Add", [leaf, g.const((np.arange(M, dtype=np.int64) * L)[None, :], "leaf_base")])
    table = model.W.reshape(M * L, model.W.shape[2])
    out = (
        gather_sum(g, ids, table, M, weights=weight, hint="hinge") if model.head == "sum" else None
    )
    if model.head == "linear":
        vals = g.op("Gather", [g.const(table[:, 0], "hinge_leaf"), ids], "tree_leaf", axis=0)
        trees = g.op("Mul", [vals, weight], "tree_out")
        out = g.op("MatMul", [trees, g.const(np.ascontiguousarray(model.Q.T), "head_Q")], "head")
        out = g.op("Add", [out, g.const(model.q, "head_q")], "logits")
    return out
