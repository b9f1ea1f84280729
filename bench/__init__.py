"""Benchmarks: `make bench` runs them all and rewrites BENCHMARKS.md."""
