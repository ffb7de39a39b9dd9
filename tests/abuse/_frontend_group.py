"""What the attacks on `pytriton serve --frontend-processes N` share: the group's log lines, a gRPC connection of
the test's own (so that each client reaches whichever process the kernel picks), waiting on a condition, and the
connections the kernel holds for a port."""

from __future__ import annotations

import re

import tritonclient.grpc as grpcclient

FRONTEND_RE = re.compile(r"front-end process (\d+) started \(pid (\d+)\)")
PEER_RE = re.compile(r"Started front-end peer service (\d+) at 127\.0\.0\.1:(\d+)")
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # (grpc shares one connection among a process's channels)


def connections_to(port: int) -> int:
    """Established TCP connections to 127.0.0.1:`port` (accepted by the kernel, read or not)."""
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if local == f"0100007F:{port:04X}" and state == "01":
                count += 1
    return count


def listed_regions(server, count: int = 12) -> set[tuple[str, ...]]:
    """The system regions listed, over `count` new connections (so from every process, in all likelihood)."""
    seen = set()
    for _ in range(count):
        client = grpcclient.InferenceServerClient(server.grpc_url, channel_args=OWN_CONNECTION)
        try:
            seen.add(tuple(sorted(client.get_system_shared_memory_status().regions)))
        finally:
            client.close()
    return seen
