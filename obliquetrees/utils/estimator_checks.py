"""scikit-learn's estimator checks that obliquetrees estimators fail on purpose.

Every public estimator passes scikit-learn's common checks except a few whose
premise the method contradicts (each entry says why). Pass the list to
scikit-learn so that those checks are reported as expected failures::

    from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks
    from obliquetrees import E2EDTClassifier
    from obliquetrees.utils.estimator_checks import expected_failed_checks

    est = E2EDTClassifier(max_depth=4, max_epochs=5, learning_rate=0.05)
    check_estimator(est, expected_failed_checks=expected_failed_checks(est))

    @parametrize_with_checks([est], expected_failed_checks=expected_failed_checks)
    def test_sklearn_compatible(estimator, check):
        check(estimator)

Both forms work on scikit-learn 1.6 and newer.
"""

__all__ = ["expected_failed_checks"]

_MINIBATCH_ADAM = (
    "Adam runs on shuffled minibatches of rows: a repeated row is drawn into "
    "batches separately and changes the batch composition and step count, so "
    "weights are equivalent to repetitions only in expectation"
)
_MINIBATCH_SGD = (
    "minibatch SGD: repeating a row changes the minibatches, the number of steps "
    "per epoch and the validation split, so weights equal repetitions only in "
    "expectation"
)
_ONLINE_SGD = (
    "the validation split draws rows and online SGD takes one step per row: a "
    "repeated row can land in both parts and adds steps, so weights equal "
    "repetitions only in expectation"
)
_BOOTSTRAP = (
    "the bootstrap draws n rows of the data it is given, so repeating a row "
    "changes every tree's sample (as for scikit-learn's random forests)"
)

#: Only for E2EDTRegressor's default routing="soft" (routing="hard" passes).
_SOFT_REGRESSOR = (
    "routing='soft' (the default): "
    + _MINIBATCH_ADAM
    + "; the hard-routed leaf means hide the resulting differences of the split "
    "weights, the soft output (every leaf weighed by path probability) shows them"
)

#: Only for E2EDT's default routing="hybrid" (routing="hard" and "soft" pass).
_HYBRID_ROUTING = (
    "routing='hybrid' (the default): predict follows the deterministic tree (the "
    "paper's inference model), predict_proba the probabilistic model, so argmax "
    "predict_proba differs from predict on rows near a split (1-3 % of the check's "
    "training rows)"
)


def _sample_weight_checks(reason):
    """The dense and sparse sample-weight equivalence checks, for one reason."""
    return {
        "check_sample_weight_equivalence_on_dense_data": reason,
        "check_sample_weight_equivalence_on_sparse_data": reason,
    }


#: estimator class name (``obliquetrees._registry.ESTIMATORS``) -> {check name: why it
#: fails}. One line per expected failure.
_EXPECTED_FAILED_CHECKS = {
    "CO2ForestClassifier": {
        **_sample_weight_checks(_BOOTSTRAP),
        "check_class_weight_classifiers": (
            "fully grown trees end in pure leaves whatever the class weights; the check "
            "relies on min_weight_fraction_leaf, which CO2 Forest does not have"
        ),
    },
    "CO2ForestRegressor": {**_sample_weight_checks(_BOOTSTRAP)},
    "E2EDTClassifier": {**_sample_weight_checks(_MINIBATCH_ADAM)},
    "HingeForestClassifier": {**_sample_weight_checks(_MINIBATCH_SGD)},
    "HingeForestRegressor": {**_sample_weight_checks(_MINIBATCH_SGD)},
    "SoftTreeClassifier": {**_sample_weight_checks(_ONLINE_SGD)},
    "SoftTreeRegressor": {**_sample_weight_checks(_ONLINE_SGD)},
}


def expected_failed_checks(estimator):
    """The scikit-learn checks ``estimator`` is expected to fail, with the reasons.

    Parameters
    ----------
    estimator : estimator instance
        An estimator of obliquetrees (a subclass gets its base class's
        entries). Any other estimator, and the models created fitted
        (``from_sklearn``, ``finetune``), which scikit-learn's checks cannot
        refit, get an empty dict.

    Returns
    -------
    expected : dict of str to str
        ``{check name: reason}``, a new dict: the form that
        ``sklearn.utils.estimator_checks.check_estimator`` takes as
        ``expected_failed_checks`` (``parametrize_with_checks`` takes this
        function itself).

    Examples
    --------
    >>> from obliquetrees import SoftTreeRegressor
    >>> from obliquetrees.utils.estimator_checks import expected_failed_checks
    >>> sorted(expected_failed_checks(SoftTreeRegressor()))  # doctest: +NORMALIZE_WHITESPACE
    ['check_sample_weight_equivalence_on_dense_data',
     'check_sample_weight_equivalence_on_sparse_data']
    """
    expected = {}
    ours = [
        cls.__name__
        for cls in type(estimator).__mro__
        if cls.__module__.startswith("obliquetrees.")
    ]
    listed = [name for name in ours if name in _EXPECTED_FAILED_CHECKS]
    if listed:
        expected = dict(_EXPECTED_FAILED_CHECKS[listed[0]])
    if "E2EDTClassifier" in ours and estimator.routing == "hybrid":
        expected["check_classifiers_train"] = _HYBRID_ROUTING
    if "E2EDTRegressor" in ours and estimator.routing == "soft":
        expected.update(_sample_weight_checks(_SOFT_REGRESSOR))
    return expected
