"""Global co-occurrence statistics: build, store and look up the token co-occurrence matrix."""
