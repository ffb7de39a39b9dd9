"""A torch model on the GPU as an inference callable that takes inputs from CUDA shared memory without a copy.

Inputs a client put in a registered CUDA shared-memory region reach the callable as cupy arrays on the GPU; other
requests bring numpy arrays. `torch.as_tensor` takes both (cupy through `__cuda_array_interface__`, no copy); the
output goes back as cupy (the worker copies it into the client's CUDA output region) or as numpy.
"""

from __future__ import annotations

import numpy as np

IN_FEATURES = 16
OUT_FEATURES = 4

_model = None  # built on first use, in the worker process (the server process never creates a CUDA context)


def weights() -> np.ndarray:
    """The layer's fixed weights, so that a client can check the answer: W[o, i] = (o + 1) / (i + 1)."""
    return np.fromfunction(lambda o, i: (o + 1) / (i + 1), (OUT_FEATURES, IN_FEATURES)).astype(np.float32)


def _get_model():
    global _model
    if _model is None:
        import torch

        layer = torch.nn.Linear(IN_FEATURES, OUT_FEATURES, bias=False)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(weights()))
        _model = layer.to("cuda").eval()
    return _model


def infer(requests):
    """x: FP32 [batch, 16] -> y: FP32 [batch, 4] = x @ W.T, on the GPU."""
    import torch

    model = _get_model()
    responses = []
    with torch.inference_mode():
        for request in requests:
            x = request["x"]
            on_gpu = not isinstance(x, np.ndarray)  # a cupy array: the input came from CUDA shared memory
            # (a numpy input is a read-only view on shared memory: torch wants a writable array to wrap)
            x_t = torch.as_tensor(x, device="cuda") if on_gpu else torch.from_numpy(np.array(x)).to("cuda")
            y_t = model(x_t)
            if on_gpu:
                import cupy

                responses.append({"y": cupy.asarray(y_t)})
            else:
                responses.append({"y": y_t.cpu().numpy()})
    torch.cuda.synchronize()  # the results are complete before the worker reads them
    return responses
