"""SciCode's comparison rules, as upstream's test cases call them (``cmp_tuple_or_list``, ``are_dicts_close``,
``are_csc_matrix_close``): our own code after ``src/scicode/compare/cmp.py``.

This module's text runs in the trusted judge before the test cases (and beside the ground truth when targets
are computed); it imports only numpy and scipy, the sandbox's packages. Values from the candidate arrive as
plain data (:mod:`benchmark.sandbox.remote_child`), so sparse matrices never reach these functions from that side; they
are compared densely when a target holds one. Tolerances are upstream's: ``np.allclose`` defaults (atol 1e-8,
rtol 1e-5).
"""

import numpy as np


def _is_sparse(value):
    return type(value).__module__.startswith("scipy.sparse")


def _dense(value):
    return value.toarray() if _is_sparse(value) else value


def _same_or_close(a, b, atol=1e-8, rtol=1e-5):
    """``np.allclose`` where it applies; equality for values it cannot compare (strings, ragged lists)."""
    try:
        return bool(np.allclose(_dense(a), _dense(b), atol=atol, rtol=rtol))
    except (ValueError, TypeError):
        return bool(a == b)


def are_dicts_close(dict1, dict2, atol=1e-8, rtol=1e-5):
    """Same keys (compared as text, as upstream turns sympy symbols into strings) and close values."""
    d1 = {str(k) if not isinstance(k, (int, float)) else k: v for k, v in dict1.items()}
    d2 = {str(k) if not isinstance(k, (int, float)) else k: v for k, v in dict2.items()}
    if d1.keys() != d2.keys():
        return False
    for key, v1 in d1.items():
        v2 = d2[key]
        if isinstance(v1, str) or isinstance(v2, str):
            if str(v1) != str(v2):
                return False
        elif not _same_or_close(v1, v2, atol, rtol):
            return False
    return True


def are_csc_matrix_close(matrix1, matrix2):
    """Sparse (or dense) matrices equal within ``np.allclose``'s default tolerances."""
    return bool(np.allclose(_dense(matrix1), _dense(matrix2)))


def cmp_tuple_or_list(var1, var2):
    """Element by element: dicts by :func:`are_dicts_close`, matrices densely, bools exactly, the rest allclose."""
    if len(var1) != len(var2):
        return False
    for v1, v2 in zip(var1, var2):
        if isinstance(v1, dict):
            if not isinstance(v2, dict) or not are_dicts_close(v1, v2):
                return False
        elif _is_sparse(v1):
            if not are_csc_matrix_close(v1, v2):
                return False
        elif isinstance(v1, bool):
            if not v1 == v2:
                return False
        elif not _same_or_close(v1, v2):
            return False
    return True


# ---- one departure from upstream: a comparison that compares nothing is no pass ----
# ``np.allclose(f(x), target)`` broadcasts: an answer returning an array with a zero-length axis, shape
# (0, 1, 1, 1, 1, 1), broadcasts against any target of up to five dimensions, the comparison is empty, and upstream's
# assert passes for every such sub-step. The test cases below this text read ``np`` as this module's, so ``allclose``
# and ``isclose`` refuse a comparison whose broadcast is empty while a side holds values; every other name is numpy's.

_numpy = np


def _compares_nothing(a, b):
    try:
        shape = _numpy.broadcast_shapes(_numpy.shape(a), _numpy.shape(b))
        return 0 in shape and (_numpy.size(a) > 0 or _numpy.size(b) > 0)
    except Exception:  # ragged or unbroadcastable: numpy's own comparison says what it says
        return False


def _allclose(a, b, *args, **kwargs):
    return False if _compares_nothing(a, b) else _numpy.allclose(a, b, *args, **kwargs)


def _isclose(a, b, *args, **kwargs):
    return _numpy.zeros(1, dtype=bool) if _compares_nothing(a, b) else _numpy.isclose(a, b, *args, **kwargs)


class _JudgedNumpy(type(_numpy)):
    """numpy, with the two comparisons above."""

    allclose = staticmethod(_allclose)
    isclose = staticmethod(_isclose)

    def __getattr__(self, name):
        return getattr(_numpy, name)


np = _JudgedNumpy("numpy")
