"""Seeing inside the trees: text export, plots and feature importances.

Everything here works on the shared container
(:class:`~obliquetrees._core.tree.ObliqueTree`), so it applies to every
estimator of the package (and to the predictors of
:mod:`obliquetrees.convert`) and speaks in the units of the user's ``X``: the
stored split weights act on the raw input (estimators that standardise fold
the scaling into the weights).

- :func:`export_text`: one line per node; an oblique split is shown by its
  ``top_k`` most influential terms plus the number of further terms.
- :func:`plot_tree`: a matplotlib drawing like scikit-learn's ``plot_tree``,
  with edge widths proportional to the training samples that follow each
  edge, leaf class distributions as small bar charts and, for image inputs,
  every split's weight vector drawn as an image.
- ``feature_importances_`` of every estimator is computed by
  :func:`obliquetrees._core.importances.feature_importances`; the definition:

  **Definition.** For an internal node ``t`` with children ``l`` and ``r``,
  let ``N`` be the (weighted) training samples reaching a node and ``S`` the
  sum of the node's outputs over them, ``S = N * value``. The node's
  *impurity decrease* is::

      D_t = |S_l|^2 / N_l + |S_r|^2 / N_r - |S_t|^2 / N_t

  For a classifier whose ``value`` rows are class distributions this is
  exactly ``N_t * Gini(t) - N_l * Gini(l) - N_r * Gini(r)``, the weighted Gini
  decrease of scikit-learn; for a regressor it is the variance (squared-error)
  reduction ``N_l N_r / N_t * |mean_l - mean_r|^2``. ``N`` and ``S`` are summed
  from the leaves upwards, so every ``D_t >= 0`` and the definition also holds
  for trees whose internal nodes store no value (hinge trees, whose leaves hold
  scores: there ``D_t`` is the between-children sum of squares of the leaf
  scores). ``D_t`` is then shared among the features of the split in
  proportion to ``|w_j| * std(x_j)``, the typical size of each term of
  ``w . x`` over the training data (``std`` weighted by ``sample_weight``;
  ``|w_j|`` alone when the standard deviations are unknown, as for converted
  scikit-learn models, where each split has one feature anyway). A tree's
  importances are normalised to sum to 1; a forest averages the normalised
  importances of its trees that have at least one split and normalises
  again. A model whose every tree is a single leaf has all-zero importances,
  as in scikit-learn.

This module imports numpy only; matplotlib is imported inside
:func:`plot_tree`.
"""

import numpy as np

from obliquetrees.utils._param_validation import (
    Integral,
    Interval,
    Real,
    StrOptions,
    validate_params,
)

_NON_NEGATIVE_INT = Interval(Integral, 0, None, closed="left")

#: Parameters shared by :func:`export_text` and :func:`plot_tree`; the tree
#: index is range-checked against the model by ``_pick_tree``.
_REPORT_CONSTRAINTS = {
    "model": "no_validation",
    "tree_index": [Integral],
    "feature_names": ["array-like", None],
    "class_names": ["array-like", None],
    "top_k": [_NON_NEGATIVE_INT],
    "max_depth": [_NON_NEGATIVE_INT, None],
    "decimals": [_NON_NEGATIVE_INT],
    "show_samples": ["boolean"],
    "show_missing": ["boolean"],
}

__all__ = ["export_text", "plot_tree"]


# --------------------------------------------------------------------- model
def _trees_of(model):
    """The list of ObliqueTree of ``model`` (estimator, forest or tree)."""
    from obliquetrees._core.forest import ObliqueForest
    from obliquetrees._core.tree import ObliqueTree

    if isinstance(model, ObliqueTree):
        return [model]
    if isinstance(model, ObliqueForest):
        return model.trees
    forest = getattr(model, "forest_", None)  # hinge forests build theirs on first access
    if isinstance(forest, ObliqueForest):
        return forest.trees
    if "tree_" in getattr(model, "__dict__", {}) and isinstance(model.tree_, ObliqueTree):
        return [model.tree_]
    from sklearn.exceptions import NotFittedError

    if hasattr(model, "fit"):
        raise NotFittedError(
            f"This {type(model).__name__} instance is not fitted yet. Call 'fit' "
            "before inspecting its trees."
        )
    raise TypeError(
        "Expected a fitted obliquetrees estimator, an ObliqueTree or an "
        f"ObliqueForest; got {type(model).__name__}."
    )


