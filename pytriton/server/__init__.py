"""The server process: its composition (`composition.Server`: the core, the worker supervisor and the front-ends),
its event loop and signals (`process`, also `python -m pytriton.server`), the group of front-end processes behind
one port (`frontend_group`, `peers`), the SageMaker/Vertex AI listeners, the control channel's server end, and, in the
user's process, what `Triton` uses to start a server (`launcher`) and host a bound model's callables (`bound_model`)."""
