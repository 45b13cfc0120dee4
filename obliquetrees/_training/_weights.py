"""Row weights shared by the bagged trainers (CO2 and E2EDT forests)."""

import numpy as np


def balanced_class_weight(y, counts, n_classes):
    """``n / (n_classes * count_c)`` per class, counts given per row.

    scikit-learn's ``"balanced_subsample"`` weights of one bootstrap: ``counts``
    is how often each row was drawn, ``total`` the number of draws; a class
    that was not drawn gets 0 and the number of classes counts only drawn ones.
    """
    per_class = np.bincount(y, weights=counts, minlength=n_classes)
    total = per_class.sum()
    weight = np.zeros(n_classes)
    present = per_class > 0
    weight[present] = total / (present.sum() * per_class[present])
    return weight