def _pick_tree(model, tree_index):
    trees = _trees_of(model)
    if not -len(trees) <= tree_index < len(trees):
        raise ValueError(
            f"tree_index={tree_index} is out of range for a model with {len(trees)} "
            f"tree{'s' if len(trees) != 1 else ''}."
        )
    return trees[tree_index]


def _feature_names(model, feature_names, n_features):
    if feature_names is None:
        names = getattr(model, "feature_names_in_", None)
        if names is None:
            return [f"x{j}" for j in range(n_features)]
        return [str(v) for v in names]
    names = [str(v) for v in feature_names]
    if len(names) != n_features:
        raise ValueError(
            f"feature_names has {len(names)} entries but the model has {n_features} features."
        )
    return names


def _category_tables(model, n_features):
    """Feature index -> (labels as str, coordinates) of a model's categorical features."""
    table = getattr(model, "category_coordinates_", None)
    if table is None or table.n_features != n_features:
        return {}
    return {
        int(j): (np.array([str(c) for c in known.tolist()], dtype=object), values)
        for j, known, values in zip(table.columns, table.categories, table.values, strict=True)
    }


def _term_names(names, categories):
    """Names as split terms: a categorical feature's term is its coordinate, ``c(name)``."""
    return [f"c({name})" if j in categories else name for j, name in enumerate(names)]


def _category_split(tree, node, names, categories):
    """``(left, right)`` texts of a split on one categorical feature, else None.

    ``colour in {blue, red}``: the categories whose coordinate sends them
    left (``w * c + b <= 0``, the traversal's test), with ``or missing`` on the
    side a missing value or unseen category takes.
    """
    lo, hi = tree.weight_indptr[node], tree.weight_indptr[node + 1]
    if hi - lo != 1 or int(tree.weight_index[lo]) not in categories:
        return None
    j, w, b = int(tree.weight_index[lo]), tree.weight_value[lo], tree.bias[node]
    if w == 0.0:
        return None
    labels, values = categories[j]
    left = w * values + b <= 0.0
    missing_left = bool(tree.weight_missing[lo] + b <= 0.0)

    def text(mask, missing):
        listed = "{" + ", ".join(labels[mask].tolist()) + "}"
        return f"{names[j]} in {listed}" + (" or missing" if missing else "")

    return text(left, missing_left), text(~left, not missing_left)


def _category_legend(categories, names, decimals):
    """One line per categorical feature: each category's coordinate."""
    return [
        f"c({names[j]}): "
        + ", ".join(
            f"{label}={_format_number(v, decimals)}"
            for label, v in zip(labels.tolist(), values, strict=True)
        )
        for j, (labels, values) in categories.items()
    ]


def _class_names(model, class_names, n_outputs):
    if class_names is not None:
        names = [str(v) for v in class_names]
        if len(names) != n_outputs:
            raise ValueError(
                f"class_names has {len(names)} entries but the model has {n_outputs} classes."
            )
        return names
    classes = getattr(model, "classes_", None)
    if classes is not None and len(classes) == n_outputs:
        return [str(v) for v in classes]
    return None


def _is_classifier(model):
    return getattr(model, "_estimator_type", None) == "classifier" or (
        "classes_" in getattr(model, "__dict__", {})
    )


def _is_distribution(row):
    return (row.shape[0] > 1) and bool(np.all(row >= -1e-9) and abs(row.sum() - 1.0) <= 1e-6)


# ----------------------------------------------------------------- text
def _format_number(v, decimals):
    v = float(v)
    if v != 0.0 and abs(v) < 0.5 * 10.0 ** (-decimals):
        return f"{v:.{max(decimals - 1, 1)}e}"  # would round to 0
    return f"{v:.{decimals}f}"


def _format_count(n):
    """Integral sample counts without decimals, weighted ones with two."""
    n = float(n)
    return str(int(n)) if n.is_integer() else f"{n:.2f}"


