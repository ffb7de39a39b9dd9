"""The OpenAI-compatible port of a server (`openai_port`): its own HTTP/1.1 listener with the HTTP port's limits,
answering pytriton/frontend/openai's routes, its refusals in OpenAI's error shape; over TLS with `openai_tls`."""

from __future__ import annotations

import logging

from pytriton.config.server import ServerConfig
from pytriton.core.server_core import ServerCore
from pytriton.core.trace import Tracer
from pytriton.frontend.access import is_local_peer
from pytriton.frontend.http1 import HttpListener
from pytriton.frontend.openai import OpenAIApp, chat_template, refusal

SERVICE_NAME = "OpenAIService"  # in the log line "Started OpenAIService at <address>:<port>"

logger = logging.getLogger("pytriton.server")


async def start_openai_listener(config: ServerConfig, core: ServerCore, tracer: Tracer | None = None
                                ) -> HttpListener:  # fmt: skip
    """Listen on the OpenAI port (RuntimeError when the chat template's tokenizer cannot be loaded)."""
    assert config.openai_port is not None
    app = OpenAIApp(core, config.openai_api_key, chat_template(config.openai_tokenizer), tracer)
    listener = HttpListener(app.handle, config.openai_address, config.openai_port, SERVICE_NAME, config.http_limits,
                            too_large_hint=" Use --http-max-input-size to increase the limit.", protocol="OpenAI",
                            refusal=refusal, tls=config.openai_tls)
    await listener.start()
    if config.openai_api_key and config.openai_tls is None and not is_local_peer(config.openai_address):
        logger.warning("The OpenAI port at %s:%d checks an API key, but without TLS every client's key crosses the "
                       "network in plain text: serve it over TLS (--openai-use-ssl), behind a TLS proxy, or on "
                       "--openai-address 127.0.0.1", config.openai_address, listener.port)
    return listener
