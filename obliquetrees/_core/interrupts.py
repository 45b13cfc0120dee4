"""Ctrl-C during a compiled kernel surfaces as ``KeyboardInterrupt``.

A SIGINT that arrives while a numba kernel runs is only recorded: compiled
code does not check for signals. When the kernel returns, numba boxes its
array results by calling a Python function
(``numba.core.serialize._numba_unpickle``, which rebuilds the array type);
the interpreter runs the pending signal handler there, the
``KeyboardInterrupt`` is raised inside that call, numba's boxing does not
check for it, and the call ends in a chain of ``SystemError: ... returned a
result with an exception set`` (one per boxed array) instead of the
interrupt. :func:`interrupt_behind` finds the interrupt so that the one
boundary every fit passes (``_fit_context``) raises it as it is.
"""


def interrupt_behind(exc):
    """The ``KeyboardInterrupt`` a chain of ``SystemError`` hides, or None.

    Only a chain of ``SystemError`` (each caused by, or raised while
    handling, the next) that ends in a ``KeyboardInterrupt`` counts: any
    other error is left as it is.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    interrupt : KeyboardInterrupt or None
    """
    seen = set()
    while isinstance(exc, SystemError) and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__
    if seen and isinstance(exc, KeyboardInterrupt):
        return exc
    return None
