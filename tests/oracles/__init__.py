"""Reference implementations that tests and benchmarks compare the library against."""
