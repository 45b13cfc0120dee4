"""Soft tree training parameters for tests that call the training layer directly.

:class:`~obliquetrees.soft.training.SoftTreeParams` has no defaults: the
estimators build it from their own parameters (``_training_params``). The
training tests take ``SoftTreeClassifier``'s.
"""

from obliquetrees import SoftTreeClassifier
from obliquetrees.soft.training import SoftTreeParams


def soft_params(**changes):
    """The classifier's parameters, with ``changes``."""
    return SoftTreeClassifier(**changes)._training_params(SoftTreeParams)
