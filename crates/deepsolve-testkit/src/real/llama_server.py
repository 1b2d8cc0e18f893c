"""llama.cpp's own OpenAI-compatible server (the pinned `xllamacpp` package), for tests.

Usage: python llama_server.py MODEL.gguf PORT CONTEXT THREADS
Prints one `listening <url>` line once the model is loaded and the server accepts requests,
then serves until its standard input closes: the test that started it holds the pipe, so the
server never outlives it, whatever way the test ends.
"""

import sys

import xllamacpp


def main() -> int:
    model, port, context, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.hostname = "127.0.0.1"
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1
    # The model's own jinja template: tool calls go through it, as with `llama-server --jinja`.
    params.use_jinja = True
    params.endpoint_props = True
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    print("listening", server.listening_address, flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