def _split_terms(tree, node, names, feature_std, top_k, decimals):
    """``(expression, threshold)`` of the split of ``node``: expr > threshold goes right."""
    lo, hi = tree.weight_indptr[node], tree.weight_indptr[node + 1]
    idx = tree.weight_index[lo:hi]
    val = tree.weight_value[lo:hi]
    # a feature that enters only when missing (w = 0) is written as c*missing(x)
    only_missing = (val == 0) & (tree.weight_missing[lo:hi] != 0)
    coefs = np.where(only_missing, tree.weight_missing[lo:hi], val)
    rank = np.abs(val) if feature_std is None else np.abs(val) * feature_std[idx]
    rank = np.where(only_missing, np.abs(coefs), rank)
    order = np.lexsort((idx, -rank))  # most influential first, ties by feature
    shown = order[: max(int(top_k), 0)]
    parts = []
    for pos, k in enumerate(shown):
        coef = coefs[k]
        sign = "-" if coef < 0 else ("+" if pos else "")
        mag = abs(coef)
        name = f"missing({names[idx[k]]})" if only_missing[k] else names[idx[k]]
        term = name if mag == 1.0 else f"{_format_number(mag, decimals)}*{name}"
        parts.append(f"{sign} {term}" if sign and pos else f"{sign}{term}")
    rest = len(val) - len(shown)
    if rest:
        parts.append(f"+ [{rest} more term{'s' if rest != 1 else ''}]")
    expr = " ".join(parts) if parts else "0"
    return expr, -tree.bias[node], _missing_text(tree, lo, idx, val, shown, names, decimals)


def _missing_text(tree, lo, idx, val, shown, names, decimals):
    """How the shown terms treat a NaN: ``NaN: x3=1.2, x5=-0.4``.

    A missing ``x_j`` adds the weight's missing-value term ``c`` instead of
    ``w_j x_j``, written as the value ``c / w_j`` the NaN counts as (the
    terms ``c*missing(x_j)`` of features with ``w_j = 0`` say it already).
    """
    terms = tree.weight_missing[lo + shown]
    out = [
        f"{names[idx[k]]}={_format_number(c / val[k] + 0.0, decimals)}"  # no -0
        for k, c in zip(shown, terms, strict=True)
        if val[k] != 0.0
    ]
    return "NaN: " + ", ".join(out) if out else ""


def _leaf_text(model, tree, node, class_names, decimals, classifier):
    value = tree.value[node]
    fmt = ", ".join(f"{v:.{decimals}f}" for v in value[:10])
    if value.shape[0] > 10:
        fmt += f", ... ({value.shape[0]} values)"
    if classifier and _is_distribution(value):
        label = class_names[int(np.argmax(value))] if class_names else str(int(np.argmax(value)))
        return f"class: {label}  proba: [{fmt}]"
    if value.shape[0] == 1:
        return f"value: {_format_number(value[0], decimals)}"
    return f"value: [{fmt}]"


