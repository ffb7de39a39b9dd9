"""The HTTP/REST front-end: Triton's routes over HTTP/1.1."""
