"""Benchmarks: `ykbus bench` (see BENCHMARKS.md)."""
