"""The OpenAI-compatible port of a server (`openai_port`): its own HTTP/1.1 listener with the HTTP port's limits,
answering pytriton/frontend/openai's routes, its refusals in OpenAI's error shape."""

from __future__ import annotations

from pytriton.config.server import ServerConfig
from pytriton.core.server_core import ServerCore
from pytriton.core.trace import Tracer
from pytriton.frontend.http1 import HttpListener
from pytriton.frontend.openai import OpenAIApp, chat_template, refusal

SERVICE_NAME = "OpenAIService"  # in the log line "Started OpenAIService at <address>:<port>"


async def start_openai_listener(config: ServerConfig, core: ServerCore, tracer: Tracer | None = None
                                ) -> HttpListener:  # fmt: skip
    """Listen on the OpenAI port (RuntimeError when the chat template's tokenizer cannot be loaded)."""
    assert config.openai_port is not None
    app = OpenAIApp(core, config.openai_api_key, chat_template(config.openai_tokenizer), tracer)
    listener = HttpListener(app.handle, config.openai_address, config.openai_port, SERVICE_NAME, config.http_limits,
                            too_large_hint=" Use --http-max-input-size to increase the limit.", protocol="OpenAI",
                            refusal=refusal)
    await listener.start()
    return listener
