"""Plain data, at the bottom of the layers: what a server serves and how (`server.ServerConfig`), every environment
variable (`env`), PyTriton's `TritonConfig` (`triton_config`), the parsed `--trace-config`/`--metrics-config`/
`--cache-config` settings, the HTTP/2, HTTP/1.1 and TLS settings of the ports, the repository extension's bounds,
the SageMaker/Vertex AI settings and GPU discovery.

Nothing here imports a layer above it (core, front-ends, transport, workers): the user's process behind
`Triton.bind` builds and checks a server's configuration without loading the server."""
