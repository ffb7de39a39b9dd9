"""Helpers the tests share, one module per subject; fixtures and hooks stay in the conftest files.

- `paths`: where the repository is.
- `processes`: the processes a test run started (checked at the end of the session), whether one is alive.
- `logs`: the lines a server writes that the helpers look for (ports, worker pids, readiness).
- `serving`: start `pytriton serve` (`serve`, `ServerProcess`, `lazy_servers`, `tensor_args`, ...).
- `clients`: `tritonclient` per protocol (`CLIENTS`, `PROTOCOLS`, `client_for`).
- `waits`: wait for an event (a condition, a file) with a bound that only ends a broken run.
- `shm`: our segments in /dev/shm.
- `ray_cluster`: helpers for the Ray Serve tests (tests/ray).
"""
