"""Which obliquetrees estimators a benchmark covers: the package's registry, not a list of its own.

A benchmark that measures every method keeps settings only where they differ
between estimators (a dict keyed by estimator name or by label) and completes
them from :data:`obliquetrees._registry.ESTIMATORS` here: a public estimator
the settings lack is measured at its defaults instead of being silently left
out, and a name that is not a public estimator raises. Reading the registry
imports no estimator (and so not numba).
"""

from obliquetrees._registry import ESTIMATORS, load


def public_estimators(kind=""):
    """Names of the public estimators, in the registry's order.

    ``kind``: ``"Classifier"`` or ``"Regressor"`` keeps the names ending so.
    """
    return [name for name in ESTIMATORS if name.endswith(kind)]


def short_name(name):
    """``"SoftTreeClassifier"`` -> ``"SoftTree"``: a label shared by a method's two tasks."""
    return name.removesuffix("Classifier").removesuffix("Regressor")


def accepts(name, parameter):
    """Whether the public estimator ``name`` has the constructor parameter ``parameter``."""
    return parameter in load(name)().get_params()


def _defaults(name):
    """No parameters: the estimator's defaults."""
    return {}


def every_estimator(settings, kind="", default=_defaults):
    """``settings`` (estimator name -> parameters) completed to every public estimator.

    The names ``settings`` lists keep their order and parameters; the public
    estimators (of ``kind``) it lacks follow, each with ``default(name)`` (by
    default ``{}``: its defaults). A name that is not a public estimator of
    ``kind`` raises ``KeyError``.
    """
    public = public_estimators(kind)
    unknown = [name for name in settings if name not in public]
    if unknown:
        raise KeyError(f"not public obliquetrees estimators{f' ({kind})' * bool(kind)}: {unknown}")
    return {**settings, **{name: default(name) for name in public if name not in settings}}


def every_estimator_labelled(table, kind, default=_defaults):
    """A label -> (dotted class, parameters) table completed to every public estimator of ``kind``.

    Public estimators no ``obliquetrees.<name>`` entry of ``table`` names are
    inserted after its last obliquetrees entry (before the peers), labelled
    ``"<short name>()"`` with ``default(name)`` as parameters (``{}``: defaults).
    """
    ours = [label for label, (dotted, _) in table.items() if dotted.startswith("obliquetrees.")]
    named = {table[label][0].removeprefix("obliquetrees.") for label in ours}
    unknown = sorted(named - set(public_estimators(kind)))
    if unknown:
        raise KeyError(f"not public obliquetrees estimators ({kind}): {unknown}")
    added = {
        f"{short_name(name)}()": (f"obliquetrees.{name}", default(name))
        for name in public_estimators(kind)
        if name not in named
    }
    clash = sorted(set(added) & set(table))
    if clash:
        raise KeyError(f"labels of added estimators already in the table: {clash}")
    cut = list(table).index(ours[-1]) + 1 if ours else 0
    items = list(table.items())
    return dict(items[:cut] + list(added.items()) + items[cut:])
