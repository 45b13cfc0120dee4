"""The training targets of every leaf of a forest: what quantile regression forests need.

A quantile regression forest (Meinshausen, 2006) predicts the conditional
distribution of ``y`` at ``x`` as a weighted empirical distribution of the
training targets: tree ``t`` gives weight ``1 / n_trees`` to the leaf ``x``
reaches, shared among the training rows of that leaf in proportion to their
weights. The forest's splits are all it needs besides the targets, so the
container holds, per leaf, the targets and weights of the rows that trained
it, and no copy of ``X``:

- ``leaf_ptr`` (int64, ``n_nodes + 1``): the rows of global node ``g`` (the
  packed forest's node ids, ``node_offset[t] + local id``) are the entries
  ``leaf_ptr[g]:leaf_ptr[g + 1]``; a split node holds none, nor does a leaf
  that no weighted row reached;
- ``targets`` (float64, ``(n_outputs, n_entries)``): each output's targets,
  sorted (ascending) within each leaf, so one leaf's distribution is read in
  order;
- ``weights`` (float64, same shape, > 0): the row weights in the order of
  their output's targets: ``sample_weight`` times the row's bootstrap count
  in the tree. A row drawn several times is one entry of that weight.

:meth:`LeafTargets.from_rows` builds it from the rows each tree saw; the
prediction kernel is :mod:`obliquetrees._core.quantiles`. This module
imports numpy only (no numba), so a model unpickles without compiling.
"""

import numpy as np

from obliquetrees._core.validation import (
    INDEX_DTYPE,
    VALUE_DTYPE,
    check_array,
    check_finite,
    check_int,
)

#: Version of the saved state.
FORMAT_VERSION = 1


