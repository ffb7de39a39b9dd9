#!/usr/bin/env bash
# Stream a completion from the tiny model with curl, twice: through Triton's generate extension on the HTTP port,
# then through the OpenAI port. Run `pytriton serve examples.llm.model:tiny --openai-port 9000` first.
#
#   examples/llm/client_curl.sh [HTTP_URL] [OPENAI_URL] [PROMPT]
#   examples/llm/client_curl.sh http://localhost:8000 http://localhost:9000 "the server"
set -euo pipefail
http=${1:-http://localhost:8000}
openai=${2:-http://localhost:9000}
prompt=${3:-the server}
# (sampling_parameters is the model's input of vLLM's convention: a JSON object, here as a JSON string)
body=$(python3 -c 'import json, sys; print(json.dumps({"text_input": sys.argv[1],
    "sampling_parameters": json.dumps({"max_tokens": 24})}))' "$prompt")
echo "== generate_stream"
curl --silent --show-error --no-buffer --fail-with-body -X POST "$http/v2/models/tiny/generate_stream" \
    -H 'Content-Type: application/json' -d "$body"
body=$(python3 -c 'import json, sys; print(json.dumps({"model": "tiny", "prompt": sys.argv[1], "max_tokens": 24,
    "stream": True}))' "$prompt")
echo "== /v1/completions"
curl --silent --show-error --no-buffer --fail-with-body -X POST "$openai/v1/completions" \
    -H 'Content-Type: application/json' -d "$body"