@validate_params(_REPORT_CONSTRAINTS, prefer_skip_nested_validation=True)
def export_text(
    model,
    feature_names=None,
    top_k=3,
    tree_index=0,
    *,
    class_names=None,
    max_depth=None,
    decimals=3,
    show_samples=True,
    show_missing=True,
):
    """Text report of one tree of a fitted model, one line per node.

    Each split appears twice, like in :func:`sklearn.tree.export_text`: as
    ``expression <= threshold`` above its left subtree and
    ``expression > threshold`` above its right subtree, where ``expression``
    is ``w . x`` in the units of ``X``. Only the ``top_k`` terms with the
    largest ``|w_j| * std(x_j)`` (training standard deviation; ``|w_j|`` when
    unknown) are written, followed by ``+ [m more terms]`` when the split uses
    more features; the threshold ``-b`` always refers to the full ``w . x``.
    Leaves show the predicted class and class distribution (classifiers) or
    the stored value(s) (regressors, and hinge trees whose leaves hold
    scores). ``[NaN: x3=1.2]`` says how the written terms treat a missing
    value: a NaN ``x3`` counts as ``x3 = 1.2`` in this split (the training
    mean, unless the model learned otherwise from missing values in
    training); a term ``0.4*missing(x5)`` adds 0.4 when ``x5`` is NaN, for a
    feature the split reads only through its missingness (see
    ``ObliqueTree.weight_missing``). A categorical feature (a model's
    ``category_coordinates_``) enters an expression as its coordinate
    ``c(colour)``, whose value per category the report's last lines list; a
    split on it alone is written as the categories each side takes,
    ``colour in {black, red} or missing``.

    Parameters
    ----------
    model : fitted obliquetrees estimator, ObliqueTree or ObliqueForest
        The model to describe.
    feature_names : sequence of str, default=None
        Names of the features; default ``feature_names_in_`` when the model
        was fitted on a DataFrame, else ``x0, x1, ...``.
    top_k : int, default=3
        Number of terms of each oblique split written out.
    tree_index : int, default=0
        Which tree of a forest to describe.
    class_names : sequence of str, default=None
        Names of the classes; default ``classes_``.
    max_depth : int, default=None
        Only nodes up to this depth are written; deeper subtrees are
        summarised as ``truncated branch of depth d``.
    decimals : int, default=3
        Digits after the decimal point.
    show_samples : bool, default=True
        Append ``n=...`` (weighted training samples reaching the node).
    show_missing : bool, default=True
        Append ``[NaN: ...]``: how the written terms treat missing values.

    Returns
    -------
    report : str
        The text, one line per node, ending with a newline.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from obliquetrees import CO2ForestClassifier, export_text
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = CO2ForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    >>> print(export_text(clf, top_k=2))  # doctest: +SKIP
    |--- 0.451*x3 + 0.15*x2 + [2 more terms] <= 1.043  n=150
    |   |--- class: 0  proba: [1.000, 0.000, 0.000]  n=48
    ...
    """
    tree = _pick_tree(model, tree_index)
    names = _feature_names(model, feature_names, tree.n_features)
    categories = _category_tables(model, tree.n_features)
    terms = _term_names(names, categories)
    classifier = _is_classifier(model)
    cnames = _class_names(model, class_names, tree.n_outputs) if classifier else None
    std = getattr(model, "_feature_std", None)
    std = None if std is None else np.asarray(std, dtype=np.float64)

    def samples(node):
        return f"  n={_format_count(tree.n_node_samples[node])}" if show_samples else ""

    def subtree_depth(node):
        lo = tree.depth[node]
        stack, deepest = [node], lo
        while stack:
            n = stack.pop()
            deepest = max(deepest, tree.depth[n])
            if tree.children_left[n] != -1:
                stack.extend((tree.children_left[n], tree.children_right[n]))
        return int(deepest - lo)

    lines = []
    if tree.children_left[0] == -1:
        lines.append(_leaf_text(model, tree, 0, cnames, decimals, classifier) + samples(0))
        return "\n".join(lines) + "\n"
    # explicit stack (trees can be deeper than Python's recursion limit)
    stack = [("split", 0, 0)]
    while stack:
        kind, node, indent = stack.pop()
        prefix = "|   " * indent + "|--- "
        if kind == "leaf":
            lines.append(
                prefix + _leaf_text(model, tree, node, cnames, decimals, classifier) + samples(node)
            )
            continue
        if kind == "line":
            lines.append(node)  # here ``node`` is the text of the line
            continue
        if kind == "truncated":
            lines.append(prefix + f"truncated branch of depth {subtree_depth(node)}")
            continue
        expr, thr, nan_text = _split_terms(tree, node, terms, std, top_k, decimals)
        thr = _format_number(thr, decimals)
        nan_text = f"  [{nan_text}]" if show_missing and nan_text else ""
        sides = _category_split(tree, node, names, categories)
        if sides is None:
            sides = (f"{expr} <= {thr}", f"{expr} > {thr}")
        else:
            nan_text = ""  # the sides say where a missing value goes
        pending = []
        children = (tree.children_left[node], tree.children_right[node])
        for child, side in zip(children, sides, strict=True):
            pending.append(("line", f"{prefix}{side}{samples(child)}{nan_text}", indent))
            if tree.children_left[child] == -1:
                pending.append(("leaf", child, indent + 1))
            elif max_depth is not None and tree.depth[child] > max_depth:
                pending.append(("truncated", child, indent + 1))
            else:
                pending.append(("split", child, indent + 1))
        stack.extend(reversed(pending))
    lines += _category_legend(categories, names, decimals) if categories else []
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ plot
def _layout(tree, max_depth):
    """Visible nodes and their (x, y) positions: leaves (and truncated nodes)
    spaced by 1 from left to right, parents centred above their children."""
    left, right = tree.children_left, tree.children_right
    x, order, truncated = {}, [], set()
    next_x = 0.0
    # iterative post-order walk, left subtree first
    stack = [(0, False)]
    while stack:
        node, done = stack.pop()
        is_internal = left[node] != -1
        cut = is_internal and max_depth is not None and tree.depth[node] >= max_depth
        if not is_internal or cut:
            if cut:
                truncated.add(node)
            x[node] = next_x
            next_x += 1.0
            order.append(node)
        elif done:
            x[node] = 0.5 * (x[left[node]] + x[right[node]])
            order.append(node)
        else:
            stack.extend(((node, True), (right[node], False), (left[node], False)))
    return order, x, truncated, int(next_x)


