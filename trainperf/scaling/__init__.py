"""The scaling model: time-to-train on N accelerators predicted from a measured run.

Pure Python and NumPy (no torch): ``facts`` holds the per-benchmark data (parameter counts, dataset sizes,
RCP tables), ``model`` the all-reduce cost, the convergence factor and the prediction, ``measured`` reads a
trainperf results folder, ``validate`` fits and tests the model on the published MLPerf results, and ``cli``
is ``trainperf scale``. See README.md beside this file.
"""
