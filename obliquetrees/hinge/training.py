"""Training of random hinge forests and ferns (Lay et al.) by minibatch SGD.

Model (one forward pass, per sample ``x``)::

    z = (x - x_mean) / x_scale                  standardised input (filled gap);
                                                0 for features without spread in
                                                training (``x_ignored``)
    h = A z                                     bias-free linear layer (H features)
    u = (h - bn_mean) / sqrt(bn_var + BN_EPS)   batch norm without affine params,
                                                running statistics in training
                                                and prediction alike
    o_m = |r*_m(u)| W[m, leaf_m(u)]             hinge tree/fern m (Algorithm 3)
    f = sum_m o_m                 (head="sum")  or  f = Q o + q  (head="linear")
    loss = softmax cross-entropy (classification) or mean squared error

Gradients are exact and sparse (eqs. 11-12); the batch-norm statistics are
constants in the backward pass (as in the paper) and are updated *after* each
step from the batch's pre-normalisation features, with the reference code's
schedule ``alpha = min(i / (i + 1), 0.99)`` (``stat = alpha stat + (1 - alpha)
batch_stat``, unbiased batch variance). The first batch initialises them
before its forward pass (the reference code starts from whatever the
statistics were initialised to).

Everything here is arrays in, arrays out; :class:`HingeModel` holds plain
numpy arrays and Python scalars only (picklable), including optimiser state,
so ``warm_start`` and ``partial_fit`` continue exactly where training stopped.
The estimators make one call, :func:`fit_hinge`, with a :class:`HingeParams`;
prediction and storage are in :mod:`obliquetrees.hinge._forward`, the kernels in
:mod:`obliquetrees.hinge._kernels`.
"""

import time
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

from obliquetrees._core._random import generator
from obliquetrees._core.forest import return_freed_memory
from obliquetrees._core.tree import standardization
from obliquetrees._core.validation import (
    INDEX_DTYPE,
    VALUE_DTYPE,
    check_array,
    check_finite,
    check_int,
)
from obliquetrees._training._optim import ADAGRAD_EPS, ADAM_BETA1, ADAM_BETA2, ADAM_EPS
from obliquetrees._training._progress import Progress
from obliquetrees._training._rows import sparse_rows
from obliquetrees.hinge import _kernels as K
from obliquetrees.hinge import _monotonic as mono
from obliquetrees.hinge._forward import (
    decision_values_in_limits,
    leaf_counts,
    softmax,
)

#: Deepest tree the estimators allow (``max_depth`` constraint).
MAX_DEPTH = 20
#: Optimiser names and the kernels' codes.
OPTIMIZERS = {
    "adam": K.OPT_ADAM,
    "lazy_adam": K.OPT_LAZY_ADAM,
    "adagrad": K.OPT_ADAGRAD,
    "sgd": K.OPT_SGD,
}


@dataclass(frozen=True)
class HingeParams:
    """Hyper-parameters of one hinge forest fit, named as the estimators' parameters.

    Built by the estimator from its parameters (see there for each one's
    meaning); ``task`` is ``"classification"`` (softmax cross-entropy, targets
    are class indices) or ``"regression"`` (mean squared error over outputs).
    ``max_epochs`` is 1 for ``partial_fit``; ``n_iter_no_change`` applies only
    with validation data. ``monotonic_cst`` is resolved: one constraint per
    model input (the missing-value indicators unconstrained), or None.
    """

    task: str
    n_estimators: int
    max_depth: int
    tree_type: str
    n_hinge_features: int | None
    head: str
    optimizer: str
    learning_rate: float
    batch_size: int
    max_epochs: int
    n_iter_no_change: int
    verbose: int
    monotonic_cst: object  # int8 per input (missing indicators 0), or None


