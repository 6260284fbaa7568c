"""The mini datasets: ``prepare`` orders and runs each benchmark's preparation (`trainperf data prepare|verify`);
``verified`` checks prepared files against their manifest, for the workloads, without the registry."""
