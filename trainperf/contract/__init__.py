"""The plain data of the contract beside ``spec.py``: the optimization switches and the closed-rule value types.

Torch-free, and importing nothing of trainperf's but the errors, so that the facts of every benchmark and the
harness can both rest on it.
"""
