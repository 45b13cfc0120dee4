"""E2EDT training parameters for tests that call the training layer directly.

:class:`~obliquetrees.e2edt.training.E2EDTParams` has no defaults: the
estimators build it from their own parameters. These are the settings the
training tests were written against, stated once.
"""

from obliquetrees.e2edt.training import E2EDTParams

SETTINGS = dict(
    max_depth=10,
    max_leaf_nodes=None,
    min_samples_split=2,
    max_epochs=20,
    finetune_epochs=60,
    initial_steepness=1.0,
    steepness_increase=0.1,
    learning_rate=0.001,
    batch_size=1000,
    max_attempts=5,
    max_features=None,
    image_shape=None,
    patch_size=None,
    spatial_reg=0.0,
    standardize=True,
    bootstrap=False,
    balanced_subsample=False,
    prune_threshold=0.0,  # exact EM: the estimators' "auto" prunes
    max_finetune_samples=None,
    finetune_steepness_increase=None,
    finetune_learning_rate=None,
)


def e2edt_params(**changes):
    """:data:`SETTINGS` with ``changes``."""
    return E2EDTParams(**{**SETTINGS, **changes})
