"""The contract beside ``spec.py``: the Workload ABC (``workload.py``), and as plain data the optimization switches
and the closed-rule value types.

Torch-free (``workload.py`` imports torch only in its methods) and resting on nothing of trainperf's but the
foundation and ``spec.py``, so that the facts of every benchmark and the harness can both rest on it.
"""
