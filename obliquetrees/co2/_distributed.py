"""One CO2 tree grown node by node from rows that live elsewhere (:mod:`obliquetrees.dask`).

A tree whose rows do not fit on one worker is grown from the top down in
*passes* over the partitions. The tree so far is a :class:`NodeTree`: its
nodes are keyed by their *path* (the root is 1, the children of ``k`` are
``2k`` on the left and ``2k + 1`` on the right), and each is

- a **split**: one hyperplane, fitted as the root of an ordinary CO2 tree
  of depth 1 on a sample of the node's rows;
- a **leaf**: a node that no split divides (or at ``max_depth``);
- a **subtree**: a node with few enough rows that all of them were
  gathered on one worker, which grew the ordinary CO2 tree below it;
- **pending**: a node still to be decided, whose rows a pass routes
  through the splits above it (:meth:`NodeTree.routing_tree`).

:func:`node_rows` is a pass's work on one partition: it routes the tree's
rows, sums their weights and outputs per pending node (exact statistics
of the node, whatever is sampled) and keeps each row of a node with the
probability the node asked for. :meth:`NodeTree.assemble` joins the
splits, leaves and subtrees into one :class:`ObliqueTree`, whose internal
nodes above the subtrees hold the exact weighted value and count of their
rows, and with monotonic constraints orders its leaves by every constrained
split (:func:`~obliquetrees.co2._monotone.order_leaves`; each subtree is
ordered already, and ordering is a monotone map of a subtree's leaves, so
it keeps their order).

Everything is keyed by paths, never by the order in which passes handled
the nodes, so the tree does not depend on how the nodes were scheduled.
Importing this module imports numba (through the traversal kernels).
"""

import numpy as np

from obliquetrees._core._random import generator
from obliquetrees._core.forest import ObliqueForest
from obliquetrees._core.traversal import apply
from obliquetrees._core.tree import ObliqueTree, missing_terms_at

#: Streams of a tree's seed (:func:`~obliquetrees._core._random.generator`):
#: the rows a partition keeps of a node, a node's own growth seed, and the
#: subsample a node's task takes of too many rows. Far from the methods' streams.
SAMPLE_STREAM, GROWTH_STREAM, SUBSAMPLE_STREAM = (1 << 21) + 1, (1 << 21) + 2, (1 << 21) + 3


def node_seed(seed, path):
    """The growth seed of the node ``path`` of the tree of ``seed`` (the root: ``seed``).

    The root keeps the tree's seed, so a tree whose rows all fit in one task
    is the tree the in-memory training step grows from those rows.
    """
    if path == 1:
        return int(seed)
    rng = generator(int(seed), GROWTH_STREAM, int(path))
    return int(rng.integers(np.iinfo(np.int32).max))


def kept_rows(seed, path, partition, n_rows, keep):
    """Which of a partition's ``n_rows`` rows of node ``path`` are kept, each with probability
    ``keep``."""
    if keep >= 1.0:
        return np.ones(n_rows, dtype=bool)
    rng = generator(int(seed), SAMPLE_STREAM, int(path), int(partition))
    return rng.random(n_rows) < keep


def subsample(seed, path, n_rows, size):
    """``size`` of ``n_rows`` rows without replacement, sorted (a node given too many rows)."""
    rng = generator(int(seed), SUBSAMPLE_STREAM, int(path))
    return np.sort(rng.choice(n_rows, size=size, replace=False))


def node_rows(X, y, weights, stat_weights, times, routing, requests, seed, partition, n_outputs):
    """One partition's share of a pass for one tree: statistics and kept rows per requested node.

    Parameters
    ----------
    X : ndarray of float64, shape (n_rows, n_features)
        The partition's rows drawn by the tree (validated), each once.
    y : ndarray of int64, shape (n_rows,), or of float64, shape (n_rows,) or (n_rows, n_outputs)
        Class indices or targets.
    weights : ndarray of float64, shape (n_rows,)
        ``sample_weight`` of the rows (shipped with them).
    stat_weights : ndarray of float64, shape (n_rows,)
        What a row weighs in a node's statistics: its draws times
        ``sample_weight`` times its class's weight (the weight the tree's
        growth gives it).
    times : ndarray of float64, shape (n_rows,)
        How many times the tree's bootstrap drew each row.
    routing : ObliqueForest
        The tree so far, pending nodes as leaves (:meth:`NodeTree.routing_tree`).
    requests : dict of int to tuple of (int, float)
        Node id in ``routing`` of each node served by the pass -> its path and
        the probability of keeping each of its rows (0: statistics only; 1:
        every row). Rows are kept by the node's path, not its id, which
        depends on the nodes decided so far.
    seed, partition : int
    n_outputs : int
        Classes (class indices are counted), or target outputs (summed).

    Returns
    -------
    dict of int to tuple
        Per requested path: ``(statistics, rows)``, where statistics is
        ``(draws, weight, sums, n_rows)`` (``sums``: weighted class counts or
        target sums, shape (n_outputs,); ``n_rows``: distinct rows) and rows
        ``(X, y, weights, times)`` of the kept rows (None when none are kept).
    """
    leaves = apply(routing, X)[:, 0] if X.shape[0] else np.zeros(0, np.int64)
    order = np.argsort(leaves, kind="stable")  # each node's rows, in row order
    ids = np.fromiter(requests, dtype=np.int64, count=len(requests))
    starts = np.searchsorted(leaves[order], ids, side="left")
    stops = np.searchsorted(leaves[order], ids, side="right")
    out = {}
    for (path, keep), start, stop in zip(requests.values(), starts, stops, strict=True):
        rows = order[start:stop]
        w = stat_weights[rows]
        if y.dtype.kind == "f":
            sums = (w[:, None] * y[rows].reshape(rows.shape[0], n_outputs)).sum(axis=0)
        else:
            sums = np.bincount(y[rows], weights=w, minlength=n_outputs).astype(np.float64)
        stats = (float(times[rows].sum()), float(w.sum()), sums, int(rows.shape[0]))
        taken = None
        if keep > 0 and rows.size:
            rows = rows[kept_rows(seed, path, partition, rows.shape[0], keep)]
            taken = (X[rows], y[rows], weights[rows], times[rows]) if rows.size else None
        out[path] = (stats, taken)
    return out


