"""Stands in for Triton's compiled `triton_shm_monitor` (qa/common/shm_util.py imports it), which reads the free
space of tritonserver's Python-backend pool `/dev/shm/triton_python_backend_shm_region*`. pytriton makes no such
region, so Triton's probe finds none to watch; were one ever there, making its manager fails the test."""


class SharedMemoryManager:
    def __init__(self, region: str):
        raise RuntimeError(f"/dev/shm/{region}: a tritonserver pool region, which pytriton never makes")
