"""Nsight Compute over a case: the profiler's process and the job's profile step."""
