"""Small real data sets bundled with bayescal (sources and licences in ``data/README.md``)."""

from __future__ import annotations

import csv
import io
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = ["Dataset", "load_diabetes", "load_breast_cancer"]


class Dataset(NamedTuple):
    """Features ``X [N, D]`` (float64), target ``y [N]``, and the column names.

    Attributes
    ----------
    X : ndarray, shape [N, D]
        Features (float64).
    y : ndarray, shape [N]
        Target.
    feature_names : tuple of str
        Column names of ``X``.
    target_name : str
        Name of the target.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_name: str


def _load(name: str, target_dtype) -> Dataset:
    # The data's own package, one path step: resources.files("bayescal") is a
    # MultiplexedPath when another folder named bayescal (a clone's root, seen from
    # its parent folder) joins the package's path, and a two-step joinpath raises.
    text = resources.files("bayescal.data").joinpath(name).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], np.asarray(rows[1:], dtype=np.float64)
    return Dataset(
        body[:, :-1], body[:, -1].astype(target_dtype), tuple(header[:-1]), header[-1]
    )


def load_diabetes() -> Dataset:
    """Efron et al. (2004) diabetes data: 442 patients, 10 raw features, progression.

    Returns
    -------
    Dataset
        Features ``X``, target ``y``, ``feature_names`` and ``target_name``.

    Examples
    --------
    >>> from bayescal.datasets import load_diabetes
    >>> d = load_diabetes()
    >>> d.X.shape, d.target_name, d.feature_names[:3]
    ((442, 10), 'progression', ('age', 'sex', 'bmi'))
    """
    return _load("diabetes.csv", np.float64)


def load_breast_cancer() -> Dataset:
    """Breast Cancer Wisconsin (Diagnostic): 569 cases, 30 features, 1 = malignant.

    Returns
    -------
    Dataset
        Features ``X``, target ``y``, ``feature_names`` and ``target_name``.

    Examples
    --------
    >>> from bayescal.datasets import load_breast_cancer
    >>> d = load_breast_cancer()
    >>> d.X.shape, int(d.y.sum())
    ((569, 30), 212)
    """
    return _load("breast_cancer.csv", np.int64)