def node_value(sums, weight, classifier):
    """A node's stored value from its statistics: the class distribution or the mean target."""
    if not weight > 0:
        return None  # no training weight: the parent's value (as the in-memory growth does)
    value = sums / weight
    if classifier:
        value = value / value.sum()
    return value


class NodeTree:
    """A CO2 tree under construction, node by node (see the module docstring).

    Missing values: a split or subtree comes in the compact form
    (:class:`~obliquetrees._core.tree.ObliqueTree`: a NaN counts as a
    per-feature value, its rows' mean) only when its rows had no NaN, so
    that value played no part in its growth. The joined tree counts a NaN as
    ``fill``, the weighted mean of every training row (the in-memory
    forest's rule), for all of those, in routing as in the result, and stays
    compact unless some part was grown on rows with NaN; those keep the
    terms they were grown with.

    Parameters
    ----------
    n_features, n_outputs : int
    classifier : bool
    max_depth : int or None
    fill : ndarray of float64, shape (n_features,)
        The weighted mean of every training row, NaN left out.
    """

    def __init__(self, n_features, n_outputs, classifier, max_depth, fill):
        self.n_features, self.n_outputs = int(n_features), int(n_outputs)
        self.classifier, self.max_depth = classifier, max_depth
        self.fill = np.asarray(fill, dtype=np.float64)
        #: path -> dict(kind, depth, value, weight, ...): every node decided or pending
        self.nodes = {1: {"kind": "pending", "depth": 0, "estimate": None, "error": 0.0}}

    def pending(self):
        """Paths of the pending nodes, shallowest first (then by path)."""
        found = [p for p, n in self.nodes.items() if n["kind"] == "pending"]
        return sorted(found, key=lambda p: (self.nodes[p]["depth"], p))

    def at_max_depth(self, path):
        return self.max_depth is not None and self.nodes[path]["depth"] >= self.max_depth

    def _decided(self, path, kind, stats, **fields):
        node = self.nodes[path]
        _, weight, sums, _ = stats
        value = node_value(sums, weight, self.classifier)
        if value is None:  # a parent's value (the root's: zeros, never read by a prediction)
            parent = self.nodes.get(path // 2)
            value = parent["value"] if parent else np.zeros(self.n_outputs)
        node.update(kind=kind, value=value, weight=weight, **fields)

    def set_leaf(self, path, stats):
        self._decided(path, "leaf", stats)

    def set_subtree(self, path, stats, tree):
        self._decided(path, "subtree", stats, tree=tree)

    def set_split(self, path, stats, stump, estimates):
        """Node ``path`` splits as the root of ``stump`` (an ObliqueTree of depth 1).

        ``estimates``: the distinct rows each child is expected to hold, and
        the standard error of that estimate, ``((left, se), (right, se))``.
        """
        take = np.arange(stump.weight_indptr[0], stump.weight_indptr[1])
        compact = stump.missing_fill is not None  # its terms: weight x its rows' mean
        split = (
            stump.weight_index[take],
            stump.weight_value[take],
            None if compact else missing_terms_at(stump, take),
            float(stump.bias[0]),
        )
        self._decided(path, "split", stats, split=split)
        depth = self.nodes[path]["depth"] + 1
        for child, (estimate, error) in zip((2 * path, 2 * path + 1), estimates, strict=True):
            self.nodes[child] = {
                "kind": "pending", "depth": depth, "estimate": estimate, "error": error,
            }  # fmt: skip

    # ------------------------------------------------------------ arrays
    def _top_order(self, with_subtrees):
        """Paths of the nodes stored before any subtree, shallowest first."""
        keep = [p for p, n in self.nodes.items() if with_subtrees or n["kind"] != "subtree"]
        return sorted(keep, key=lambda p: (self.nodes[p]["depth"], p))

    def _top_arrays(self, order, ids):
        """Node arrays of the top nodes (``order``), children by ``ids``, and their splits.

        Returns ``(left, right, indptr, parts, bias)``; ``parts`` lists each
        split's ``(features, weights, terms)`` (terms None: compact).
        """
        n = len(order)
        left, right = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        counts, bias = np.zeros(n, np.int64), np.zeros(n)
        parts = []
        for i, path in enumerate(order):
            node = self.nodes[path]
            if node["kind"] != "split":
                continue
            left[i], right[i] = ids[2 * path], ids[2 * path + 1]
            feature, weight, terms, bias[i] = node["split"]
            counts[i] = feature.shape[0]
            parts.append((feature, weight, terms))
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        return left, right, indptr, parts, bias

    def _weights(self, parts):
        """``(weight_index, weight_value, terms)`` of every part's weights, in order; terms
        are ``{"missing_fill": fill}`` when every part is compact, else ``weight_missing``
        (a compact part's: its weights times :attr:`fill`)."""
        index = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
        weight = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
        if all(p[2] is None for p in parts):
            return index, weight, {"missing_fill": self.fill}
        terms = [w * self.fill[i] if t is None else t for i, w, t in parts]
        return index, weight, {"weight_missing": np.concatenate(terms)}

    def routing_tree(self):
        """``(ObliqueForest, ids)``: the splits so far, every other node a leaf (what
        :func:`node_rows` routes rows with), and the node id of each path in it."""
        order = self._top_order(with_subtrees=True)
        ids = {path: i for i, path in enumerate(order)}
        left, right, indptr, parts, bias = self._top_arrays(order, ids)
        index, weight, terms = self._weights(parts)
        n = len(order)
        depth = np.array([self.nodes[p]["depth"] for p in order], np.int64)
        tree = ObliqueTree(
            left, right, indptr, index, weight, bias, np.zeros((n, 1)), np.zeros(n),
            n_features=self.n_features, depth=depth, **terms,
        )  # fmt: skip
        return ObliqueForest.from_trees([tree]), ids

    def assemble(self, cst=None):
        """The grown tree: the top nodes, then each subtree (ids rise from parent to child).

        ``cst``: monotonic constraints of the features (None: none), which
        order the leaves by every constrained split.
        """
        root = self.nodes[1]
        if root["kind"] == "subtree":
            return root["tree"]
        order = self._top_order(with_subtrees=False)
        ids = {path: i for i, path in enumerate(order)}
        subtrees = sorted(
            (p for p, n in self.nodes.items() if n["kind"] == "subtree"),
            key=lambda p: (self.nodes[p]["depth"], p),
        )
        start = len(order)
        for path in subtrees:
            ids[path] = start
            start += self.nodes[path]["tree"].node_count
        left, right, indptr, weights, bias = self._top_arrays(order, ids)
        parts = {
            "left": [left], "right": [right], "indptr": [indptr[:-1]], "bias": [bias],
            "value": [np.array([self.nodes[p]["value"] for p in order])],
            "nns": [np.array([self.nodes[p]["weight"] for p in order])],
            "depth": [np.array([self.nodes[p]["depth"] for p in order], np.int64)],
        }  # fmt: skip
        n_weights = indptr[-1]
        for path in subtrees:
            tree, offset = self.nodes[path]["tree"], ids[path]
            inner = tree.children_left >= 0
            parts["left"].append(np.where(inner, tree.children_left + offset, -1))
            parts["right"].append(np.where(inner, tree.children_right + offset, -1))
            parts["indptr"].append(tree.weight_indptr[:-1] + n_weights)
            n_weights += tree.weight_indptr[-1]
            compact = tree.missing_fill is not None
            terms = None if compact else tree.weight_missing
            weights.append((tree.weight_index, tree.weight_value, terms))
            parts["bias"].append(tree.bias)
            parts["value"].append(tree.value)
            parts["nns"].append(tree.n_node_samples)
            parts["depth"].append(tree.depth + self.nodes[path]["depth"])
        parts["indptr"].append(np.array([n_weights]))
        joined = {name: np.concatenate(arrays) for name, arrays in parts.items()}
        joined["index"], joined["weight"], terms = self._weights(weights)
        tree = ObliqueTree(
            joined["left"], joined["right"], joined["indptr"], joined["index"], joined["weight"],
            joined["bias"], joined["value"], joined["nns"], n_features=self.n_features,
            depth=joined["depth"], **terms,
        )  # fmt: skip
        tree.check_invariants()  # before a kernel reads it (the forest checks it again)
        if cst is not None:
            _order_by_constraints(tree, np.asarray(cst))
        return tree


def _order_by_constraints(tree, cst):
    """Order the leaves of ``tree`` by every split weighing a constrained feature, in place."""
    from obliquetrees.co2._monotone import order_leaves

    hits = (tree.weight_value != 0) & (cst[tree.weight_index] != 0)
    node_of = np.repeat(np.arange(tree.node_count), tree.weight_counts())
    constrained = np.bincount(node_of, weights=hits, minlength=tree.node_count) > 0
    order_leaves(
        constrained, tree.children_left, tree.children_right, tree.value, tree.n_node_samples
    )