class HingeModel:
    """All learnable and running state of a hinge forest (numpy arrays only)."""

    def __init__(self, **arrays):
        self.__dict__.update(arrays)

    @property
    def n_trees(self):
        return self.thr.shape[0]

    def copy(self):
        """Deep copy in fresh writable arrays, optimiser state included.

        Training updates the arrays in place: warm starts train a copy, so a
        failed fit leaves the fitted model untouched, and a model loaded
        read-only (``joblib.load(..., mmap_mode="r")``) can be trained further.
        """
        return HingeModel(**{k: _deep_copy(v) for k, v in self.__dict__.items()})

    def check_invariants(self):
        """Raise ``ValueError`` unless the arrays are consistent and finite.

        Shapes and dtypes of the linear layer, batch-norm statistics, feature
        indices (in ``[0, H)``), thresholds, leaf weights, head and optimiser
        state against ``depth``, ``n_outputs`` and each other: everything the
        kernels read without bounds checks. ``x_scale`` is finite and
        positive; ``x_ignored`` marks the features without spread in training
        (their stored scale is 1), which the model ignores: see
        :meth:`z_scale`.
        """
        try:
            self._check_invariants()
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"Invalid HingeModel: missing or wrong-typed state ({exc}).") from None
        except ValueError as exc:
            raise ValueError(f"Invalid HingeModel: {exc}") from None

    def _check_invariants(self):
        f64, i64 = VALUE_DTYPE, INDEX_DTYPE
        depth = check_int(self.depth, "depth", low=1)
        if depth > MAX_DEPTH:
            raise ValueError(f"depth must be at most {MAX_DEPTH}; got {depth}.")
        n_outputs = check_int(self.n_outputs, "n_outputs", low=1)
        if self.head not in ("sum", "linear") or not isinstance(self.is_fern, bool | np.bool_):
            raise ValueError("head must be 'sum' or 'linear' and is_fern a bool.")
        check_array(self.A, "A", f64, 2)
        H, p = self.A.shape
        if H < 1 or p < 1:
            raise ValueError(f"A has shape {self.A.shape}; both sides must be >= 1.")
        M = self.thr.shape[0] if isinstance(self.thr, np.ndarray) and self.thr.ndim else 0
        if M < 1:
            raise ValueError("thr must hold at least one tree.")
        n_thr = depth if self.is_fern else 2**depth - 1
        C = n_outputs if self.head == "sum" else 1
        shapes = {
            "bn_mean": (H,),
            "bn_var": (H,),
            "thr": (M, n_thr),
            "W": (M, 2**depth, C),
            "x_mean": (p,),
            "x_scale": (p,),
        }
        if self.head == "linear":
            shapes.update(Q=(n_outputs, M), q=(n_outputs,))
        for name, shape in shapes.items():
            check_array(getattr(self, name), name, f64, len(shape), shape)
            check_finite(getattr(self, name), name)
        check_array(self.x_ignored, "x_ignored", np.bool_, 1, (p,))
        check_array(self.feat, "feat", i64, 2, (M, n_thr))
        if self.feat.min() < 0 or self.feat.max() >= H:
            raise ValueError(f"feat must lie in [0, H) = [0, {H}).")
        if not np.all(self.bn_var + K.BN_EPS > 0):
            raise ValueError("bn_var + eps must be positive.")
        if not np.all(self.x_scale > 0):
            raise ValueError("x_scale must be positive.")
        check_int(self.step, "step")
        check_int(self.bn_count, "bn_count")
        if self.monotonic_cst is not None:
            check_array(self.monotonic_cst, "monotonic_cst", np.int8, 1, (p,))
            check_array(self.monotone_dir, "monotone_dir", np.int8, 1, (H,))
            if not np.all(np.isin(self.monotonic_cst, (-1, 0, 1))) or not self.monotone_dir.any():
                raise ValueError("monotonic_cst must hold -1, 0, 1 and monotone_dir a direction.")
        if self.opt_state is not None:
            self._check_opt_state()

    def _check_opt_state(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}.")
        dense_second = self.optimizer in ("adam", "lazy_adam")
        for name in ["W", "thr", "A"] + (["Q", "q"] if self.head == "linear" else []):
            shape = getattr(self, name).shape
            check_array(self.opt_state[name + "_1"], name + "_1", VALUE_DTYPE, len(shape), shape)
            second = shape if dense_second else (1,) * len(shape)
            check_array(self.opt_state[name + "_2"], name + "_2", VALUE_DTYPE, len(shape), second)

    def z_scale(self):
        """The divisor of the standardisation ``z = (x - x_mean) / z_scale``.

        ``x_scale``, with ``+inf`` for the ignored features: their standardised
        value is then 0 whatever the input (the same arithmetic as
        :func:`~obliquetrees._core.tree.standardization`'s infinite scale, so
        dense, sparse and ONNX evaluation need no special case). The model
        stores the finite form (``x_scale`` 1 and ``x_ignored``), so a saved
        model holds finite numbers only.
        """
        return np.where(self.x_ignored, np.inf, self.x_scale)

    def __getstate__(self):
        return dict(self.__dict__)  # arrays, numbers, strings, and a dict of arrays

    def __setstate__(self, state):
        if "x_ignored" not in state and isinstance(state.get("x_scale"), np.ndarray):
            # models saved before x_ignored stored +inf as the scale of an ignored feature
            state = dict(state, **_finite_scale(state["x_scale"]))
        opt_state = state.get("opt_state")
        if isinstance(opt_state, dict) and "wmark" in opt_state:
            # models pickled before the slot maps became per-batch scratch
            # (:class:`_EpochScratch`) carry per-leaf step marks nothing reads
            opt_state = {k: v for k, v in opt_state.items() if k not in _OLD_MARKS}
            state = dict(state, opt_state=opt_state)
        # models pickled before monotonic constraints are unconstrained
        state = {"monotonic_cst": None, "monotone_dir": None, **state}
        self.__dict__.update(state)
        self.check_invariants()  # the kernels trust these arrays

    def params(self):
        """Names of the arrays that define predictions (snapshot for early stopping)."""
        names = ["A", "bn_mean", "bn_var", "thr", "W"]
        if self.head == "linear":
            names += ["Q", "q"]
        return names


