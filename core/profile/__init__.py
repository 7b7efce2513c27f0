"""The profile diff: Nsight Compute's metrics and cuobjdump's SASS read, base against head, ranked."""
