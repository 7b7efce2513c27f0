"""Results to and from the tools teams already use: a commit's export in gemmwatch's versioned schema and in the Bencher Metric Format."""
