"""The bundled data files (read through ``importlib.resources.files("bayescal.data")``).

A regular package, not a namespace one: its files resolve to one folder whatever else
on ``sys.path`` is named ``bayescal`` (see :mod:`bayescal.datasets`).
"""
