"""Greedy growth, shared by every method that grows a tree one split at a time.

A :class:`Grower` owns what growth means independently of how a split is
found: the node table (children, depth and, for methods that partition their
rows, each node's slice of one row-index array), the limits (``max_depth``,
``max_leaf_nodes``), the in-place partition of a node's rows, and the order
in which nodes are visited:

- ``"breadth"``: node ids in creation order (E2EDT without
  ``max_leaf_nodes``; CO2, see below);
- ``"depth"``: last created first, left child before right (soft trees);
- ``"best"``: the candidate with the largest gain first (E2EDT with
  ``max_leaf_nodes``, the paper's sect. 3.4).

A method supplies one callback per node and stores its own split parameters
in payload arrays that the grower keeps the same length as the node table.

The mechanics are numba functions (:func:`may_split` for the limits,
:func:`entropy_decrease` for scikit-learn's ``min_impurity_decrease`` test,
:func:`link_children` for the node table, :func:`grow_capacity` for its
doubling), so a method whose per-node work is too small for a Python loop runs
the same breadth-first growth inside one kernel: CO2 does
(``co2._kernels.grow_tree``; the Python-driven loop made its fit 14-23 %
slower on letter, ``benchmarks/co2_grower_ab.py``).
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline

#: Nodes allocated at the start; the table doubles when it is full.
INITIAL_CAPACITY = 64
#: Tolerance of the ``min_impurity_decrease`` test (scikit-learn's ``EPSILON``).
EPSILON = np.finfo(np.float64).eps


@jit_inline
def may_split(depth, n_leaves, max_depth, max_leaf_nodes):
    """The growth limits; ``max_depth < 0`` / ``max_leaf_nodes < 0`` mean none."""
    depth_ok = max_depth < 0 or depth < max_depth
    return depth_ok and (max_leaf_nodes < 0 or n_leaves < max_leaf_nodes)


@jit
def grow_capacity(arr, new_cap, fill):
    """``arr`` copied into a table of ``new_cap`` rows, new rows set to ``fill``."""
    out = np.empty((new_cap,) + arr.shape[1:], dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    out[arr.shape[0] :] = fill
    return out


@jit_inline
def link_children(children_left, children_right, depth, start, end, node, n_nodes, n_left):
    """Make leaf ``node`` a split with children ``n_nodes`` and ``n_nodes + 1``.

    The first ``n_left`` rows of the node's slice ``start[node]:end[node]``
    of the row-index array go left, the rest right. The table must have room
    for two more nodes. Returns ``(left, right)``.
    """
    left = n_nodes
    right = n_nodes + 1
    children_left[node] = left
    children_right[node] = right
    depth[left] = depth[node] + 1
    depth[right] = depth[node] + 1
    start[left] = start[node]
    end[left] = start[node] + n_left
    start[right] = start[node] + n_left
    end[right] = end[node]
    return left, right


@jit
def entropy_decrease(y, row_weight, rows, start, mid, end, n_classes, total_weight):
    """Weighted impurity decrease of a split, as scikit-learn's ``min_impurity_decrease``.

    The split sends ``rows[start:mid]`` left and ``rows[mid:end]`` right; with
    ``N`` = ``total_weight`` (the tree's whole training weight) and ``N_t``,
    ``N_t_L``, ``N_t_R`` the weights of the node and its sides, returns
    ``N_t / N * (H - N_t_R / N_t * H_R - N_t_L / N_t * H_L)``, where ``H`` is
    the entropy in bits of the weighted class histogram (scikit-learn's
    ``criterion="entropy"``). Weights are ``row_weight[rows[i]]`` and
    classes ``y[rows[i]]``; a side without weight has entropy 0.
    """
    hist = np.zeros((2, n_classes))
    for t in range(start, end):
        r = rows[t]
        hist[0 if t < mid else 1, y[r]] += row_weight[r]
    side = np.zeros(2)
    side_entropy = np.zeros(2)
    parent = np.zeros(n_classes)
    for s in range(2):
        for k in range(n_classes):
            side[s] += hist[s, k]
            parent[k] += hist[s, k]
    node_weight = side[0] + side[1]
    if not node_weight > 0.0:
        return 0.0
    for s in range(2):
        if side[s] > 0.0:
            side_entropy[s] = _entropy_bits(hist[s], side[s])
    decrease = _entropy_bits(parent, node_weight)
    decrease -= side[1] / node_weight * side_entropy[1] + side[0] / node_weight * side_entropy[0]
    return node_weight / total_weight * decrease


@jit
def _entropy_bits(hist, total):
    """Entropy in bits of the class histogram ``hist`` whose sum is ``total > 0``."""
    h = 0.0
    for k in range(hist.shape[0]):
        if hist[k] > 0.0:
            p = hist[k] / total
            h -= p * np.log2(p)
    return h


def limit(value):
    """A ``None``-means-unlimited parameter in the kernels' convention (-1)."""
    return -1 if value is None else int(value)


class Grower:
    """Node table, limits, partition and visiting order of one growing tree.

    Parameters
    ----------
    n_rows : int
        Rows of the training data (the root's slice of :attr:`rows`).
    order : {"breadth", "depth", "best"}
        Visiting order (see the module docstring).
    max_depth, max_leaf_nodes : int or None
        Growth limits (``None``: none).
    payload : dict of name -> (shape, dtype, fill), optional
        Per-node arrays of the method, created with ``shape`` after the node
        axis and grown with the table; read them with :meth:`arrays`.
    """

    def __init__(self, n_rows, *, order, max_depth=None, max_leaf_nodes=None, payload=None):
        if order not in ("breadth", "depth", "best"):
            raise ValueError(f"unknown growth order {order!r}")
        self.order = order
        self.max_depth = limit(max_depth)
        self.max_leaf_nodes = limit(max_leaf_nodes)
        self.rows = np.arange(n_rows, dtype=np.int64)
        cap = INITIAL_CAPACITY
        self._fill = {"children_left": -1, "children_right": -1, "depth": 0, "start": 0, "end": 0}
        self._table = {
            name: np.full(cap, fill, dtype=np.int64) for name, fill in self._fill.items()
        }
        for name, (shape, dtype, fill) in (payload or {}).items():
            self._table[name] = np.full((cap, *shape), fill, dtype=dtype)
            self._fill[name] = fill
        self._table["end"][0] = n_rows
        self.n_nodes = 1
        self.n_leaves = 1

    # ------------------------------------------------------------ the table
    def __getattr__(self, name):
        table = self.__dict__.get("_table")
        if table is not None and name in table:
            return table[name]
        raise AttributeError(name)

    def arrays(self):
        """The node table trimmed to :attr:`n_nodes` rows (views), as a dict."""
        return {name: arr[: self.n_nodes] for name, arr in self._table.items()}

    def node_rows(self, node):
        """The row indices of ``node`` (a view into :attr:`rows`)."""
        return self.rows[self._table["start"][node] : self._table["end"][node]]

    def n_node_rows(self, node):
        return int(self._table["end"][node] - self._table["start"][node])

    def may_split(self, node):
        """Whether the limits allow splitting ``node`` now."""
        return may_split(
            self._table["depth"][node], self.n_leaves, self.max_depth, self.max_leaf_nodes
        )

    def partition(self, node, goes_right):
        """Stable in-place partition of the node's rows; returns the left count."""
        rows = self.node_rows(node)
        n_left = int(rows.shape[0] - np.count_nonzero(goes_right))
        rows[:] = np.concatenate([rows[~goes_right], rows[goes_right]])
        return n_left

    def add_children(self, node, n_left=0):
        """Split leaf ``node``: its first ``n_left`` rows go left; return the children."""
        if self.n_nodes + 2 > self._table["children_left"].shape[0]:
            new_cap = 2 * self._table["children_left"].shape[0]
            for name, arr in self._table.items():
                self._table[name] = grow_capacity(arr, new_cap, self._fill[name])
        t = self._table
        left, right = link_children(
            t["children_left"],
            t["children_right"],
            t["depth"],
            t["start"],
            t["end"],
            node,
            self.n_nodes,
            n_left,
        )
        self.n_nodes += 2
        self.n_leaves += 1
        return int(left), int(right)

    # ---------------------------------------------------------------- growth
    def grow(self, split, propose=None):
        """Grow the tree.

        ``split(node)`` is called on each node the order reaches and the
        limits allow; it splits the node (through :meth:`add_children`) or
        leaves it a leaf. With ``order="best"``, ``propose(node)`` is called
        instead when a node is created and returns the gain of its best split
        (or ``None``: no split); ``split(node)`` then commits the best
        proposal while the leaf limit allows.
        """
        if self.order == "breadth":
            node = 0
            while node < self.n_nodes:
                if self.may_split(node):
                    split(node)
                node += 1
        elif self.order == "depth":
            stack = [0]
            while stack:
                node = stack.pop()
                if self.max_depth >= 0 and self._table["depth"][node] >= self.max_depth:
                    continue
                if self.max_leaf_nodes >= 0 and self.n_leaves >= self.max_leaf_nodes:
                    break
                n_before = self.n_nodes
                split(node)
                if self.n_nodes > n_before:
                    stack.append(self._table["children_right"][node])
                    stack.append(self._table["children_left"][node])
        else:
            gains = {}
            self._propose(propose, 0, gains)
            while gains and (self.max_leaf_nodes < 0 or self.n_leaves < self.max_leaf_nodes):
                best = max(gains, key=lambda i: (gains[i], -i))
                del gains[best]
                split(best)
                left = self._table["children_left"][best]
                if left >= 0:
                    self._propose(propose, int(left), gains)
                    self._propose(propose, int(self._table["children_right"][best]), gains)
        return self

    def _propose(self, propose, node, gains):
        if self.max_depth >= 0 and self._table["depth"][node] >= self.max_depth:
            return
        gain = propose(node)
        if gain is not None:
            gains[node] = gain
