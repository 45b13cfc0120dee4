"""Training of random hinge forests and ferns (Lay et al.) by minibatch SGD.

Model (one forward pass, per sample ``x``)::

    z = (x - x_mean) / x_scale                  standardised input (filled gap)
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
"""

import time

import numpy as np

from obliquetrees._core.tree import ObliqueTree, fold_standardization
from obliquetrees._core.validation import (
    INDEX_DTYPE,
    VALUE_DTYPE,
    check_array,
    check_finite,
    check_int,
    check_n_features,
)

BN_EPS = 1e-7
BN_ALPHA_MAX = 0.99
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8
ADAGRAD_EPS = 1e-10
PREDICT_CHUNK = 8192
#: Deepest tree the estimators allow (``max_depth`` constraint).
MAX_DEPTH = 20

_OPT_CODES = {"adam": 0, "lazy_adam": 1, "adagrad": 2, "sgd": 3}


class HingeModel:
    """All learnable and running state of a hinge forest (numpy arrays only)."""

    def __init__(self, **arrays):
        self.__dict__.update(arrays)

    @property
    def n_trees(self):
        return self.thr.shape[0]

    @property
    def n_leaves(self):
        return self.W.shape[1]

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
        kernels read without bounds checks.
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
        check_array(self.feat, "feat", i64, 2, (M, n_thr))
        if self.feat.min() < 0 or self.feat.max() >= H:
            raise ValueError(f"feat must lie in [0, H) = [0, {H}).")
        if not np.all(self.bn_var + BN_EPS > 0) or np.any(self.x_scale == 0):
            raise ValueError("bn_var + eps and x_scale must be positive / non-zero.")
        step = check_int(self.step, "step")
        check_int(self.bn_count, "bn_count")
        if self.opt_state is not None:
            self._check_opt_state(step, M, 2**depth, n_thr)

    def _check_opt_state(self, step, M, L, n_thr):
        if self.optimizer not in _OPT_CODES:
            raise ValueError(f"unknown optimizer {self.optimizer!r}.")
        dense_second = self.optimizer in ("adam", "lazy_adam")
        for name in ["W", "thr", "A"] + (["Q", "q"] if self.head == "linear" else []):
            shape = getattr(self, name).shape
            check_array(self.opt_state[name + "_1"], name + "_1", VALUE_DTYPE, len(shape), shape)
            second = shape if dense_second else (1,) * len(shape)
            check_array(self.opt_state[name + "_2"], name + "_2", VALUE_DTYPE, len(shape), second)
        for name, shape in (
            ("wmark", (M, L)),
            ("wslot", (M, L)),
            ("tmark", (M, n_thr)),
            ("tslot", (M, n_thr)),
        ):
            check_array(self.opt_state[name], name, INDEX_DTYPE, 2, shape)
        # a slot is read only where its mark equals the current step
        if self.opt_state["wmark"].max() >= step or self.opt_state["tmark"].max() >= step:
            raise ValueError("optimiser marks must be older than the current step.")

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.check_invariants()  # the kernels trust these arrays

    def params(self):
        """Names of the arrays that define predictions (snapshot for early stopping)."""
        names = ["A", "bn_mean", "bn_var", "thr", "W"]
        if self.head == "linear":
            names += ["Q", "q"]
        return names


def _deep_copy(value):
    if isinstance(value, np.ndarray):
        return np.array(value)  # a plain writable ndarray, also from a memmap
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    return value


