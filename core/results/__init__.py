"""What a result carries: its environment, its status, the statistics of its samples, what changed of its toolchain, how far its mode reads from the others."""
