"""HTTP/2 as the gRPC front-end speaks it, beside `frontend/http1`: a connection (`connection.GrpcConnection`) reads
frames (`read`, `frames`, `head` for HPACK'd heads), keeps each stream's state (`stream`), sends with flow control
(`send`, `segments`), answers pings (`keepalive`) and turns each stream into a call (`call`, `method`, `message`) that
`frontend/grpc` serves. Its limits are plain data in `pytriton.config.h2`."""
