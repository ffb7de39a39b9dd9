"""The benchmark (scripts/bench) and soak (scripts/soak) library: importable as `bench_lib` from scripts/."""
