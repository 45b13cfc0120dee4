"""Training machinery shared by the methods (each method's own training is in its folder).

``grower`` (greedy growth: node table, limits, visiting order), ``features``
(``max_features`` resolved), ``_optim`` (momentum SGD, Adam, AdaGrad),
``_parallel`` (joblib over trees), ``_progress`` (progress lines), ``_rows``
(sparse rows for row-wise kernels), ``_weights`` (bootstrap row weights),
``_prefetch``; ``targets`` and ``axis_split`` (the leaf models of greedy
growth and the best axis-aligned split, used by CO2 and E2EDT's regressor);
``leaf_models`` (the leaf models of soft routing, used by E2EDT and
decision-machine fine-tuning); ``partitions`` (a dask worker's side of a fit
and a prediction). Imports only ``_core`` and ``_training``; nothing here
imports scikit-learn (a dask worker that runs it does not).
"""
