"""Benchmarks run by `make bench`: each ``bench/bench_*.py`` module exposes ``main()``."""
