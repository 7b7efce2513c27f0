"""Making a number: a case, its problem and check, the paired timing and its statistics, A/B, cuBLAS's best, and a launcher's case in its confined process."""
