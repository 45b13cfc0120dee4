"""E2EDT training parameters for tests that call the training layer directly.

:class:`~obliquetrees.e2edt.training.E2EDTParams` has no defaults: the
estimators build it from their own parameters. The training tests run with
``E2EDTClassifier``'s defaults resolved on a small data set, except exact EM
(no pruned routing) and no row budget, the settings they were written against.
"""

import dataclasses

from obliquetrees import E2EDTClassifier


def e2edt_params(**changes):
    """The classifier's resolved defaults, exact, unbudgeted, with ``changes``."""
    defaults = E2EDTClassifier(prune_threshold=0.0, max_finetune_samples=None)
    return dataclasses.replace(defaults._resolve_params(n_features=1, n_samples=0), **changes)
