"""Benchmarks of attnlib against its peers (run by hand, not as tests): ``make bench``."""
