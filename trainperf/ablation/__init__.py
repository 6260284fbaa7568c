"""`trainperf ablate`: the optimization switches measured, alone and all together, interleaved in one process."""
