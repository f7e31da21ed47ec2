"""Frozen dataclasses registered as JAX pytrees: the form of every fitted calibrator."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

import jax

__all__ = ["pytree_dataclass"]

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def pytree_dataclass(
    data: tuple[str, ...], meta: tuple[str, ...] = (), *, eq: bool = False
) -> Callable[[type[_T]], type[_T]]:
    """Class decorator: a frozen dataclass whose ``data`` fields are pytree leaves.

    ``meta`` fields (option strings, static numbers) go into the tree structure, so a
    calibrator passes through ``jax.jit`` and ``jax.vmap``. The field lists are also
    kept on the class (``_data_fields``, ``_meta_fields``) for saving without pickle.
    ``eq=False`` (default) compares by identity, since arrays do not compare to a bool.
    """

    def wrap(cls: type[_T]) -> type[_T]:
        cls = dataclasses.dataclass(frozen=True, eq=eq)(cls)
        # Class attributes read by save_calibrator; mypy cannot see them on type[_T].
        tagged: Any = cls
        tagged._data_fields, tagged._meta_fields = tuple(data), tuple(meta)
        return jax.tree_util.register_dataclass(
            cls, data_fields=list(data), meta_fields=list(meta)
        )

    return wrap
