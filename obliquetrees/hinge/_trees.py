"""The hinge forests' oblique trees (``forest_``), stored on first access.

Prediction runs the hinge model itself; the oblique trees (``forest_``,
``trees_``) serve ``apply``, ``decision_path``, inspection and export. They
hold a dense weight row per split (100 trees of depth 10 on 40 features:
64 MiB, more than the training state), so ``fit`` keeps only the training
samples per leaf (``_leaf_counts``), and the trees are stored from the model
and those counts when first asked for, tree by tree
(:func:`~obliquetrees.hinge._forward.to_forest`): the same arrays
``fit`` stored before. Pickles leave them out. Imports numpy only (numba on
the first build).
"""

from obliquetrees._core.validation import VALUE_DTYPE, check_array, check_finite


class TreesOnDemand:
    """Mixin of the hinge estimators: ``forest_`` built on first access, never pickled.

    A model pickled before this existed has its ``forest_`` and no
    ``_leaf_counts``: it keeps (and saves) the trees it has.
    """

    def __getattr__(self, name):
        # called only when normal lookup fails: forest_ not stored yet
        if name != "forest_" or "_leaf_counts" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        from obliquetrees.hinge._forward import to_forest  # imports numba

        model, counts = self._model, self._leaf_counts
        try:
            check_array(counts, "_leaf_counts", VALUE_DTYPE, 2, (model.n_trees, model.W.shape[1]))
            check_finite(counts, "_leaf_counts")
        except ValueError as exc:
            raise ValueError(f"Invalid {type(self).__name__}: {exc}") from None
        forest = to_forest(model, counts, self._value_scale(), self._missing.fold)
        self.__dict__["forest_"] = forest
        return forest

    @property
    def trees_(self):
        """list of ObliqueTree: the fitted trees (stored on first access, see ``forest_``)."""
        return self.forest_.trees

    @property
    def _not_saved(self):
        # derived from _model and _leaf_counts; models fitted before keep theirs
        return ("forest_",) if "_leaf_counts" in self.__dict__ else ()
