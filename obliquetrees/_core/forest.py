"""Packed storage of several :class:`ObliqueTree` for whole-forest kernels.

An :class:`ObliqueForest` concatenates the arrays of its trees and keeps
per-tree offsets, so that one numba kernel can evaluate every tree of a forest
without a Python loop per tree. Children and weight pointers stay *local* to
their tree (each tree's ``weight_indptr`` starts at 0), which makes every tree
a zero-copy view into the packed arrays (:attr:`ObliqueForest.trees`).

Layout for tree ``t``:

- nodes ``node_offset[t]:node_offset[t + 1]`` of ``children_left``,
  ``children_right``, ``bias``, ``value``, ``n_node_samples``, ``depth``;
- pointers ``node_offset[t] + t : node_offset[t + 1] + t + 1`` of
  ``weight_indptr`` (one more entry than nodes);
- weights ``weight_offset[t]:weight_offset[t + 1]`` of ``weight_value`` and
  ``weight_missing`` (and of ``weight_index`` in its explicit form; when the
  full rows' ids are implicit, see :mod:`obliquetrees._core.feature_ids`,
  each tree's stored ids follow the previous tree's);
- in the compact form of the missing-value terms (see
  :class:`~obliquetrees._core.tree.ObliqueTree`) one ``missing_fill`` shared by
  every tree instead of ``weight_missing``.
"""

import numpy as np

from obliquetrees._core.feature_ids import (
    FeatureIds,
    id_starts,
    is_implicit,
    keeps_full_row_ids,
    node_weight_counts,
    stored_feature_ids,
)
from obliquetrees._core.tree import (
    _NODE_ARRAYS,
    _WEIGHT_ARRAYS,
    FORMAT_VERSION,
    INDEX_DTYPE,
    ObliqueTree,
    _MissingTerms,
    upgrade_state,
)
from obliquetrees._core.validation import MAX_TOTAL_NODES, check_forest_arrays

#: One routing step's data in 32 bytes: children (global ids, -1 at leaves),
#: the bias and the node's first weight (feature, value) inline, so that an
#: axis-aligned step reads one record; ``n_extra`` further weights follow at
#: ``extra_start[node]`` in the container's weight values, their feature ids
#: at ``extra_index[node]`` in the kernels' id array. At a leaf, ``feature`` holds the
#: leaf's row in the compact leaf-value table, and a leaf whose value row has
#: exactly one nonzero entry (a pure leaf of a fully grown classifier, any
#: single-output regression leaf) also carries that entry inline: its column in
#: ``right`` and its value in ``weight`` (``right`` is -1 at other leaves).
ROUTING_NODE = np.dtype(
    [
        ("left", np.int32),
        ("right", np.int32),
        ("feature", np.int32),
        ("n_extra", np.int32),
        ("bias", np.float64),
        ("weight", np.float64),
    ]
)


#: Bytes of consumed tree arrays after which packing hands freed memory back
#: to the operating system (see :func:`return_freed_memory`).
_TRIM_EVERY_BYTES = 8 << 20


def _pack(trees, name, consume, read=getattr):
    """Concatenate array ``name`` of every tree (``read(tree, name)``) into one new array.

    With ``consume``, each tree's array is released as soon as it is copied
    and the freed memory is returned to the operating system every few MiB,
    so packing a fresh forest never holds two full copies of an array in
    resident memory (the leaf-value table is most of a forest's memory).
    """
    parts = [read(tree, name) for tree in trees]
    out = np.empty(
        (sum(part.shape[0] for part in parts),) + parts[0].shape[1:], dtype=np.result_type(*parts)
    )
    start = freed = 0
    for i, tree in enumerate(trees):
        stop = start + parts[i].shape[0]
        out[start:stop] = parts[i]
        start = stop
        if consume:
            freed += parts[i].nbytes
            parts[i] = None
            setattr(tree, name, None)
            if freed >= _TRIM_EVERY_BYTES:
                return_freed_memory()
                freed = 0
    if consume and freed:
        return_freed_memory()
    return out