@validate_params(
    {
        **_REPORT_CONSTRAINTS,
        "image_shape": ["array-like", None],
        "ax": "no_validation",  # a matplotlib Axes
        "fontsize": [Interval(Real, 0, None, closed="neither"), None],
        "cmap": "no_validation",  # a name or a Colormap, checked by matplotlib
        "image_weights": [StrOptions({"std", "raw"})],
    },
    prefer_skip_nested_validation=True,
)
def plot_tree(
    model,
    tree_index=0,
    *,
    max_depth=None,
    feature_names=None,
    class_names=None,
    top_k=3,
    image_shape=None,
    decimals=2,
    show_samples=True,
    show_missing=True,
    ax=None,
    fontsize=None,
    cmap="RdBu_r",
    image_weights="std",
):
    """Draw one tree of a fitted model with matplotlib.

    Nodes are boxes as in :func:`sklearn.tree.plot_tree`: an internal node
    shows its split ``w . x`` by its ``top_k`` largest terms (see
    :func:`export_text`) and the threshold (samples with ``w . x`` above it go
    right); a leaf shows its predicted class and, for classifiers, its class
    distribution as a small bar chart (regressors: the value). The width of
    each edge is proportional to the (weighted) number of training samples
    that follow it. When the inputs are images (``image_shape`` given, or the
    estimator's own ``image_shape`` parameter, as E2EDT has) every split's
    weight vector is drawn as an image in its node (red positive, blue
    negative, symmetric colour scale per node; see ``image_weights``), the
    figure style of the E2EDT paper.

    Requires matplotlib (``pip install matplotlib``).

    Parameters
    ----------
    model : fitted obliquetrees estimator, ObliqueTree or ObliqueForest
        The model to draw.
    tree_index : int, default=0
        Which tree of a forest to draw.
    max_depth : int, default=None
        Draw only nodes up to this depth; deeper subtrees are shown as
        ``(...)``.
    feature_names : sequence of str, default=None
        Names of the features (default ``feature_names_in_`` or
        ``x0, x1, ...``).
    class_names : sequence of str, default=None
        Names of the classes (default ``classes_``).
    top_k : int, default=3
        Terms of each oblique split written in its box (text mode).
    image_shape : tuple (height, width), default=None
        Draw split weights as images of this shape (``height * width`` must
        equal the number of features). Default: the estimator's
        ``image_shape`` parameter when it has one.
    decimals : int, default=2
        Digits after the decimal point.
    show_samples : bool, default=True
        Write the (weighted) number of training samples in every node.
    show_missing : bool, default=True
        Write how the drawn terms treat missing values (``NaN: x3=1.2``, as
        in :func:`export_text`).
    ax : matplotlib Axes, default=None
        Axes to draw in; default: a new figure sized for the tree.
    fontsize : float, default=None
        Text size; default chosen from the number of leaves drawn.
    cmap : str or Colormap, default="RdBu_r"
        Colour map of the weight images.
    image_weights : {"std", "raw"}, default="std"
        What the weight images show: ``"std"`` draws ``w_j * std(x_j)``
        (training standard deviation; the weight on standardised input), so
        that nearly constant pixels, such as image borders, whose raw weights
        can be huge but matter little, do not dominate the colour scale;
        ``"raw"`` draws ``w_j`` in the units of ``X``. Without known
        standard deviations (a bare tree) both draw ``w_j``.

    Returns
    -------
    ax : matplotlib Axes
        The axes holding the drawing.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from obliquetrees import E2EDTClassifier, plot_tree
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = E2EDTClassifier(max_depth=2, max_epochs=5, random_state=0).fit(X, y)
    >>> ax = plot_tree(clf)  # doctest: +SKIP
    """
    try:
        import matplotlib.pyplot as plt
        from matplotlib import colormaps
    except ImportError as exc:  # pragma: no cover - matplotlib is in the test extra
        raise ImportError("plot_tree needs matplotlib: pip install matplotlib.") from exc

    tree = _pick_tree(model, tree_index)
    image_shape = _image_shape(model, image_shape, tree.n_features)
    names = _feature_names(model, feature_names, tree.n_features)
    names = _term_names(names, _category_tables(model, tree.n_features))
    classifier = _is_classifier(model)
    cnames = _class_names(model, class_names, tree.n_outputs) if classifier else None
    std = getattr(model, "_feature_std", None)
    std = None if std is None else np.asarray(std, dtype=np.float64)

    order, xpos, truncated, n_columns = _layout(tree, max_depth)
    depth_shown = max(int(tree.depth[n]) for n in order)
    if ax is None:
        width = min(max(6.0, 1.9 * n_columns), 60.0)
        height = min(max(3.5, 2.0 * (depth_shown + 1)), 40.0)
        _, ax = plt.subplots(figsize=(width, height))
    if fontsize is None:
        fontsize = _default_fontsize(n_columns)
    ax.set_xlim(-0.5, n_columns - 0.5)
    ax.set_ylim(-depth_shown - 0.5, 0.5)
    ax.set_axis_off()

    _draw_edges(ax, tree, order, truncated, xpos, fontsize)
    colors = colormaps["tab10" if tree.n_outputs <= 10 else "tab20"]
    box = dict(boxstyle="round,pad=0.3", fc="white", ec="0.3", lw=0.8)
    for node in order:
        x, y = xpos[node], -float(tree.depth[node])
        n_text = f"n = {_format_count(tree.n_node_samples[node])}" if show_samples else ""
        if node in truncated:
            _boxed_text(ax, x, y, _with_count("(...)", n_text), box, fontsize)
        elif tree.children_left[node] != -1 and image_shape is not None:
            scale = std if image_weights == "std" else None
            _draw_weight_image(ax, tree, node, x, y, image_shape, scale, cmap, n_text, fontsize)
        elif tree.children_left[node] != -1:
            expr, thr, nan_text = _split_terms(tree, node, names, std, top_k, decimals)
            expr = expr.replace(" + ", "\n+ ").replace(" - ", "\n- ")
            text = f"{expr}\n> {_format_number(thr, decimals)} ?"
            if show_missing and nan_text:
                text += f"\n{nan_text}"
            if n_text:
                text += f"\n{n_text}"
            _boxed_text(ax, x, y, text, box, fontsize, linespacing=1.15)
        elif classifier and _is_distribution(tree.value[node]):
            label_of = (lambda k: cnames[k]) if cnames else str
            _draw_class_leaf(ax, tree.value[node], x, y, label_of, colors, box, n_text, fontsize)
        else:
            _draw_value_leaf(ax, tree.value[node], x, y, box, n_text, decimals, fontsize)
    return ax


