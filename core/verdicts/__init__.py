"""What a result means: regressions and baselines, which results a verdict may stand on, same-job A/B confirmation."""