#: Optimiser-state entries of models pickled before the per-batch slot maps.
_OLD_MARKS = ("wmark", "wslot", "tmark", "tslot")


def _finite_scale(scale):
    """``x_scale`` (1 where ``scale`` is ``+inf``: no spread) and ``x_ignored``."""
    scale = np.asarray(scale, dtype=np.float64)
    ignored = np.isposinf(scale)
    return {"x_scale": np.where(ignored, 1.0, scale), "x_ignored": ignored}


def _deep_copy(value):
    if isinstance(value, np.ndarray):
        return np.array(value)  # a plain writable ndarray, also from a memmap
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    return value


def init_model(n_inputs, n_outputs, params, x_mean, x_scale, seed, zero_output=False):
    """Initialise a hinge forest (the paper's Algorithm 1).

    Thresholds ``U(-3, 3)`` (they act on batch-normalised features), leaf
    weights ``N(0, 0.01)``, feature indices uniform over the ``H`` hinge
    features. The linear layer gets PyTorch's default ``U(-1/sqrt(p),
    1/sqrt(p))`` (the paper does not say); with ``n_hinge_features=None`` it
    is the identity and stays fixed. The linear head, if any, gets the same
    default initialisation.

    With ``zero_output`` the leaf weights and the head's bias start at 0
    (the same draws are made, so the rest is unchanged): the model outputs
    exactly 0 for every input. For regression targets that are all 0 (a
    constant target, standardised) this is the exact fit, and every
    gradient is then 0, so training keeps it (random leaf weights left
    noise of up to 0.4 target units that training on such a target only
    slowly removes).

    Parameters
    ----------
    n_inputs, n_outputs : int
        Input features ``p`` and outputs ``K`` (classes, or regression targets).
    params : HingeParams
        ``n_estimators``, ``max_depth``, ``tree_type``, ``n_hinge_features``
        and ``head`` are read.
    x_mean, x_scale : ndarray of shape (n_inputs,)
        The input standardisation (:func:`~obliquetrees._core.tree.standardization`;
        ``x_scale`` is ``+inf`` for a feature without spread, which the model
        stores as ``x_ignored`` with a scale of 1).
    seed : int
        Seeds numpy's generator for every initial value.
    zero_output : bool, default=False
        Start with zero leaf weights and head bias (see above).

    With ``params.monotonic_cst``, the same draws are made, then the
    decisions' features are redrawn from the monotone pool (first
    decisions) and the free features (the others), and every parameter is
    projected (:mod:`obliquetrees.hinge._monotonic`).

    Returns
    -------
    model : HingeModel
    """
    rng = generator(seed)
    n_trees = params.n_estimators
    depth = params.max_depth
    learn_A = params.n_hinge_features is not None
    H = n_inputs if not learn_A else int(params.n_hinge_features)
    if learn_A:
        bound = 1.0 / np.sqrt(n_inputs)
        A = rng.uniform(-bound, bound, size=(H, n_inputs))
    else:
        A = np.eye(n_inputs)
    n_thr = depth if params.tree_type == "fern" else 2**depth - 1
    L = 2**depth
    C = n_outputs if params.head == "sum" else 1
    feat = rng.integers(0, H, size=(n_trees, n_thr)).astype(np.int64)
    thr = rng.uniform(-3.0, 3.0, size=(n_trees, n_thr))
    W = rng.normal(0.0, 0.01, size=(n_trees, L, C))
    if zero_output:
        W[:] = 0.0
    model = HingeModel(
        A=np.ascontiguousarray(A),
        learn_A=learn_A,
        bn_mean=np.zeros(H),
        bn_var=np.ones(H),
        bn_count=0,
        feat=feat,
        thr=thr,
        W=W,
        depth=int(depth),
        is_fern=params.tree_type == "fern",
        head=params.head,
        n_outputs=int(n_outputs),
        x_mean=np.asarray(x_mean, dtype=np.float64),
        **_finite_scale(x_scale),
        step=0,
        opt_state=None,
        optimizer=None,
        monotonic_cst=None,
        monotone_dir=None,
    )
    if params.head == "linear":
        bound = 1.0 / np.sqrt(n_trees)
        model.Q = rng.uniform(-bound, bound, size=(n_outputs, n_trees))
        model.q = rng.uniform(-bound, bound, size=n_outputs)
        if zero_output:
            model.q[:] = 0.0
    if params.monotonic_cst is not None:
        model.monotonic_cst = np.asarray(params.monotonic_cst, dtype=np.int8)
        model.monotone_dir = mono.monotone_directions(model.monotonic_cst, H, learn_A)
        levels = mono.POOL_LEVELS[params.task]
        mono.draw_structure(model.feat, model.monotone_dir, rng, model.is_fern, levels)
        mono.project(model)
    return model