def init_model(
    n_inputs,
    n_outputs,
    *,
    n_trees,
    depth,
    tree_type,
    n_hinge_features,
    head,
    x_mean,
    x_scale,
    seed,
):
    """Initialise a hinge forest (the paper's Algorithm 1).

    Thresholds ``U(-3, 3)`` (they act on batch-normalised features), leaf
    weights ``N(0, 0.01)``, feature indices uniform over the ``H`` hinge
    features. The linear layer gets PyTorch's default ``U(-1/sqrt(p),
    1/sqrt(p))`` (the paper does not say); with ``n_hinge_features=None`` it
    is the identity and stays fixed. The linear head, if any, gets the same
    default initialisation.
    """
    rng = np.random.default_rng(seed)
    learn_A = n_hinge_features is not None
    H = n_inputs if not learn_A else int(n_hinge_features)
    if learn_A:
        bound = 1.0 / np.sqrt(n_inputs)
        A = rng.uniform(-bound, bound, size=(H, n_inputs))
    else:
        A = np.eye(n_inputs)
    n_thr = depth if tree_type == "fern" else 2**depth - 1
    L = 2**depth
    C = n_outputs if head == "sum" else 1
    feat = rng.integers(0, H, size=(n_trees, n_thr)).astype(np.int64)
    thr = rng.uniform(-3.0, 3.0, size=(n_trees, n_thr))
    W = rng.normal(0.0, 0.01, size=(n_trees, L, C))
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
        is_fern=tree_type == "fern",
        head=head,
        n_outputs=int(n_outputs),
        x_mean=np.asarray(x_mean, dtype=np.float64),
        x_scale=np.asarray(x_scale, dtype=np.float64),
        step=0,
        opt_state=None,
        optimizer=None,
    )
    if head == "linear":
        bound = 1.0 / np.sqrt(n_trees)
        model.Q = rng.uniform(-bound, bound, size=(n_outputs, n_trees))
        model.q = rng.uniform(-bound, bound, size=n_outputs)
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
    M, L = model.W.shape[:2]
    NT = model.thr.shape[1]
    state["wmark"] = np.full((M, L), -1, dtype=np.int64)
    state["wslot"] = np.zeros((M, L), dtype=np.int64)
    state["tmark"] = np.full((M, NT), -1, dtype=np.int64)
    state["tslot"] = np.zeros((M, NT), dtype=np.int64)
    return state


def _standardise(model, X):
    return (X - model.x_mean) / model.x_scale


def hinge_features(model, Z):
    """Batch-normalised hinge features ``u`` of standardised inputs ``Z``."""
    Hf = Z @ model.A.T
    return (Hf - model.bn_mean) / np.sqrt(model.bn_var + BN_EPS)


def _forward_out(model, U, store_bufs=None):
    from obliquetrees._training import _hinge_kernels as K  # numba is imported on first use

    n = U.shape[0]
    M = model.n_trees
    stride = 1 if model.head == "linear" else 0
    n_out = M if model.head == "linear" else model.n_outputs
    out = np.empty((n, n_out))
    if store_bufs is None:
        dummy_i = np.empty((1, 1), dtype=np.int64)
        K.forward(
            U,
            model.thr,
            model.feat,
            model.W,
            model.depth,
            model.is_fern,
            stride,
            out,
            dummy_i,
            np.empty((1, 1)),
            dummy_i,
            False,
        )
    else:
        leaf, rstar, vstar = store_bufs
        K.forward(
            U,
            model.thr,
            model.feat,
            model.W,
            model.depth,
            model.is_fern,
            stride,
            out,
            leaf[:n],
            rstar[:n],
            vstar[:n],
            True,
        )
    return out


def _head(model, out):
    if model.head == "linear":
        return out @ model.Q.T + model.q
    return out


def decision_values(model, X, n_threads=1):
    """Raw outputs (logits or standardised regression values), shape (n, K).

    ``X`` is raw (unstandardised) input, dense; processed in chunks.
    """
    from obliquetrees._core._blas import blas_limit
    from obliquetrees._core._jit import numba_threads

    check_n_features(X, model.A.shape[1], "the hinge model")
    with blas_limit(1), numba_threads(n_threads):
        return _decision_values(model, X)


def _decision_values(model, X):
    """:func:`decision_values` in the caller's thread limits.

    ``threadpool_limits`` scans the loaded libraries on every entry (~4 ms),
    which dominated the per-epoch validation of small data sets.
    """
    X = np.asarray(X)
    n = X.shape[0]
    res = np.empty((n, model.n_outputs))
    for start in range(0, n, PREDICT_CHUNK):
        Xc = np.asarray(X[start : start + PREDICT_CHUNK], dtype=np.float64)
        U = np.ascontiguousarray(hinge_features(model, _standardise(model, Xc)))
        res[start : start + Xc.shape[0]] = _head(model, _forward_out(model, U))
    return res