def _image_shape(model, image_shape, n_features):
    """``image_shape`` (or the model's) as a pair of ints matching ``n_features``, or None."""
    if image_shape is None:
        image_shape = getattr(model, "image_shape", None)
    if image_shape is None:
        return None
    image_shape = tuple(int(v) for v in image_shape)
    if len(image_shape) != 2 or image_shape[0] * image_shape[1] != n_features:
        raise ValueError(
            f"image_shape={image_shape} does not match the model's {n_features} "
            "features (height * width must equal n_features)."
        )
    return image_shape


def _default_fontsize(n_columns):
    """Smaller text for wider trees."""
    return 9 if n_columns <= 8 else (7 if n_columns <= 24 else 5)


def _draw_edges(ax, tree, order, truncated, xpos, fontsize):
    """The edges below each shown split, widest for the edge carrying all training samples."""
    n_root = tree.n_node_samples[0] if tree.n_node_samples[0] > 0 else 1.0
    for node in order:
        if tree.children_left[node] == -1 or node in truncated:
            continue
        y_node = -float(tree.depth[node])
        for child, label in ((tree.children_left[node], "≤"), (tree.children_right[node], ">")):
            frac = max(tree.n_node_samples[child], 0.0) / n_root
            y_child = -float(tree.depth[child])
            # stop at the box of a leaf, above its bar chart
            y_end = y_child + (0.15 if child not in truncated else 0.0)
            ax.plot(
                [xpos[node], xpos[child]],
                [y_node, y_end],
                color="0.45",
                linewidth=0.4 + 9.0 * frac,
                solid_capstyle="round",
                zorder=1,
            )
            if node == 0:
                ax.text(
                    0.5 * (xpos[node] + xpos[child]),
                    0.5 * (y_node + y_child),
                    label,
                    ha="center",
                    va="center",
                    fontsize=fontsize,
                    zorder=2,
                    bbox=dict(boxstyle="circle,pad=0.15", fc="white", ec="none"),
                )


