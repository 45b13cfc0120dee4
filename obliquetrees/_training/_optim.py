"""The optimisers every method trains with: momentum SGD, Adam, AdaGrad, plain SGD.

Scalar steps (inlined into the methods' kernels) and in-place array steps.
Each returns the same bits as the inline code it replaced.
"""

import numpy as np

from obliquetrees._core._jit import jit, jit_inline

#: Adam's defaults (Kingma & Ba; PyTorch's too).
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8
#: AdaGrad's ``eps`` (PyTorch's default).
ADAGRAD_EPS = 1e-10


@jit_inline
def momentum_velocity(velocity, gradient, momentum, step_size):
    """Heavy-ball velocity ``momentum * v - step_size * g`` (add it to the parameter)."""
    return momentum * velocity - step_size * gradient


@jit_inline
def momentum_step(param, velocity, gradient, momentum, step_size):
    """Heavy-ball step on a 1-D array, in place: the velocity first, then the parameter."""
    for j in range(param.shape[0]):
        velocity[j] = momentum_velocity(velocity[j], gradient[j], momentum, step_size)
        param[j] += velocity[j]


@jit_inline
def adam_scalar(param, grad, m, v, step_size, bc2, beta1, beta2, eps):
    """One Adam step (Kingma & Ba) of one parameter, minimising.

    ``step_size`` is the learning rate over the first bias correction
    ``1 - beta1**t``; ``bc2`` is ``sqrt(1 - beta2**t)``. Returns the new
    ``(param, m, v)``.
    """
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    return param - step_size * m / (np.sqrt(v) / bc2 + eps), m, v


@jit_inline
def adam_corrections(lr, step, beta1, beta2):
    """``(lr / (1 - beta1**t), sqrt(1 - beta2**t))`` for 1-based step ``t``."""
    return lr / (1.0 - beta1**step), np.sqrt(1.0 - beta2**step)


@jit
def adam_update(param, grad, m, v, step, lr, beta1, beta2, eps):
    """Adam step on flat arrays, in place (``step`` counts from 1)."""
    a, bc2 = adam_corrections(lr, step, beta1, beta2)
    for j in range(param.shape[0]):
        param[j], m[j], v[j] = adam_scalar(param[j], grad[j], m[j], v[j], a, bc2, beta1, beta2, eps)


@jit
def adam_update_2d(param, grad, m, v, step, lr, beta1, beta2, eps):
    """:func:`adam_update` on 2-D arrays (blocks of a matrix, any strides)."""
    a, bc2 = adam_corrections(lr, step, beta1, beta2)
    for i in range(param.shape[0]):
        for j in range(param.shape[1]):
            param[i, j], m[i, j], v[i, j] = adam_scalar(
                param[i, j], grad[i, j], m[i, j], v[i, j], a, bc2, beta1, beta2, eps
            )


# Adam with the second bias correction passed as its reciprocal, and AdaGrad:
# the steps of the hinge forests (sparse rows and small dense blocks).


@jit_inline
def adam_scalar_inv(param, grad, m, v, step_size, inv_bc2, beta1, beta2, eps):
    """:func:`adam_scalar` with ``inv_bc2 = 1 / sqrt(1 - beta2**t)`` (multiplied, not divided).

    The same step in exact arithmetic, not in floating point (``x * (1 / y)``
    and ``x / y`` differ in the last bit): hinge forests were trained with this
    form and E2EDT with :func:`adam_scalar`, so serving both with one form would
    change the fitted models of one of them. Returns the new ``(param, m, v)``.
    """
    m = beta1 * m + (1.0 - beta1) * grad
    v = beta2 * v + (1.0 - beta2) * grad * grad
    return param - step_size * m / (np.sqrt(v) * inv_bc2 + eps), m, v


@jit
def adam_update_inv(param, grad, m, v, step_size, inv_bc2, beta1, beta2, eps):
    """:func:`adam_scalar_inv` on flat arrays, in place (corrections given by the caller)."""
    for j in range(param.shape[0]):
        param[j], m[j], v[j] = adam_scalar_inv(
            param[j], grad[j], m[j], v[j], step_size, inv_bc2, beta1, beta2, eps
        )


@jit_inline
def adagrad_scalar(param, grad, acc, lr, eps):
    """One AdaGrad step (Duchi et al.) of one parameter: returns the new ``(param, acc)``.

    ``acc`` accumulates squared gradients; a zero gradient leaves both unchanged.
    """
    acc = acc + grad * grad
    return param - lr * grad / (np.sqrt(acc) + eps), acc


@jit
def adagrad_update(param, grad, acc, lr, eps):
    """:func:`adagrad_scalar` on flat arrays, in place."""
    for j in range(param.shape[0]):
        param[j], acc[j] = adagrad_scalar(param[j], grad[j], acc[j], lr, eps)


@jit
def sgd_update(param, grad, lr):
    """Plain gradient step ``param -= lr * grad`` on flat arrays, in place."""
    for j in range(param.shape[0]):
        param[j] -= lr * grad[j]
