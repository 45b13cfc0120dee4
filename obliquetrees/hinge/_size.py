"""Projected memory of a hinge forest's fit, checked before the fit starts.

The model, its training state and the training's temporaries that grow with
the number of trees, from the parameters and the data's shape alone: a
forest too large to fit is refused at once, a large one warned about.
"""

import warnings

from obliquetrees.base import MAX_MODEL_BYTES

#: Projected bytes (``HingeModelSize._projected_bytes`` plus ``_scratch_bytes``, doubling
#: with every level of ``max_depth``) above which fitting warns; above ``MAX_MODEL_BYTES``
#: (shared with the other forests) it refuses to start.
WARN_MODEL_BYTES = 2**30


class HingeModelSize:
    """Mixin of the hinge estimators: the projected size of a fit, and its check."""

    def _projected_bytes(self, n_features, n_outputs, explicit_terms=False):
        """Estimated peak bytes of the fitted model with its trees, from its shape alone.

        The stored trees (per node: children, bias, sample count, depth,
        weight pointer and ``C`` leaf values, 8 bytes each; per split one
        weight (8 bytes) per input feature, or one weight and its feature id
        (4) with ``n_hinge_features=None`` (a split on every feature stores no
        ids), and with ``explicit_terms`` (missing-value indicators) a
        missing-value term (8) each, else one fill value per feature for the
        forest), the training state (leaf weights and
        thresholds with two optimiser moments each, each decision's hinge
        feature index, the training samples per leaf) and the dense ``n_nodes x
        n_features`` buffer of one tree while it is stored.
        """
        n_leaves = 2**self.max_depth
        n_nodes = 2 * n_leaves - 1
        n_thr = self.max_depth if self.tree_type == "fern" else n_leaves - 1
        width = n_outputs if self.head == "sum" else 1
        per_split = n_features if self.n_hinge_features is not None else 1
        ids = 0 if per_split == n_features else 4
        per_weight = (16 if explicit_terms else 8) + ids
        fill = 0 if explicit_terms else 8 * n_features
        # + 8: the weight pointer's closing entry
        trees = n_nodes * 8 * (6 + width) + 8 + (n_leaves - 1) * per_split * per_weight
        state = 8 * (3 * n_leaves * width + 3 * n_thr + n_leaves + n_thr)
        return self.n_estimators * (trees + state) + fill + n_nodes * n_features * 8

    def _scratch_bytes(self, n_outputs):
        """Peak bytes of the training's temporaries that grow with the number of trees.

        Whatever the model's size, a fit holds per tree: in an epoch, the
        per-batch records of ``batch_size`` rows (``_EpochScratch``: the
        walk's leaf, hinge value and feature, the leaf-weight gradients of
        ``C`` outputs, the threshold gradient, two touched-slot lists, two
        contribution records and the head's gradient: ``9 + C`` values per
        row, one more for the linear head's tree outputs) while a validation
        pass holds the linear head's tree outputs of ``PREDICT_CHUNK`` rows;
        then, counting the training samples per leaf, the walk of
        ``LEAF_COUNT_ROWS`` rows and their repeated weights (4 values per
        row). 8 bytes each.
        """
        from obliquetrees.hinge._forward import LEAF_COUNT_ROWS, PREDICT_CHUNK

        linear = self.head == "linear"
        width = n_outputs if self.head == "sum" else 1
        epoch = self.batch_size * (9 + width + linear) + 2 + (PREDICT_CHUNK if linear else 0)
        counting = 4 * LEAF_COUNT_ROWS
        return self.n_estimators * 8 * max(epoch, counting)

    def _check_model_size(self, n_features, n_outputs, explicit_terms=False):
        """Refuse a model too large to fit (temporaries included); warn about a large one."""
        size = self._projected_bytes(n_features, n_outputs, explicit_terms)
        size += self._scratch_bytes(n_outputs)
        if "auto" in (self.n_hinge_features, self.feature_screening):
            size *= 2  # the best forest so far is held while the next candidate trains
        shape = (
            f"{self.n_estimators} trees of depth {self.max_depth} on {n_features} "
            f"features take about {size / 2**30:.3g} GiB ({size} bytes) with the "
            "training's temporaries"
        )
        if size > MAX_MODEL_BYTES:
            raise ValueError(
                f"{shape}, above the limit of {MAX_MODEL_BYTES / 2**30:.0f} GiB; "
                "lower max_depth (each level doubles the size), n_estimators or batch_size."
            )
        if size > WARN_MODEL_BYTES:
            warnings.warn(f"{shape}.", UserWarning, stacklevel=4)