def _draw_class_leaf(ax, value, x, y, label_of, colors, box, n_text, fontsize):
    """A classification leaf: its majority class in the class's colour, the distribution as bars."""
    k = int(np.argmax(value))
    leaf_box = dict(box, fc=colors(k % colors.N), alpha=0.25 + 0.6 * float(value[k]))
    _boxed_text(
        ax,
        x,
        y + 0.08,
        _with_count(f"class {label_of(k)}", n_text),
        leaf_box,
        fontsize,
        va="bottom",
    )
    inset = ax.inset_axes([x - 0.38, y - 0.42, 0.76, 0.36], transform=ax.transData)
    bar_colors = [colors(j % colors.N) for j in range(value.shape[0])]
    inset.bar(np.arange(value.shape[0]), value, color=bar_colors, width=0.8)
    inset.set_ylim(0, 1)
    inset.set_xlim(-0.6, value.shape[0] - 0.4)
    inset.set_xticks([])
    inset.set_yticks([])
    for spine in inset.spines.values():
        spine.set_linewidth(0.5)


def _draw_value_leaf(ax, value, x, y, box, n_text, decimals, fontsize):
    """A regression leaf (or a leaf whose values are not a distribution): its values."""
    if value.shape[0] == 1:
        text = f"value = {_format_number(value[0], decimals)}"
    else:
        shown = ", ".join(_format_number(v, decimals) for v in value[:4])
        more = ", ..." if value.shape[0] > 4 else ""
        text = f"value = [{shown}{more}]"
    _boxed_text(ax, x, y, _with_count(text, n_text), box, fontsize)


def _with_count(text, n_text):
    """``text``, then the node's sample count on a line of its own when shown."""
    return f"{text}\n{n_text}" if n_text else text


def _boxed_text(ax, x, y, text, box, fontsize, va="center", **style):
    """A node's text centred at ``(x, y)`` in ``box``, above the edges."""
    ax.text(x, y, text, ha="center", va=va, fontsize=fontsize, bbox=box, zorder=3, **style)


def _draw_weight_image(ax, tree, node, x, y, image_shape, scale, cmap, n_text, fontsize):
    """One split's weight vector (times ``scale`` if given) as an image at (x, y)."""
    dense = np.zeros(tree.n_features)
    lo, hi = tree.weight_indptr[node], tree.weight_indptr[node + 1]
    dense[tree.weight_index[lo:hi]] = tree.weight_value[lo:hi]
    if scale is not None:
        dense = dense * scale
    limit = np.abs(dense).max() or 1.0
    h, w = image_shape
    size = 0.7
    ih, iw = (size, size * w / h) if h >= w else (size * h / w, size)
    inset = ax.inset_axes([x - iw / 2, y - ih / 2, iw, ih], transform=ax.transData)
    inset.imshow(
        dense.reshape(image_shape), cmap=cmap, vmin=-limit, vmax=limit, interpolation="nearest"
    )
    inset.set_xticks([])
    inset.set_yticks([])
    if n_text:
        ax.text(x, y - ih / 2 - 0.02, n_text, ha="center", va="top", fontsize=fontsize, zorder=3)
