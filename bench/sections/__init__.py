"""The suite's sections, one module each: what ``python -m bench`` measures for docs/benchmarks.md."""
