"""Saving fitted models with skops: the types to trust when loading.

`skops <https://skops.readthedocs.io>`_ saves an estimator without pickle
and refuses to load a file that names a type the caller does not trust. A
fitted obliquetrees model saves only numpy arrays, builtins (numbers,
strings, lists, dicts) and its own class: its trees, forests and other
containers are saved as dicts of arrays and rebuilt on load. skops trusts
numpy arrays and builtins by default, so the one list to pass is
:data:`TRUSTED_TYPES`::

    import skops.io as sio
    from obliquetrees.utils.persistence import TRUSTED_TYPES

    sio.dump(model, "model.skops")
    model = sio.load("model.skops", trusted=TRUSTED_TYPES)

``sio.get_untrusted_types(file="model.skops")`` lists what a file needs;
for a model of this package it is a subset of :data:`TRUSTED_TYPES`.

Loading a file is as safe as unpickling is here: every class of the list
rebuilds its containers through the checks that unpickling runs (shapes,
dtypes, child ids, feature indices, finite numbers; see the README's
"Safety"), so an edited or damaged file raises ``ValueError`` before any
compiled kernel reads its arrays.
"""

from obliquetrees._registry import saved_type_names

__all__ = ["TRUSTED_TYPES"]

#: Fully qualified names (as skops writes them) of the classes a saved model
#: of this package may need: the public estimators and the models created by
#: ``obliquetrees.convert.from_sklearn`` and ``obliquetrees.machine.finetune``,
#: each also under the module that held it in earlier versions (files saved
#: then name it so). Nothing else: the containers they hold are saved as plain data.
TRUSTED_TYPES = saved_type_names()