def softmax(F):
    E = np.exp(F - F.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


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
    F = _decision_values(model, X)
    loss, _ = loss_and_grad(F, Y, w, task)
    return loss * X.shape[0] / max(w.sum(), 1e-300)


def batch_gradients(model, Zb, Yb, wb, task):
    """Loss and exact gradients on one batch of standardised inputs ``Zb``.

    Runs the same kernels as training (without an update) and scatters the
    sparse tree gradients into dense arrays; for tests and diagnostics.
    ``Yb``: class indices or (B, K) targets; ``wb``: per-sample weights.

    Returns
    -------
    loss : float
    grads : dict of ndarray
        ``W``, ``thr``, ``A`` (if learnt), ``Q`` and ``q`` (linear head).
    """
    from obliquetrees._training import _hinge_kernels as K  # numba is imported on first use

    B = Zb.shape[0]
    M, L, C = model.W.shape
    NT = model.thr.shape[1]
    leaf = np.empty((B, M), dtype=np.int64)
    rstar = np.empty((B, M))
    vstar = np.empty((B, M), dtype=np.int64)
    Hf = Zb @ model.A.T
    sd = np.sqrt(model.bn_var + BN_EPS)
    U = np.ascontiguousarray((Hf - model.bn_mean) / sd)
    out = _forward_out(model, U, (leaf, rstar, vstar))
    F = _head(model, out)
    if task != "classification" and np.ndim(Yb) == 1:
        Yb = Yb[:, None]
    loss, G = loss_and_grad(F, Yb, wb, task)
    grads = {}
    if model.head == "linear":
        grads["Q"] = G.T @ out
        grads["q"] = G.sum(axis=0)
        G_trees = np.ascontiguousarray(G @ model.Q)
        stride = 1
    else:
        G_trees = np.ascontiguousarray(G)
        stride = 0
    contrib = np.empty((B, M))
    contrib_feat = np.empty((B, M), dtype=np.int64)
    gW = np.empty((M, B, C))
    gt = np.empty((M, B))
    tw = np.empty((M, B + 1), dtype=np.int64)
    tt = np.empty((M, B + 1), dtype=np.int64)
    z = np.zeros(1)
    K.backward_update(
        G_trees,
        leaf,
        rstar,
        vstar,
        model.feat,
        model.thr,
        model.W,
        stride,
        contrib,
        contrib_feat,
        0,
        model.W,
        model.W,
        model.thr,
        model.thr,
        z,
        0,
        np.full((M, L), -1, dtype=np.int64),
        np.zeros((M, L), dtype=np.int64),
        np.full((M, NT), -1, dtype=np.int64),
        np.zeros((M, NT), dtype=np.int64),
        gW,
        gt,
        tw,
        tt,
        False,
    )
    dW = np.zeros_like(model.W)
    dt = np.zeros_like(model.thr)
    for m in range(M):  # scatter of the slots (tests only)
        dW[m, tw[m, : tw[m, B]]] = gW[m, : tw[m, B]]
        dt[m, tt[m, : tt[m, B]]] = gt[m, : tt[m, B]]
    grads["W"] = dW
    grads["thr"] = dt
    if model.learn_A:
        gU = np.empty((B, model.A.shape[0]))
        K.input_gradient(contrib, contrib_feat, gU)
        grads["A"] = (gU / sd).T @ Zb
    return loss, grads


def ensure_opt_state(model, optimizer):
    """(Re)create optimiser buffers when the optimiser changes."""
    if model.opt_state is None or model.optimizer != optimizer:
        model.opt_state = _init_opt_state(model, optimizer)
        model.optimizer = optimizer


class _EpochScratch:
    def __init__(self, model, B):
        M = model.n_trees
        C = model.W.shape[2]
        K = model.n_outputs
        Hn, p = model.A.shape
        n_out = M if model.head == "linear" else K
        self.Zb = np.empty((B, p))
        self.U = np.empty((B, Hn))
        self.out = np.empty((B, n_out))
        self.F = np.empty((B, K))
        self.G = np.empty((B, K))
        self.Gt = np.empty((B, M))
        self.leaf = np.empty((B, M), dtype=np.int64)
        self.rstar = np.empty((B, M))
        self.vstar = np.empty((B, M), dtype=np.int64)
        self.contrib = np.empty((B, M))
        self.contrib_feat = np.empty((B, M), dtype=np.int64)
        self.gW = np.empty((M, B, C))
        self.gt = np.empty((M, B))
        self.touched_w = np.empty((M, B + 1), dtype=np.int64)
        self.touched_t = np.empty((M, B + 1), dtype=np.int64)
        self.gU = np.empty((B, Hn))


def run_epoch(model, Z, Yi, Yf, w, order, task, optimizer, lr, batch_size, scratch=None):
    """One epoch over ``Z[order]`` (standardised inputs) in one compiled call.

    Returns the per-batch mean losses.
    """
    from obliquetrees._training import _hinge_kernels as K  # numba is imported on first use

    ensure_opt_state(model, optimizer)
    B = min(int(batch_size), order.shape[0])
    if scratch is None:
        scratch = _EpochScratch(model, B)
    st = model.opt_state
    linear = model.head == "linear"
    dummy = np.zeros((1, 1))
    Q = model.Q if linear else dummy
    q = model.q if linear else np.zeros(1)
    eps = ADAM_EPS if optimizer in ("adam", "lazy_adam") else ADAGRAD_EPS
    counters = np.array([model.bn_count, model.step], dtype=np.int64)
    nbatch = (order.shape[0] + B - 1) // B
    batch_loss = np.empty(nbatch)
    S = scratch
    K.train_epoch(
        Z,
        Yi,
        Yf,
        w,
        order,
        B,
        task == "classification",
        linear,
        model.learn_A,
        model.A,
        model.bn_mean,
        model.bn_var,
        counters,
        model.feat,
        model.thr,
        model.W,
        Q,
        q,
        model.depth,
        model.is_fern,
        _OPT_CODES[optimizer],
        float(lr),
        ADAM_BETA1,
        ADAM_BETA2,
        eps,
        st["A_1"],
        st["A_2"],
        st["W_1"],
        st["W_2"],
        st["thr_1"],
        st["thr_2"],
        st.get("Q_1", dummy),
        st.get("Q_2", dummy),
        st.get("q_1", np.zeros(1)),
        st.get("q_2", np.zeros(1)),
        st["wmark"],
        st["wslot"],
        st["tmark"],
        st["tslot"],
        S.Zb,
        S.U,
        S.out,
        S.F,
        S.G,
        S.Gt,
        S.leaf,
        S.rstar,
        S.vstar,
        S.contrib,
        S.contrib_feat,
        S.gW,
        S.gt,
        S.touched_w,
        S.touched_t,
        S.gU,
        batch_loss,
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
    *,
    task,
    optimizer,
    learning_rate,
    batch_size,
    max_epochs,
    seed,
    X_val=None,
    Y_val=None,
    w_val=None,
    n_iter_no_change=None,
    n_threads=1,
    verbose=0,
    history=None,
):
    """Run up to ``max_epochs`` epochs of minibatch training (in place).

    With validation data, the model's prediction parameters are restored to
    the epoch of lowest validation loss at the end (optimiser state keeps the
    last step, so warm starts continue from the restored parameters), and
    training stops after ``n_iter_no_change`` epochs without improvement.

    Returns a history dict: ``loss`` (mean training loss per epoch),
    ``val_loss``, ``best_epoch`` (1-based, over all epochs of this call),
    ``epoch_time`` (seconds per epoch).
    """
    from threadpoolctl import threadpool_limits

    from obliquetrees._core._jit import numba_threads

    n = X.shape[0]
    B = min(int(batch_size), n)
    rng = np.random.default_rng(seed)
    w = np.ones(n) if sample_weight is None else sample_weight / sample_weight.mean()
    Z = np.ascontiguousarray(_standardise(model, X))
    Yi, Yf = _targets(Y, task)
    ensure_opt_state(model, optimizer)
    scratch = _EpochScratch(model, B)
    hist = (
        history
        if history is not None
        else {"loss": [], "val_loss": [], "epoch_time": [], "best_epoch": 0}
    )
    best = np.inf
    best_params = None
    since_best = 0
    with threadpool_limits(limits=1, user_api="blas"), numba_threads(n_threads):
        for _ in range(max_epochs):
            t0 = time.perf_counter()
            order = rng.permutation(n)
            losses = run_epoch(
                model, Z, Yi, Yf, w, order, task, optimizer, learning_rate, B, scratch
            )
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
            msg = f"epoch {len(hist['loss'])}: loss {total / n:.5f}"
            if X_val is not None:
                vl = mean_loss(model, X_val, Y_val, w_val, task)
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
            if verbose:
                print(msg + f" ({hist['epoch_time'][-1]:.2f} s)")
            if n_iter_no_change is not None and since_best >= n_iter_no_change:
                break
    if best_params is not None:
        for k, v in best_params.items():
            setattr(model, k, v)
    else:
        hist["best_epoch"] = len(hist["loss"])
    return hist


# --------------------------------------------------------------- storage
def leaf_counts(model, X, sample_weight=None, n_threads=1):
    """(Weighted) number of samples reaching each leaf, shape (M, L)."""
    from threadpoolctl import threadpool_limits

    from obliquetrees._core._jit import numba_threads

    M, L = model.W.shape[:2]
    counts = np.zeros(M * L)
    n = X.shape[0]
    chunk = PREDICT_CHUNK
    bufs = (
        np.empty((chunk, M), dtype=np.int64),
        np.empty((chunk, M)),
        np.empty((chunk, M), dtype=np.int64),
    )
    with threadpool_limits(limits=1, user_api="blas"), numba_threads(n_threads):
        for start in range(0, n, chunk):
            Xc = np.asarray(X[start : start + chunk], dtype=np.float64)
            U = np.ascontiguousarray(hinge_features(model, _standardise(model, Xc)))
            _forward_out(model, U, bufs)
            leaf = bufs[0][: Xc.shape[0]] + (np.arange(M) * L)[None, :]
            wts = (
                None
                if sample_weight is None
                else np.repeat(sample_weight[start : start + Xc.shape[0]], M)
            )
            counts += np.bincount(leaf.ravel(), weights=wts, minlength=M * L)
    return counts.reshape(M, L)


def to_trees(model, counts, value_scale=1.0):
    """Store every hinge tree/fern as an :class:`ObliqueTree` on the raw input.

    Node ``v`` of the perfect heap-ordered tree tests hinge feature
    ``f = feat[v]`` against threshold ``t``: right iff ``u_f - t > 0`` with
    ``u_f = (A_f . z - bn_mean_f) / sd_f`` and ``z`` the standardised input,
    i.e. weights ``A_f / sd_f`` and bias ``-bn_mean_f / sd_f - t`` on ``z``,
    then folded into raw units. Ferns are stored as trees whose nodes of one
    level share the level's split. Leaf ``value`` holds the leaf weight
    vector ``W[m, l]`` times ``value_scale`` (the tree output is
    ``|r*| value``, see the estimators' Notes); inner nodes hold zeros.
    ``counts`` (M, L) are the training samples per leaf.
    """
    M, L, C = model.W.shape
    D = model.depth
    n_inner = L - 1
    n_nodes = 2 * L - 1
    p = model.A.shape[1]
    sd = np.sqrt(model.bn_var + BN_EPS)
    Wz = model.A / sd[:, None]  # (H, p) weights on z
    bz = -model.bn_mean / sd  # (H,)
    nodes = np.arange(n_nodes)
    left = np.where(nodes < n_inner, 2 * nodes + 1, -1)
    right = np.where(nodes < n_inner, 2 * nodes + 2, -1)
    level = np.floor(np.log2(nodes[:n_inner] + 1)).astype(np.int64)
    depth = np.floor(np.log2(nodes + 1)).astype(np.int64)
    trees = []
    for m in range(M):
        d_idx = level if model.is_fern else np.arange(n_inner)
        f = model.feat[m, d_idx]
        t = model.thr[m, d_idx]
        dense = np.zeros((n_nodes, p))
        dense[:n_inner] = Wz[f]
        bias = np.zeros(n_nodes)
        bias[:n_inner] = bz[f] - t
        value = np.zeros((n_nodes, C))
        value[n_inner:] = model.W[m] * value_scale
        nns = np.zeros(n_nodes)
        nns[n_inner:] = counts[m]
        for lev in range(D - 1, -1, -1):
            lo, hi = 2**lev - 1, 2 ** (lev + 1) - 1
            idx = np.arange(lo, hi)
            nns[idx] = nns[2 * idx + 1] + nns[2 * idx + 2]
        tree = ObliqueTree.from_dense(left, right, dense, bias, value, nns, depth=depth)
        trees.append(fold_standardization(tree, model.x_mean, model.x_scale))
    return trees