def return_freed_memory():
    """Ask glibc to give free heap pages back to the OS (no-op elsewhere).

    Trees are built in worker threads as many sub-MiB arrays; glibc keeps
    such freed chunks in its arenas, so without this the resident size after
    packing would still count every consumed tree. ``malloc_trim`` releases
    whole free pages (about a millisecond per call).
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes
            import ctypes.util

            _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
        except (OSError, AttributeError, TypeError):  # not glibc: nothing to do
            pass
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


class ObliqueForest:
    """Several oblique trees packed into concatenated arrays.

    Build it with :meth:`from_trees`. All trees must share ``n_features`` and
    ``n_outputs``.

    Attributes
    ----------
    n_trees : int
    n_features : int
    n_outputs : int
    node_offset : ndarray of int64, shape (n_trees + 1,)
    weight_offset : ndarray of int64, shape (n_trees + 1,)
    trees : list of ObliqueTree
        Zero-copy views of the individual trees.
    weight_missing : ndarray of float64, shape (n_weights,)
        The missing-value terms; in the compact form (``missing_fill`` not
        None) computed on each access.
    """

    weight_index = FeatureIds()
    weight_missing = _MissingTerms()

    def __init__(self, arrays, node_offset, weight_offset, n_features):
        for name in _NODE_ARRAYS + _WEIGHT_ARRAYS:
            setattr(self, name, arrays.get(name))
        self.missing_fill = arrays.get("missing_fill")
        self.node_offset = np.ascontiguousarray(node_offset, dtype=INDEX_DTYPE)
        self.weight_offset = np.ascontiguousarray(weight_offset, dtype=INDEX_DTYPE)
        self.n_features = int(n_features)
        index = self.__dict__["weight_index"]
        if isinstance(index, np.ndarray):
            try:
                self.weight_index = stored_feature_ids(self.weight_counts(), index, self.n_features)
            except (ValueError, IndexError):
                pass  # malformed pointers: kept as given, for check_invariants to report
        self.format_version = FORMAT_VERSION
        self._trees = None
        self._routing = None
        self._derived = {}

    def check_invariants(self, what="ObliqueForest"):
        """Raise ``ValueError`` if the packed arrays do not form valid trees.

        The checks of :meth:`ObliqueTree.check_invariants` for every tree at
        once, plus the offsets (vectorised over all trees).

        Parameters
        ----------
        what : str, default="ObliqueForest"
            Name of the container, for the message.
        """
        check_forest_arrays(
            self.__dict__, self.node_offset, self.weight_offset, self.n_features, what
        )

    @classmethod
    def from_trees(cls, trees, consume=False, validate=True):
        """Pack a sequence of trees (a single tree is wrapped without copying).

        Parameters
        ----------
        trees : sequence of ObliqueTree
        consume : bool, default=False
            Release each tree's arrays as soon as they are packed, so that
            packing a freshly trained forest holds the unpacked trees plus one
            packed array at a time, not two copies of the forest. The trees are
            unusable afterwards.
        validate : bool, default=True
            Check the packed arrays (:meth:`check_invariants`); only the
            package's own code passes False, for trees it has just built or
            already checked.

        Returns
        -------
        forest : ObliqueForest
        """
        trees = list(trees)
        if not trees:
            raise ValueError("A forest needs at least one tree.")
        n_features = {t.n_features for t in trees}
        n_outputs = {t.n_outputs for t in trees}
        if len(n_features) != 1 or len(n_outputs) != 1:
            raise ValueError("All trees of a forest must share n_features and n_outputs.")
        node_counts = [t.node_count for t in trees]
        if sum(node_counts) > MAX_TOTAL_NODES:
            raise ValueError(f"A forest may hold at most {MAX_TOTAL_NODES} nodes in total.")
        weight_counts = [t.weight_value.shape[0] for t in trees]
        node_offset = np.concatenate([[0], np.cumsum(node_counts)])
        weight_offset = np.concatenate([[0], np.cumsum(weight_counts)])
        # compact terms stay compact when every tree has the same fill
        fill = trees[0].missing_fill
        compact = fill is not None and all(
            t.missing_fill is not None and np.array_equal(t.missing_fill, fill) for t in trees
        )
        names = tuple(name for name in _NODE_ARRAYS + _WEIGHT_ARRAYS if name != "weight_missing")
        if not compact:
            # first: a tree in the compact form (its own fill) computes its terms from
            # its weights and ids, which packing with ``consume`` releases
            names = ("weight_missing", *names)
        # the trees' stored ids are packed as they are when every tree with a
        # full row stores the implicit form (a tree can only keep a full row's
        # ids when that row is not 0 .. n_features - 1: then all go explicit)
        implicit = not any(
            keeps_full_row_ids(t.weight_counts(), vars(t)["weight_index"], t.n_features)
            for t in trees
        )

        def read(tree, name):
            return vars(tree)[name] if implicit and name == "weight_index" else getattr(tree, name)

        if len(trees) == 1:
            arrays = {name: read(trees[0], name) for name in names}
        else:
            arrays = {name: _pack(trees, name, consume, read) for name in names}
        if compact:
            arrays["missing_fill"] = fill
        forest = cls(arrays, node_offset, weight_offset, n_features.pop())
        if validate:
            forest.check_invariants()
        return forest

    @property
    def n_trees(self):
        """Number of trees."""
        return int(self.node_offset.shape[0] - 1)

    @property
    def n_outputs(self):
        """Number of columns of ``value``."""
        return int(self.value.shape[1])

    @property
    def nbytes(self):
        """Bytes of the stored arrays (compact missing-value terms: their fill only)."""
        names = _NODE_ARRAYS + _WEIGHT_ARRAYS + ("missing_fill", "node_offset", "weight_offset")
        return sum(a.nbytes for a in (self.__dict__.get(n) for n in names) if a is not None)

    def weight_counts(self):
        """Number of stored weights of every node, shape (n_nodes,)."""
        return node_weight_counts(self.weight_indptr, self.node_offset)

    @property
    def trees(self):
        """The individual trees, as views of the packed arrays."""
        if self._trees is None:
            # where each tree's stored ids start: its root's
            starts = id_starts(self.weight_counts(), vars(self)["weight_index"], self.n_features)
            index_offset = starts[self.node_offset]
            self._trees = [self._tree_view(t, index_offset) for t in range(self.n_trees)]
        return self._trees

    def _tree_view(self, t, index_offset):
        n0, n1 = self.node_offset[t], self.node_offset[t + 1]
        w0, w1 = self.weight_offset[t], self.weight_offset[t + 1]
        return ObliqueTree(
            self.children_left[n0:n1],
            self.children_right[n0:n1],
            self.weight_indptr[n0 + t : n1 + t + 1],
            vars(self)["weight_index"][index_offset[t] : index_offset[t + 1]],
            self.weight_value[w0:w1],
            self.bias[n0:n1],
            self.value[n0:n1],
            self.n_node_samples[n0:n1],
            n_features=self.n_features,
            depth=self.depth[n0:n1],
            **(
                {"missing_fill": self.missing_fill}
                if self.missing_fill is not None
                else {"weight_missing": self.weight_missing[w0:w1]}
            ),
        )

    def routing_arrays(self):
        """The traversal kernels' layout.

        ``(roots, nodes, extra_start, extra_index, weights, leaf_value)``.
        Everything an axis-aligned routing step reads sits in one 32-byte
        ``nodes`` record (see ``ROUTING_NODE``), instead of one cache line per
        container array; a node's further weights are
        ``weights[1][extra_start[node]:]`` on the features
        ``weights[0][extra_index[node]:]``. ``weights`` are the container's
        own ``(ids, values)``, not copied (the layout costs no memory per
        weight): explicit ids are read in place (``extra_index`` is then
        ``extra_start``); implicit ones (:mod:`obliquetrees._core.feature_ids`)
        are the few stored ids followed by ``0 .. n_features - 1``, which
        every full row reads. ``leaf_value``
        holds the ``value`` rows of the leaves only, so accumulating leaf
        values touches half the memory of the full table (which also holds
        every internal node's value). Derived from the container on first
        use and cached (never pickled).
        """
        if self._routing is None:
            self._routing = _routing_layout(self)
        return self._routing

    def derived(self, key, build):
        """Data derived from the arrays by ``build(self)``, built once and kept.

        For views that other ``_core`` modules build from a forest (its
        decision machine, its cost statistics): the forest is never modified
        in place, so they stay valid for its lifetime. Never pickled.

        Parameters
        ----------
        key : str
        build : callable
            ``build(forest)`` returns the data; called on the first request.
        """
        found = self._derived.get(key)
        if found is None:
            found = self._derived[key] = build(self)
        return found

    def __getstate__(self):
        state = dict(self.__dict__)
        # derived data is rebuilt on demand, never pickled
        state["_trees"] = None
        state["_routing"] = None
        state["_derived"] = {}
        return state

    def __setstate__(self, state):
        state = upgrade_state(state, "ObliqueForest")
        # derived data is never taken from a pickle, and the kernels trust the arrays
        state.update(_trees=None, _routing=None, _derived={})
        check_forest_arrays(
            state,
            state.get("node_offset"),
            state.get("weight_offset"),
            state.get("n_features"),
            "unpickled ObliqueForest",
        )
        self.__dict__.update(state)

    def __repr__(self):
        return (
            f"ObliqueForest(n_trees={self.n_trees}, n_features={self.n_features}, "
            f"n_outputs={self.n_outputs}, node_count={self.children_left.shape[0]})"
        )


def _routing_layout(forest):
    n_nodes = forest.children_left.shape[0]
    tree_of_node = np.repeat(np.arange(forest.n_trees), np.diff(forest.node_offset))
    nodes = np.zeros(n_nodes, dtype=ROUTING_NODE)
    for name, children in (("left", forest.children_left), ("right", forest.children_right)):
        nodes[name] = np.where(children == -1, -1, children + forest.node_offset[tree_of_node])
    pointer_rows = np.arange(n_nodes) + tree_of_node  # each tree has one extra pointer
    start = forest.weight_indptr[pointer_rows] + forest.weight_offset[tree_of_node]
    count = np.diff(forest.weight_indptr)[pointer_rows]
    has_weight = count > 0
    stored = vars(forest)["weight_index"]
    if is_implicit(stored, forest.weight_value.shape[0]):
        full = count == forest.n_features
        id_start = id_starts(count, stored, forest.n_features)[:-1]
        explicit = has_weight & ~full
        nodes["feature"][explicit] = stored[id_start[explicit]]  # full rows: feature 0
        ids = np.concatenate([stored, np.arange(forest.n_features, dtype=stored.dtype)])
        extra_index = np.where(full, stored.shape[0], id_start) + 1
    else:
        nodes["feature"][has_weight] = stored[start[has_weight]]
        ids, extra_index = stored, None
    nodes["weight"][has_weight] = forest.weight_value[start[has_weight]]
    # -1 marks a split without weights (its margin is its bias), so that no
    # weight slot is read for it, not even a missing-value term
    nodes["n_extra"] = count - 1
    nodes["bias"] = forest.bias
    leaves = np.flatnonzero(forest.children_left == -1)
    nodes["feature"][leaves] = np.arange(leaves.shape[0])
    leaf_value = np.ascontiguousarray(forest.value[leaves])
    # Adding a row's zeros to the running sums changes no bit (sums start at
    # +0.0 and can never become -0.0), so a leaf with one nonzero entry needs
    # only that entry: kept in its record, the prediction of a pure leaf reads
    # no separate value row (a 26-class letter forest: 208 bytes per step less).
    nonzero = leaf_value != 0.0
    single = np.flatnonzero(nonzero.sum(axis=1) == 1)
    column = np.argmax(nonzero[single], axis=1)
    nodes["right"][leaves[single]] = column
    nodes["weight"][leaves[single]] = leaf_value[single, column]
    extra_start = start + 1
    extra_index = extra_start if extra_index is None else extra_index
    weights = (_kernel_array(ids), _kernel_array(forest.weight_value))
    return forest.node_offset, nodes, extra_start, extra_index, weights, leaf_value


def _kernel_array(array):
    """``array`` itself when it is a writable contiguous ndarray, else such a copy.

    A memory-mapped forest's arrays are read-only ``np.memmap``s: the kernels
    are compiled (and shipped) for plain writable arrays, so those get a copy
    rather than a second compilation.
    """
    if type(array) is np.ndarray and array.flags.writeable and array.flags.c_contiguous:
        return array
    return np.array(array, order="C")
