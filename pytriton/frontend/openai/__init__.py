"""The OpenAI-compatible port: `/v1/models`, `/v1/completions`, `/v1/chat/completions`, `/v1/embeddings` over the
core, for models that follow vLLM's or TensorRT-LLM's tensor conventions (docs/guide/llm.md)."""

from __future__ import annotations

from pytriton.frontend.openai.app import OpenAIApp
from pytriton.frontend.openai.chat_template import chat_template
from pytriton.frontend.openai.errors import refusal

__all__ = ["OpenAIApp", "chat_template", "refusal"]
