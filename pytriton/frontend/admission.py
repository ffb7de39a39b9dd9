"""What every inference route checks between its wire format and `ServerCore.begin`, written once.

A route (gRPC ModelInfer and ModelStreamInfer, HTTP infer, SageMaker's and Vertex AI's predict routes, and any new
one) has one `Admission`, made when its front-end is, and calls it in this order:

1. `enter(client)`: the client may use the `inference` endpoint group (`--grpc/http-restricted-api`; AccessDenied);
2. the route converts its message into an `InferRequest` (the route's own wire format);
3. `admit(request, client)`: a request that names client shared memory needs the `shared-memory` group too, and the
   headers that match the forward pattern become request parameters (Triton's reserved names refused);
4. `refuse_decoupled(model)` (or `admit(request, client, forward, model)`, steps 3 and 4 in one call): a unary route
   refuses a decoupled model with its front-end's words (Triton's);
5. `ServerCore.begin(request, model)`: the one call the route then awaits or answers from (core/calls.py).

gRPC refuses a decoupled model before it converts the message (3 and 4 swap), as it did before this module; an
error of any step is the route's answer in its protocol's codes. A front-end reads its client (headers, peer) through
a `ClientView` made once, so no step allocates per request where nothing is restricted or forwarded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pytriton.exceptions import unsupported
from pytriton.frontend.access import ENDPOINT_GROUPS, AccessPolicy
from pytriton.frontend.header_forwarding import compile_forward_pattern, forward_headers

if TYPE_CHECKING:
    from pytriton.core.registry import Model
    from pytriton.core.types import InferRequest

Client = TypeVar("Client")
Client_contra = TypeVar("Client_contra", contravariant=True)

# Triton's refusal of a decoupled model on a unary route, by front-end.
DECOUPLED_REFUSAL = {
    "grpc": "ModelInfer RPC doesn't support models with decoupled transaction policy",
    "http": "HTTP end point doesn't support models with decoupled transaction policy",
}


class ClientView(Protocol[Client_contra]):
    """How a front-end reads a client of its calls (a gRPC call's context, an HTTP request)."""

    def headers(self, client: Client_contra) -> Mapping[str, str]:
        """The string headers (metadata) access rules read."""

    def peer(self, client: Client_contra) -> str | None:
        """The client's address (None or "" where it has none, e.g. a Unix socket)."""

    def forwarded(self, client: Client_contra) -> Iterable[tuple[str, Any]]:
        """The headers header forwarding reads (values that are not strings are skipped)."""


def uses_shared_memory(request: InferRequest) -> bool:
    """Whether the request reads an input from, or writes an output to, a client's shared-memory region."""
    for tensor in request.inputs:
        if tensor.data is None:
            return True
    return bool(request.outputs) and any("shared_memory_region" in o.parameters for o in request.outputs)


class Admission(Generic[Client]):
    """One front-end's inference admission: its access policy, header-forward pattern and protocol (the wording)."""

    __slots__ = ("access", "forward", "protocol", "view", "restricted", "_refusal", "_restricted")

    def __init__(self, access: AccessPolicy, view: ClientView[Client], protocol: str,
                 forward_pattern: str | None = None):  # fmt: skip
        self.access = access
        self.view = view
        self.protocol = protocol  # "grpc" or "http": the refusals' words
        self.forward: re.Pattern[str] | None = compile_forward_pattern(forward_pattern) if forward_pattern else None
        self._refusal = DECOUPLED_REFUSAL[protocol]
        # the endpoint groups the policy limits at all (most are open: nothing of their clients is read)
        self.restricted = frozenset(group for group in ENDPOINT_GROUPS if access.restricts(group))
        self._restricted = "inference" in self.restricted

    def check(self, group: str, client: Client) -> None:
        """Raise AccessDenied unless `client` may use the endpoint `group`."""
        if group in self.restricted:
            view = self.view
            self.access.enforce(group, lambda: view.headers(client), view.peer(client), self.protocol)

    def enter(self, client: Client) -> None:
        """Step 1: the client may run inferences."""
        if self._restricted:
            self.check("inference", client)

    def admit(self, request: InferRequest, client: Client, forward: bool = True, model: Model | None = None) -> None:
        """Step 3: shared-memory access where the request names a region, then header forwarding (`forward`: the
        route forwards headers; SageMaker's and Vertex AI's do not, as in Triton); then step 4 for `model` where given.
        A request with a `layout` (a kept header's tensors, all inline) names no region."""
        if request.layout is None and uses_shared_memory(request):
            self.check("shared-memory", client)
        if forward and self.forward is not None:
            forward_headers(self.forward, self.view.forwarded(client), request.parameters)
        if model is not None and model.config.decoupled:
            raise unsupported(self._refusal)

    def refuse_decoupled(self, model: Model) -> None:
        """Step 4: a unary route cannot answer a decoupled model (UNSUPPORTED, Triton's words). A route may ask
        `model.config.decoupled` itself first (one call per request fewer)."""
        if model.config.decoupled:
            raise unsupported(self._refusal)


__all__ = ["DECOUPLED_REFUSAL", "Admission", "ClientView", "uses_shared_memory"]