def _init_opt_state(model, optimizer):
    """Optimiser buffers (moments or accumulators), zero-initialised."""
    names = ["W", "thr", "A"] + (["Q", "q"] if model.head == "linear" else [])
    state = {}
    for name in names:
        shape = getattr(model, name).shape
        state[name + "_1"] = np.zeros(shape)
        state[name + "_2"] = (
            np.zeros(shape) if optimizer in ("adam", "lazy_adam") else np.zeros((1,) * len(shape))
        )
    return state


def loss_and_grad(F, Y, w, task):
    """Per-sample weighted mean loss and its gradient with respect to ``F``.

    Classification: ``Y`` int class indices, softmax cross-entropy.
    Regression: ``Y`` (n, K) floats, mean over outputs of squared errors.
    ``w``: per-sample weights normalised to mean 1 over the training set.
    """
    B = F.shape[0]
    if task == "classification":
        P = softmax(F)
        rows = np.arange(B)
        p_true = np.maximum(P[rows, Y], 1e-300)
        loss = -(w * np.log(p_true)).sum() / B
        G = P
        G[rows, Y] -= 1.0
        G *= (w / B)[:, None]
    else:
        D = F - Y
        K = F.shape[1]
        loss = (w * (D * D).sum(axis=1)).sum() / (B * K)
        G = D * (2.0 * w / (B * K))[:, None]
    return loss, G


def mean_loss(model, X, Y, w, task):
    """Weighted mean loss over a data set (raw X), in the caller's thread limits."""
    F = decision_values_in_limits(model, X)
    loss, _ = loss_and_grad(F, Y, w, task)
    return loss * X.shape[0] / max(w.sum(), 1e-300)


def ensure_opt_state(model, optimizer):
    """(Re)create optimiser buffers when the optimiser changes."""
    if model.opt_state is None or model.optimizer != optimizer:
        model.opt_state = _init_opt_state(model, optimizer)
        model.optimizer = optimizer


