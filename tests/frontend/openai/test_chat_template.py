"""Chat prompts: the plain default template, and a Hugging Face tokenizer's template (transformers faked here: it is
an optional extra) asked for the assistant's turn as text; a tokenizer that cannot be had stops the start."""

from __future__ import annotations

import sys
import types

import pytest

from pytriton.frontend.openai.chat_template import chat_template, plain_template, tokenizer_template

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_the_plain_template_writes_one_line_per_message_then_asks_the_assistant():
    assert chat_template(None) is plain_template
    assert plain_template(MESSAGES) == "system: be brief\nuser: hi\nassistant:"


def test_a_tokenizer_template_is_applied_as_text_with_the_generation_prompt(monkeypatch):
    calls = []

    class Tokenizer:
        def apply_chat_template(self, conversation, **kwargs):
            calls.append((conversation, kwargs))
            return "<s>" + "|".join(m["content"] for m in conversation) + "<assistant>"

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path):
            assert path == "/models/tok"
            return Tokenizer()

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(AutoTokenizer=AutoTokenizer))
    apply = chat_template("/models/tok")
    assert apply(MESSAGES) == "<s>be brief|hi<assistant>"
    assert calls == [(MESSAGES, {"tokenize": False, "add_generation_prompt": True})]


def test_a_tokenizer_that_cannot_be_loaded_names_its_path(monkeypatch):
    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path):
            raise OSError("no such folder")

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(AutoTokenizer=AutoTokenizer))
    with pytest.raises(RuntimeError, match="--openai-tokenizer /nope: cannot load the tokenizer: no such folder"):
        tokenizer_template("/nope")


def test_without_transformers_the_error_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # (an import of it fails)
    with pytest.raises(RuntimeError, match=r"needs transformers \(pip install 'pytriton\[llm\]'\)"):
        tokenizer_template("/models/tok")
