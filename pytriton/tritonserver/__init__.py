"""Triton's in-process Python API (``import tritonserver``) over pytriton's server."""