class _EpochScratch:
    """Per-batch work arrays of :func:`~obliquetrees.hinge._kernels.train_epoch`, for ``B`` rows.

    Sparse input needs no gathered block ``Zb`` (a (1, 1) placeholder).
    ``n_chunks``: chunks of trees the backward pass runs in parallel (one
    slot map each, see :func:`~obliquetrees.hinge._kernels.backward_update`); results do
    not depend on it.
    """

    def __init__(self, model, B, sparse=False, n_chunks=1):
        M = model.n_trees
        C = model.W.shape[2]
        K = model.n_outputs
        Hn, p = model.A.shape
        n_out = M if model.head == "linear" else K
        walk = (
            np.empty((B, M), dtype=np.int64),
            np.empty((B, M)),
            np.empty((B, M), dtype=np.int64),
        )
        grads = (
            np.empty((M, B, C)),  # gW
            np.empty((M, B)),  # gt
            np.empty((M, B + 1), dtype=np.int64),  # touched_w
            np.empty((M, B + 1), dtype=np.int64),  # touched_t
            np.empty((B, M)),  # contrib
            np.empty((B, M), dtype=np.int64),  # contrib_feat
        )
        self.arrays = (
            np.empty((1, 1) if sparse else (B, p)),  # Zb
            np.empty((B, Hn)),  # U
            np.empty((B, n_out)),  # out
            np.empty((B, K)),  # F
            np.empty((B, K)),  # G
            np.empty((B, M)),  # Gt
            walk,
            grads,
            np.empty((B, Hn)),  # gU
            (  # slot maps, -1 between batches
                np.full((n_chunks, model.W.shape[1]), -1, dtype=np.int32),
                np.full((n_chunks, model.thr.shape[1]), -1, dtype=np.int32),
            ),
        )


def _opt_state_args(model):
    """The optimiser state as the kernel's ``state`` tuple (dummies for absent parts)."""
    st = model.opt_state
    dummy = np.zeros((1, 1))
    moments = (st["W_1"], st["W_2"], st["thr_1"], st["thr_2"])
    head_Q = (st.get("Q_1", dummy), st.get("Q_2", dummy))
    head_q = (st.get("q_1", np.zeros(1)), st.get("q_2", np.zeros(1)))
    return moments, (st["A_1"], st["A_2"]), head_Q, head_q


