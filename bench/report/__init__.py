"""docs/benchmarks.md from a run's results, one module per section of the page: ``python -m bench.report``."""
