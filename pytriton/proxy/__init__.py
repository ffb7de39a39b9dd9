"""Transport between the server and its workers: ZMQ control messages, tensors in POSIX shared memory."""