def run_epoch(model, Z, Yi, Yf, w, order, params, scratch=None):
    """One epoch over ``Z[order]`` in one compiled call.

    ``Z`` is the standardised dense input, or the *raw* canonical CSR input
    (float64 data, int64 sorted indices), standardised algebraically entry by
    entry inside the kernel (see :func:`obliquetrees._training._rows.sparse_rows`).
    Trains ``model`` in place with ``params.optimizer``, ``learning_rate`` and ``batch_size``
    on the ``params.task`` loss (targets from :func:`_targets`, per-sample
    weights ``w``). Returns the per-batch mean losses.
    """
    ensure_opt_state(model, params.optimizer)
    B = min(int(params.batch_size), order.shape[0])
    sparse = sp.issparse(Z)
    if scratch is None:
        scratch = _EpochScratch(model, B, sparse, numba.get_num_threads())
    if sparse:
        csr = (True, sparse_rows(Z, model.x_mean, model.z_scale()))
        Z = np.zeros((1, 1))
    else:
        empty = np.zeros(0)
        csr = (False, (np.zeros(1, np.int64), np.zeros(0, np.int64), empty, empty, empty))
    linear = model.head == "linear"
    Q = model.Q if linear else np.zeros((1, 1))
    q = model.q if linear else np.zeros(1)
    eps = ADAM_EPS if params.optimizer in ("adam", "lazy_adam") else ADAGRAD_EPS
    counters = np.array([model.bn_count, model.step], dtype=np.int64)
    batch_loss = np.empty((order.shape[0] + B - 1) // B)
    K.train_epoch(
        (Z, Yi, Yf, w, order),
        csr,
        B,
        params.task == "classification",
        linear,
        model.learn_A,
        (model.A, model.bn_mean, model.bn_var, model.feat, model.thr, model.W, Q, q),
        model.depth,
        model.is_fern,
        counters,
        OPTIMIZERS[params.optimizer],
        (float(params.learning_rate), ADAM_BETA1, ADAM_BETA2, eps),
        _opt_state_args(model),
        scratch.arrays,
        batch_loss,
        mono.kernel_rules(model),
    )
    model.bn_count = int(counters[0])
    model.step = int(counters[1])
    return batch_loss


def _targets(Y, task):
    """(Yi, Yf) arrays for the epoch kernel."""
    if task == "classification":
        return np.ascontiguousarray(Y, dtype=np.int64), np.zeros((1, 1))
    Yf = np.asarray(Y, dtype=np.float64)
    if Yf.ndim == 1:
        Yf = Yf[:, None]
    return np.zeros(1, dtype=np.int64), np.ascontiguousarray(Yf)


def fit_epochs(
    model,
    X,
    Y,
    sample_weight,
    params,
    *,
    seed,
    X_val=None,
    Y_val=None,
    w_val=None,
    n_threads=1,
    overwrite_X=False,
):
    """Run up to ``params.max_epochs`` epochs of minibatch training (in place).

    With validation data, the model's prediction parameters are restored to
    the epoch of lowest validation loss at the end (optimiser state keeps the
    last step, so warm starts continue from the restored parameters), and
    training stops after ``params.n_iter_no_change`` epochs without
    improvement. ``seed`` seeds the minibatch order.

    Returns a history dict: ``loss`` (mean training loss per epoch),
    ``val_loss``, ``best_epoch`` (1-based, over all epochs of this call),
    ``epoch_time`` (seconds per epoch). With ``overwrite_X``, a dense
    float64 C-contiguous ``X`` (the caller's private copy) is standardised in
    place instead of into a new array.
    """
    from threadpoolctl import threadpool_limits

    from obliquetrees._core._jit import numba_threads

    n = X.shape[0]
    B = min(int(params.batch_size), n)
    rng = generator(seed)
    w = sample_weight / sample_weight.mean()
    sparse = sp.issparse(X)
    # sparse X stays raw CSR: the kernel standardises its stored entries algebraically;
    # dense X: (X - x_mean) / z_scale in X itself (overwrite_X) or in one new array
    Z = X
    if not sparse:
        in_place = overwrite_X and X.dtype == np.float64 and X.flags.c_contiguous
        Z = np.subtract(X, model.x_mean, out=X if in_place else None, order="C")
        np.divide(Z, model.z_scale(), out=Z)
    Yi, Yf = _targets(Y, params.task)
    ensure_opt_state(model, params.optimizer)
    hist = {"loss": [], "val_loss": [], "epoch_time": [], "best_epoch": 0}
    best = np.inf
    best_params = None
    since_best = 0
    name = "HingeForest" + ("Classifier" if params.task == "classification" else "Regressor")
    progress = Progress(
        name,
        params.max_epochs,
        unit="epoch",
        verbose=params.verbose,
        may_stop_early=X_val is not None,  # the time left is then at most what is printed
    )
    with threadpool_limits(limits=1, user_api="blas"), numba_threads(n_threads):
        scratch = _EpochScratch(model, B, sparse, numba.get_num_threads())
        for _ in range(params.max_epochs):
            t0 = time.perf_counter()
            order = rng.permutation(n)
            losses = run_epoch(model, Z, Yi, Yf, w, order, params, scratch)
            sizes = np.full(losses.shape[0], B)
            sizes[-1] = n - B * (losses.shape[0] - 1)
            total = float(losses @ sizes)
            if not (
                np.isfinite(total)
                and np.all(np.isfinite(model.W))
                and np.all(np.isfinite(model.thr))
                and np.all(np.isfinite(model.A))
            ):
                raise FloatingPointError("non-finite loss or parameters")
            hist["epoch_time"].append(time.perf_counter() - t0)
            hist["loss"].append(total / n)
            msg = f"loss {total / n:.5f}"
            if X_val is not None:
                vl = mean_loss(model, X_val, Y_val, w_val, params.task)
                hist["val_loss"].append(vl)
                msg += f", val_loss {vl:.5f}"
                if vl < best:
                    best = vl
                    since_best = 0
                    hist["best_epoch"] = len(hist["loss"])
                    best_params = {k: getattr(model, k).copy() for k in model.params()}
                    best_params["bn_count"] = model.bn_count
                else:
                    since_best += 1
            progress.update(detail=msg)
            if X_val is not None and since_best >= params.n_iter_no_change:
                progress.stop(f"no better validation loss for {since_best} epochs")
                break
    if best_params is not None:
        for k, v in best_params.items():
            setattr(model, k, v)
    else:
        hist["best_epoch"] = len(hist["loss"])
    return hist


def fit_hinge(
    X,
    Y,
    sample_weight,
    params,
    seeds,
    *,
    n_outputs,
    model=None,
    epochs_done=0,
    validation=None,
    n_threads=1,
    ignored=None,
):
    """Train a hinge forest (new, or a copy of ``model``) and count its leaves' samples.

    Parameters
    ----------
    X : ndarray or canonical CSR matrix of shape (n_samples, n_features)
        Raw training input. CSR (float64 data, int64 sorted indices, no
        duplicates) is never densified: moments from the stored entries,
        per-batch linear layer and its gradient over each row's stored
        entries, prediction in small dense blocks.
    Y : ndarray
        Class indices (n_samples,) for classification, targets
        (n_samples, n_outputs) for regression.
    sample_weight : ndarray of float64, shape (n_samples,)
        Per-sample loss weights (ones when the user gave none; normalised to
        mean 1 for training).
    params : HingeParams
    seeds : (int, int)
        ``(init_seed, epoch_seed)``: the initialisation's (new models only)
        and the minibatch order's, drawn from ``[epoch_seed, epochs_done]``.
    n_outputs : int
        Outputs of a new model (classes, or regression targets).
    model : HingeModel or None
        None: a new model, standardised on ``X`` and initialised from
        ``init_seed``. Otherwise training continues on a copy, optimiser
        state included (``warm_start``/``partial_fit``); ``model`` itself is
        never changed, so a failed fit keeps it.
    epochs_done : int
        Epochs run by earlier calls, so every call orders its minibatches
        differently.
    validation : tuple of ndarray or None
        ``(train, val)`` row indices of ``X``: train on ``train``, keep the
        epoch of lowest loss on ``val`` and stop early (see
        :func:`fit_epochs`). None trains on every row.
    n_threads : int
        numba threads; results do not depend on it.
    ignored : ndarray of bool of shape (n_features,) or None
        Inputs a new model ignores as it ignores the constant ones (their
        standardised value is 0, so the linear layer never weighs them): the
        inputs an input screen left out. None: only the constant ones.

    Returns
    -------
    model : HingeModel
        The trained model.
    info : dict
        ``counts``: ndarray of shape (n_trees, n_leaves), training samples per
        leaf from all of ``X`` (with the model, what
        :func:`obliquetrees.hinge._forward.to_forest` stores the trees from);
        ``history``: see :func:`fit_epochs`.
    """
    init_seed, epoch_seed = seeds
    if model is None:
        mean, scale = standardization(X)
        if ignored is not None:
            scale = np.where(ignored, np.inf, scale)
        zero = params.task == "regression" and not np.any(Y)  # a constant target
        model = init_model(X.shape[1], n_outputs, params, mean, scale, init_seed, zero)
    else:
        model = model.copy()
    # the split's row copies live only while training (not beside the stored trees)
    history = _fit_split(
        model, X, Y, sample_weight, params, validation, [epoch_seed, epochs_done], n_threads
    )
    # glibc keeps freed heap chunks (the training copies, the validation passes'
    # blocks) resident; hand them back
    return_freed_memory()
    counts = leaf_counts(model, X, sample_weight, n_threads)
    return_freed_memory()
    return model, {"counts": counts, "history": history}


def _fit_split(model, X, Y, sample_weight, params, validation, seed, n_threads):
    """:func:`fit_epochs` on the training rows of ``validation`` (all rows if None)."""
    if validation is None:
        return fit_epochs(model, X, Y, sample_weight, params, seed=seed, n_threads=n_threads)
    train, val = validation
    # a part whose rows all weigh zero is trained (or scored) unweighted
    w_val = sample_weight[val]
    if not w_val.sum() > 0:
        w_val = np.ones(val.shape[0])
    w_fit = sample_weight[train]
    if not w_fit.sum() > 0:
        w_fit = np.ones(train.shape[0])
    return fit_epochs(
        model,
        X[train],
        Y[train],
        w_fit,
        params,
        seed=seed,
        X_val=X[val],
        Y_val=Y[val],
        w_val=w_val,
        n_threads=n_threads,
        overwrite_X=True,  # X[train] is a copy: standardised where it lies
    )
