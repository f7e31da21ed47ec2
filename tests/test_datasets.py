"""The bundled data sets equal scikit-learn's copies (scikit-learn 1.9)."""

import numpy as np
import sklearn.datasets

from bayescal import datasets


def test_diabetes_equals_sklearn_raw():
    d = datasets.load_diabetes()
    ref = sklearn.datasets.load_diabetes(scaled=False)
    np.testing.assert_allclose(d.X, ref.data)
    np.testing.assert_allclose(d.y, ref.target)
    assert d.feature_names == tuple(ref.feature_names)


def test_breast_cancer_equals_sklearn_with_malignant_as_one():
    d = datasets.load_breast_cancer()
    ref = sklearn.datasets.load_breast_cancer()
    np.testing.assert_allclose(d.X, ref.data)
    np.testing.assert_array_equal(d.y, 1 - ref.target)  # sklearn: 0 = malignant
    assert d.feature_names == tuple(n.replace(" ", "_") for n in ref.feature_names)
