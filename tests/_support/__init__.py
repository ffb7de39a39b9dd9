"""Helpers the tests share, one module per subject; fixtures and hooks stay in the conftest files.

- `paths`: where the repository is; `ports`: every service on a free loopback port.
- `processes`: the processes a test run started (checked at the end of the session), whether one is alive.
- `logs`: the lines a server writes that the helpers look for (ports, worker pids, readiness).
- `serving`: start `pytriton serve` (`serve`, `ServerProcess`, `lazy_servers`, `tensor_args`, ...).
- `clients`: `tritonclient` per protocol (`CLIENTS`, `PROTOCOLS`, `client_for`); `http_raw`: raw HTTP/1.1.
- `waits`: wait for an event (a condition, a file) with a bound that only ends a broken run.
- `shm`: our segments in /dev/shm; `metrics`: a server's Prometheus page; `rss`: resident memory.
- `gates`: hold requests inside the gated models until the test releases them; `model_calls`: options and
  requests for some models of tests/models.py.
- `datatypes`: every Triton datatype through the identity model, per protocol.
- `ray_cluster`: helpers for the Ray Serve tests (tests/ray).

A map of the whole suite: tests/README.md.
"""
