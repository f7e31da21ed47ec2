"""Evidence for docs/choosing.md: calibrators by calibration-set size and distortion.

Run from the repository root: ``python docs/experiments/choosing_recalibrator.py``
(about 3 minutes on 2 CPU cores). Prints the tables quoted on the page; seeded.
"""

import time
import numpy as np
from scipy.special import expit, logit

from bayescal import classification as clf
from bayescal import regression as reg

t0 = time.time()
rng = np.random.default_rng(0)
SIZES = (100, 300, 1000, 3000)
REPS = 10
# Distortions of the true probability t = sigmoid(z), z ~ N(0, 1.5^2): the model reports q.
DISTORTIONS = {
    "overconfident (sigmoid)": lambda z: expit(2.5 * z),          # in Platt's family
    "skewed (non-sigmoid)": lambda z: expit(z) ** 3,               # beta family, not Platt's
}
METHODS = {
    "Platt": lambda y, q: clf.fit_platt(y, q, eps=1e-6),
    "beta": lambda y, q: clf.fit_beta(y, q, eps=1e-6),
    "isotonic": lambda y, q: clf.fit_isotonic(y, q),
    "histogram (10 bins)": lambda y, q: clf.fit_histogram_binning(y, q, bins=10),
}


def simulate(n, distort):
    z = rng.normal(0.0, 1.5, n)
    t = expit(z)
    y = (rng.uniform(size=n) < t).astype(np.int32)
    return y, distort(z).astype(np.float32), t


clf_table = {}
for dname, distort in DISTORTIONS.items():
    _, q_test, t_test = simulate(20000, distort)
    for n in SIZES:
        errs = {m: [] for m in METHODS}
        for _ in range(REPS):
            y, q, _t = simulate(n, distort)
            for m, fit in METHODS.items():
                p = np.asarray(fit(y, q)(q_test))
                errs[m].append(np.mean(np.abs(p - t_test)))
        clf_table[dname, n] = {m: float(np.mean(v)) for m, v in errs.items()}
print("classification", time.time() - t0)
for k, v in clf_table.items():
    print(k, {m: round(x, 4) for m, x in v.items()})

# Regression: the model says Normal(mu, s); the truth differs in scale only, or in shape.
TRUTHS = {
    "too narrow (scale)": lambda n: 2.0 * rng.normal(size=n),
    "heavy tails (shape)": lambda n: 1.2 * rng.standard_t(3, size=n),
}
reg_table = {}
t1 = time.time()
for tname, noise in TRUTHS.items():
    mu_test = rng.normal(size=20000); y_test = mu_test + noise(20000)
    for n in SIZES:
        errs = {"sigma scaling": [], "isotonic": []}
        for _ in range(REPS):
            mu = rng.normal(size=n); y = mu + noise(n); s = np.ones(n)
            sig = reg.fit_sigma_scaling(y, mu, s)
            iso = reg.fit_isotonic_recalibrator(reg.pit_normal(y, mu, s))
            pit_test = reg.pit_normal(y_test, mu_test, np.ones(20000))
            errs["isotonic"].append(float(reg.calibration_error(iso(pit_test))))
            errs["sigma scaling"].append(float(reg.calibration_error(sig.pit(y_test, mu_test, np.ones(20000)))))
        reg_table[tname, n] = {m: float(np.mean(v)) for m, v in errs.items()}
print("regression", time.time() - t1)
for k, v in reg_table.items():
    print(k, {m: round(x, 4) for m, x in v.items()})
