"""Send the generate cases to a server's HTTP port (argv[1]; then, optionally, the names of the cases to send) and
print what came back as JSON: status, content type, framing (chunked or the Content-Length), body. Run by
tests/e2e/test_generate.py against pytriton and against the real tritonserver 2.51."""
import gzip
import http.client
import json
import sys

CASES = [
    ("echo_ok", "POST", "gen_echo", "generate",
     {"id": "42", "text_input": "hi", "parameters": {"temperature": 0.5, "stream": False}, "extra": 7}),
    ("echo_scale", "POST", "gen_echo", "generate", {"text_input": "hi", "scale": [1, 2, 3, 4]}),
    ("echo_scale_bad", "POST", "gen_echo", "generate", {"text_input": "hi", "scale": [1, 2, 3]}),
    ("echo_scale_nested", "POST", "gen_echo", "generate", {"text_input": "hi", "scale": [[1, 2], [3, 4]]}),
    ("echo_scale_str", "POST", "gen_echo", "generate", {"text_input": "hi", "scale": ["a", "b"]}),
    ("echo_text_int", "POST", "gen_echo", "generate", {"text_input": 5}),
    ("echo_text_list", "POST", "gen_echo", "generate", {"text_input": ["a", "b"]}),
    ("echo_text_list1", "POST", "gen_echo", "generate", {"text_input": ["a"]}),
    ("echo_missing", "POST", "gen_echo", "generate", {}),
    ("echo_bad_json", "POST", "gen_echo", "generate", b"{"),
    ("echo_empty_body", "POST", "gen_echo", "generate", b""),
    ("echo_array_body", "POST", "gen_echo", "generate", b"[1]"),
    ("unknown_model", "POST", "nope", "generate", {"text_input": "a"}),
    ("unknown_model_stream", "POST", "nope", "generate_stream", {"text_input": "a"}),
    ("get_method", "GET", "gen_echo", "generate", None),
    ("params_not_object", "POST", "gen_echo", "generate", {"text_input": "a", "parameters": 5}),
    ("param_array", "POST", "gen_echo", "generate", {"text_input": "a", "x": [1, 2]}),
    ("param_null", "POST", "gen_echo", "generate", {"text_input": "a", "x": None}),
    ("param_object", "POST", "gen_echo", "generate", {"text_input": "a", "x": {"y": 1}}),
    ("input_in_params", "POST", "gen_echo", "generate", {"parameters": {"text_input": "b"}}),
    ("input_twice", "POST", "gen_echo", "generate", {"text_input": "a", "parameters": {"text_input": "b"}}),
    ("nested_params", "POST", "gen_echo", "generate", {"text_input": "a", "parameters": {"parameters": {"z": 1}}}),
    ("triton_param", "POST", "gen_echo", "generate",
     {"text_input": "a", "triton_x": 1, "parameters": {"triton_y": True}}),
    ("reserved_params", "POST", "gen_echo", "generate",
     {"text_input": "a", "priority": 1, "timeout": 60_000_000, "binary_data_output": True}),
    ("big_int", "POST", "gen_echo", "generate", {"text_input": "a", "big": 18446744073709551615}),
    ("id_int", "POST", "gen_echo", "generate", {"text_input": "a", "id": 5}),
    ("id_empty", "POST", "gen_echo", "generate", {"text_input": "a", "id": ""}),
    ("echo_fail", "POST", "gen_echo", "generate", {"text_input": "a", "fail": True}),
    ("echo_fail_stream", "POST", "gen_echo", "generate_stream", {"text_input": "a", "fail": True}),
    ("echo_stream", "POST", "gen_echo", "generate_stream", {"id": "7", "text_input": "a"}),
    ("echo_version", "POST", "gen_echo", "versions/1/generate", {"text_input": "a"}),
    ("echo_bad_version", "POST", "gen_echo", "versions/7/generate", {"text_input": "a"}),
    ("stream_1", "POST", "gen_stream", "generate", {"text_input": "t", "n": 1}),
    ("stream_3", "POST", "gen_stream", "generate", {"text_input": "t", "n": 3}),
    ("stream_0", "POST", "gen_stream", "generate", {"text_input": "t", "n": 0}),
    ("stream_fail0_unary", "POST", "gen_stream", "generate", {"text_input": "t", "n": 3, "fail_at": 0}),
    ("sse_3", "POST", "gen_stream", "generate_stream", {"id": "9", "text_input": "t", "n": 3}),
    ("sse_0", "POST", "gen_stream", "generate_stream", {"text_input": "t", "n": 0}),
    ("sse_fail0", "POST", "gen_stream", "generate_stream", {"text_input": "t", "n": 3, "fail_at": 0}),
    ("sse_fail2", "POST", "gen_stream", "generate_stream", {"text_input": "t", "n": 3, "fail_at": 2}),
    ("sse_missing", "POST", "gen_stream", "generate_stream", {"text_input": "t"}),
    ("sse_n_str", "POST", "gen_stream", "generate_stream", {"text_input": "t", "n": "x"}),
    ("sse_n_float", "POST", "gen_stream", "generate_stream", {"text_input": "t", "n": 1.5}),
    ("gzip_body", "POST", "gen_echo", "generate", "GZIP"),
]


def send(port, method, model, route, body):
    headers = {"Content-Type": "application/json"}
    if body == "GZIP":
        body = gzip.compress(json.dumps({"text_input": "a"}).encode())
        headers["Content-Encoding"] = "gzip"
    elif body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, f"/v2/models/{model}/{route}", body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    framing = "chunked" if r.getheader("Transfer-Encoding") == "chunked" else f"length={r.getheader('Content-Length')}"
    return {"status": r.status, "content_type": r.getheader("Content-Type"), "framing": framing,
            "body": data.decode("utf-8", "replace")}


if __name__ == "__main__":
    port = int(sys.argv[1])
    only = sys.argv[2:] or None
    out = {}
    for name, method, model, route, body in CASES:
        if only and name not in only:
            continue
        out[name] = send(port, method, model, route, body)
    print(json.dumps(out, indent=1))