class LeafTargets:
    """Training targets and weights of every leaf of a packed forest (see the module).

    Parameters
    ----------
    leaf_ptr : ndarray of int64, shape (n_nodes + 1,)
    targets : ndarray of float64, shape (n_outputs, n_entries)
    weights : ndarray of float64, shape (n_outputs, n_entries)
    validate : bool, default=True
        Check the arrays (:meth:`check`); training code that built them
        itself may skip it.
    """

    def __init__(self, leaf_ptr, targets, weights, validate=True):
        self.leaf_ptr, self.targets, self.weights = leaf_ptr, targets, weights
        self.format_version = FORMAT_VERSION
        if validate:
            self.check()

    @classmethod
    def from_rows(cls, leaves_of_tree, node_offset, y, row_weights):
        """Record the rows each tree saw.

        Parameters
        ----------
        leaves_of_tree : iterable of ndarray of int64, shape (n_samples,)
            For each tree, in order, the local id of the leaf every training
            row reaches.
        node_offset : ndarray of int64, shape (n_trees + 1,)
            The packed forest's node offsets.
        y : ndarray of float64, shape (n_samples, n_outputs)
            Finite targets.
        row_weights : iterable of ndarray of float64, shape (n_samples,)
            For each tree, the weight of every row in it (0: the tree did not
            see the row). Rows of weight 0 are not stored.

        Returns
        -------
        LeafTargets
        """
        n_outputs = y.shape[1]
        nodes, targets, weights = [], [], []
        for t, (leaf, weight) in enumerate(zip(leaves_of_tree, row_weights, strict=True)):
            rows = np.flatnonzero(weight > 0)
            node = leaf[rows] + node_offset[t]
            nodes.append(node)
            for k in range(n_outputs):  # by leaf, then by target within the leaf
                order = np.lexsort((y[rows, k], node))
                targets.append(y[rows[order], k])
                weights.append(weight[rows[order]])
        node = np.concatenate(nodes)  # trees in order: global ids ascending tree by tree
        counts = np.bincount(node, minlength=int(node_offset[-1]))
        leaf_ptr = np.zeros(counts.shape[0] + 1, dtype=INDEX_DTYPE)
        np.cumsum(counts, out=leaf_ptr[1:])
        shape = (n_outputs, node.shape[0])

        def by_output(parts):  # parts: tree-major, output-minor
            return np.concatenate(
                [np.concatenate(parts[k::n_outputs]) for k in range(n_outputs)]
            ).reshape(shape)

        return cls(leaf_ptr, by_output(targets), by_output(weights), validate=False)

    @property
    def n_outputs(self):
        """Number of outputs."""
        return int(self.targets.shape[0])

    @property
    def n_nodes(self):
        """Number of nodes of the forest the container belongs to."""
        return int(self.leaf_ptr.shape[0]) - 1

    @property
    def nbytes(self):
        """Bytes held by the arrays."""
        return int(self.leaf_ptr.nbytes + self.targets.nbytes + self.weights.nbytes)

    def check(self):
        """Raise ``ValueError`` unless the arrays are consistent (see the module).

        What the prediction kernel relies on: the offsets start at 0, never
        decrease and end at the number of entries (so every node's range is
        in bounds), targets and weights are finite and weights positive.
        Targets sorted within each leaf are checked too (what the format
        promises). O(n_nodes + n_entries), vectorised.
        """
        check_int(getattr(self, "format_version", None), "the leaf targets' format_version", 1)
        if self.format_version > FORMAT_VERSION:
            raise ValueError(
                f"the leaf targets have format version {self.format_version}, newer than this "
                f"obliquetrees reads ({FORMAT_VERSION}); upgrade obliquetrees."
            )
        check_array(self.leaf_ptr, "the leaf targets' leaf_ptr", INDEX_DTYPE, 1)
        check_array(self.targets, "the leaf targets", VALUE_DTYPE, 2)
        check_array(self.weights, "the leaf weights", VALUE_DTYPE, 2, self.targets.shape)
        ptr = self.leaf_ptr
        if ptr.shape[0] < 2 or ptr[0] != 0 or ptr[-1] != self.targets.shape[1]:
            raise ValueError(
                "the leaf targets' leaf_ptr must start at 0 and end at the number of entries."
            )
        if np.any(np.diff(ptr) < 0):
            raise ValueError("the leaf targets' leaf_ptr must not decrease.")
        check_finite(self.targets, "the leaf targets")
        check_finite(self.weights, "the leaf weights")
        if self.targets.shape[0] < 1 or np.any(self.weights <= 0):
            raise ValueError("the leaf weights must be positive, for at least one output.")
        falls = np.diff(self.targets, axis=1) < 0  # entry k+1 below entry k
        if falls.any():
            starts = np.zeros(self.targets.shape[1], dtype=bool)
            starts[ptr[(ptr > 0) & (ptr < starts.shape[0])]] = True  # first entries of leaves
            if np.any(falls & ~starts[1:]):
                raise ValueError("the leaf targets must be sorted within each leaf.")

    def check_forest(self, forest):
        """Raise ``ValueError`` unless the container fits ``forest`` (an ObliqueForest).

        One offset per node plus one, the forest's number of outputs, and
        no entries on split nodes.
        """
        n_nodes = int(forest.node_offset[-1])
        if self.n_nodes != n_nodes:
            raise ValueError(
                f"the leaf targets cover {self.n_nodes} nodes; the trees have {n_nodes}."
            )
        if self.n_outputs != forest.n_outputs:
            raise ValueError(
                f"the leaf targets have {self.n_outputs} outputs; the trees {forest.n_outputs}."
            )
        split = forest.children_left != -1
        if np.any(np.diff(self.leaf_ptr)[split]):
            raise ValueError("the leaf targets give rows to split nodes.")

    def __getstate__(self):
        return {
            "leaf_ptr": self.leaf_ptr,
            "targets": self.targets,
            "weights": self.weights,
            "format_version": self.format_version,
        }

    def __setstate__(self, state):
        if not isinstance(state, dict) or set(state) != {
            "leaf_ptr",
            "targets",
            "weights",
            "format_version",
        }:
            raise ValueError("the saved leaf targets are not the four entries of LeafTargets.")
        self.__dict__.update(state)
        self.check()  # the kernels index with these arrays: check them before use
