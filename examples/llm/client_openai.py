"""Chat with the tiny model through the OpenAI port with the official `openai` client, printing the reply as it
streams, then a whole completion with its token usage. Run `pytriton serve examples.llm.model:tiny --openai-port 9000`
first.

    python examples/llm/client_openai.py --url http://localhost:9000/v1 --prompt "the server"

Add `--openai-api-key KEY` (or PYTRITON_OPENAI_API_KEY) on the server and pass the same `--api-key` here to require
a key.
"""

from __future__ import annotations

import argparse

import openai


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://localhost:9000/v1", help="the OpenAI port's base URL")
    parser.add_argument("--api-key", default="none", help="the server's --openai-api-key, if it has one")
    parser.add_argument("--prompt", default="the server")
    parser.add_argument("--max-tokens", type=int, default=24)
    args = parser.parse_args()
    with openai.OpenAI(base_url=args.url, api_key=args.api_key) as client:
        print("models:", ", ".join(model.id for model in client.models.list()))
        stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": args.prompt}],
                                                max_tokens=args.max_tokens, stream=True)
        print("chat: ", end="")
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                print(chunk.choices[0].delta.content, end="", flush=True)
        print()
        completion = client.completions.create(model="tiny", prompt=args.prompt, max_tokens=args.max_tokens)
        print(f"completion: {completion.choices[0].text!r}")
        usage = completion.usage
        assert usage is not None  # (the model counts its tokens: one a character)
        print(f"usage: prompt {usage.prompt_tokens}, completion {usage.completion_tokens}, total {usage.total_tokens}")


if __name__ == "__main__":
    main()
