"""Frozen dataclasses registered as JAX pytrees: the form of every fitted calibrator."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

import jax
import numpy as np

from bayescal._src.reprs import short_repr

__all__ = ["pytree_dataclass", "REGISTRY", "registered", "BEFORE_LOOKUP"]

_T = TypeVar("_T")

#: Every fitted class of both branches, by class name (what save/load know).
REGISTRY: dict[str, type[Any]] = {}

#: Run before a name missing from :data:`REGISTRY` is looked up: a class is entered only
#: when its module is imported, and a fresh process that loads a calibrator file may not
#: have imported its branch yet. The package root adds the import of both branches.
BEFORE_LOOKUP: list[Callable[[], None]] = []


def registered(name: str) -> type[Any] | None:
    """The fitted class called ``name`` (after :data:`BEFORE_LOOKUP`), or None."""
    if name not in REGISTRY:
        for hook in BEFORE_LOOKUP:
            hook()
    return REGISTRY.get(name)


def _leaves_equal(a: Any, b: Any) -> bool:
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    if ta != tb:  # the tree structure holds the class and its meta fields
        return False
    for x, y in zip(la, lb, strict=True):
        if isinstance(x, jax.core.Tracer) or isinstance(y, jax.core.Tracer):
            if x is not y:  # traced values have no truth value: equal only if identical
                return False
            continue
        xa, ya = np.asarray(x), np.asarray(y)
        if xa.dtype != ya.dtype or xa.shape != ya.shape:
            return False
        if not np.array_equal(xa, ya, equal_nan=xa.dtype.kind in "fc"):
            return False
    return True


def _eq(self: Any, other: Any) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    return _leaves_equal(self, other)


def _repr(self: Any) -> str:
    # Bounded whatever the size: scalars as numbers, arrays summarized (reprs.py).
    return short_repr(self, self._data_fields + self._meta_fields)


def _hash(self: Any) -> int:
    # Equal objects have equal classes and meta fields, so this hash is consistent
    # with __eq__ (arrays are unhashable and stay out of it).
    return hash((type(self).__name__,) + tuple(getattr(self, f) for f in self._meta_fields))


@dataclass_transform(frozen_default=True)
def pytree_dataclass(
    data: tuple[str, ...], meta: tuple[str, ...] = ()
) -> Callable[[type[_T]], type[_T]]:
    """Class decorator: a frozen dataclass whose ``data`` fields are pytree leaves.

    ``meta`` fields (option strings, static numbers) go into the tree structure, so a
    fitted object passes through ``jax.jit`` and ``jax.vmap``. The field lists are also
    kept on the class (``_data_fields``, ``_meta_fields``) for saving without pickle,
    and the class is entered in :data:`REGISTRY` under its name.

    Equality never raises: two objects are equal when they have the same class, the
    same meta fields and bitwise-equal arrays of the same dtype and shape (NaN equal to
    NaN); traced arrays are equal only to themselves. The hash uses the class and the
    meta fields. The repr is short for any size: scalar fields print as numbers and
    arrays are summarized (:func:`bayescal._src.reprs.summarize`), unless the class
    defines its own ``__repr__``.
    """

    def wrap(cls: type[_T]) -> type[_T]:
        own_repr = "__repr__" in cls.__dict__
        cls = dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
        tagged: Any = cls
        tagged._data_fields, tagged._meta_fields = tuple(data), tuple(meta)
        tagged.__eq__ = _eq
        tagged.__hash__ = _hash
        if not own_repr:
            tagged.__repr__ = _repr
        REGISTRY[cls.__name__] = cls
        return jax.tree_util.register_dataclass(
            cls, data_fields=list(data), meta_fields=list(meta)
        )

    return wrap
