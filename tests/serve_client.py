#!/usr/bin/env python3
"""The HTTP side of tests/test_serve.c: starts `wgpt serve` on a free loopback
port over a checkpoint and checks it with real clients (Python's http.client
and curl): completions equal to `wgpt sample`'s greedy text, a streamed one,
concurrent ones, refusals (malformed JSON, wrong types, unknown fields, too
long, oversize body), a client that leaves mid-stream (its slot is freed),
SIGTERM (requests in flight finish, exit 0). Prints what it checks; exit 0
when all hold. Every wait is bounded; only loopback is used.

usage: serve_client.py --wgpt BIN --checkpoint CKPT --dir TMPDIR
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

ARGS = None
PORT = None
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILED.append(what)
    return cond


def post(body, timeout=60, raw=None):
    """POST /v1/completions; returns (status, parsed JSON or text)."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    data = raw if raw is not None else json.dumps(body).encode()
    c.request("POST", "/v1/completions", body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def get(path):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    out = json.loads(r.read().decode("utf-8"))
    c.close()
    return r.status, out


def sample_greedy(prompt, tokens):
    """`wgpt sample`'s greedy continuation of prompt, as the raw bytes it printed."""
    out = subprocess.run([ARGS.wgpt, "sample", "--checkpoint", ARGS.checkpoint, "--prompt", prompt,
                          "--temperature", "0", "--tokens", str(tokens)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, check=True).stdout
    assert out.startswith(prompt.encode()) and out.endswith(b"\n"), out
    return out[len(prompt):-1]


def as_json_text(raw):
    # what the server's JSON strings carry: invalid UTF-8 as U+FFFD per maximal subpart
    return raw.decode("utf-8", "replace")


def sse_events(payload):
    events = [e for e in payload.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), payload
    return [e[len("data: "):] for e in events]


def start_server():
    global PORT
    p = subprocess.Popen([ARGS.wgpt, "serve", "--checkpoint", ARGS.checkpoint, "--port", "0", "--max-batch", "4",
                          "--max-body", "65536"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    line = b""
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line or b"listening on" in line:
            break
    m = re.search(rb"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill()
        sys.exit("wgpt serve did not say where it listens: %r" % line)
    PORT = int(m.group(1))
    log = []
    threading.Thread(target=lambda: log.extend(p.stderr), daemon=True).start()
    return p, log


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--wgpt", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--dir", required=True)
    ARGS = ap.parse_args()

    prompts = ["the quick", "over the", "a", "jumps"]
    want = {p: sample_greedy(p, 12) for p in prompts}
    server, log = start_server()
    try:
        run_checks(prompts, want)
        sigterm(server)
    finally:
        if server.poll() is None:
            server.kill()
    sys.stdout.write("".join(l.decode("utf-8", "replace") for l in log))
    if FAILED:
        print("%d checks failed" % len(FAILED))
        return 1
    print("all checks passed")
    return 0


def run_checks(prompts, want):
    second = subprocess.run([ARGS.wgpt, "serve", "--checkpoint", ARGS.checkpoint, "--port", str(PORT)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    check(second.returncode == 1 and b"cannot listen on 127.0.0.1 port %d" % PORT in second.stderr,
          "a second server on the same port: exit %d, %r" % (second.returncode, second.stderr.strip()[-200:]))
    st, h = get("/health")
    check(st == 200 and h["status"] == "ok" and h["slots"] == 4, "GET /health: %s" % h)
    st, m = get("/v1/models")
    check(st == 200 and m["data"][0]["object"] == "model", "GET /v1/models: %s" % m)
    ctx = m["data"][0]["context_length"]

    # a completion: greedy equals `wgpt sample`'s
    p = prompts[0]
    st, r = post({"model": "x", "prompt": p, "max_tokens": 12, "temperature": 0})
    check(st == 200 and r["choices"][0]["text"] == as_json_text(want[p]) and r["choices"][0]["finish_reason"] == "length"
          and r["usage"]["completion_tokens"] == 12, "greedy completion equals `wgpt sample`: %r" % (r,))
    st, r = post({"prompt": [p], "max_tokens": 12, "temperature": 0, "top_k": 5, "n": 2})
    check(st == 200 and [c["text"] for c in r["choices"]] == [as_json_text(want[p])] * 2,
          "prompt as an array, n=2 greedy choices")
    st, a = post({"prompt": p, "max_tokens": 8, "temperature": 1.0, "top_p": 0.9, "seed": 7})
    st2, b = post({"prompt": p, "max_tokens": 8, "temperature": 1.0, "top_p": 0.9, "seed": 7})
    check(st == st2 == 200 and a["choices"][0]["text"] == b["choices"][0]["text"], "the same seed, the same text")

    # stop strings: the text ends before the first one, finish_reason "stop"
    raw = want[p]
    k = next((i for i in range(1, len(raw)) if 0x21 <= raw[i] < 0x7F), None)
    if check(k is not None, "greedy text has a printable byte to stop at: %r" % raw):
        stop = chr(raw[k])
        st, r = post({"prompt": p, "max_tokens": 12, "temperature": 0, "stop": [stop, "\x7f~never"]})
        check(st == 200 and r["choices"][0]["text"] == as_json_text(raw[:raw.index(raw[k])])
              and r["choices"][0]["finish_reason"] == "stop", "stop %r: %r" % (stop, r))

    # a streamed completion, through curl
    out = subprocess.run(["curl", "-sS", "-N", "--max-time", "60", "http://127.0.0.1:%d/v1/completions" % PORT,
                          "-H", "Content-Type: application/json", "-d",
                          json.dumps({"prompt": p, "max_tokens": 12, "temperature": 0, "stream": True})],
                         stdout=subprocess.PIPE, timeout=90).stdout.decode("utf-8")
    ev = sse_events(out)
    chunks = [json.loads(e) for e in ev[:-1]]
    check(ev[-1] == "[DONE]" and len(chunks) >= 2 and "".join(c["choices"][0]["text"] for c in chunks) == as_json_text(raw)
          and chunks[-1]["choices"][0]["finish_reason"] == "length"
          and all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]),
          "streamed (curl): %d events, text equals `wgpt sample`'s" % len(ev))

    # a stream of two choices (Python's http.client): each one's chunks make its text
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": p, "max_tokens": 12, "temperature": 0,
                                                          "stream": True, "n": 2}))
    r = c.getresponse()
    ev = sse_events(r.read().decode("utf-8"))
    c.close()
    texts, ends = ["", ""], [None, None]
    for e in ev[:-1]:
        ch = json.loads(e)["choices"][0]
        texts[ch["index"]] += ch["text"]
        ends[ch["index"]] = ch["finish_reason"] or ends[ch["index"]]
    check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream" and ev[-1] == "[DONE]"
          and texts == [as_json_text(raw)] * 2 and ends == ["length"] * 2, "streamed n=2 (http.client)")

    # 4 at once: each equals its own greedy text (batching changes nothing)
    res = {}

    def one(q):
        res[q] = post({"prompt": q, "max_tokens": 12, "temperature": 0})
    st, h0 = get("/health")
    ts = [threading.Thread(target=one, args=(q,)) for q in prompts]
    [t.start() for t in ts]
    [t.join(120) for t in ts]
    st, h1 = get("/health")
    check(all(res.get(q, (0,))[0] == 200 and res[q][1]["choices"][0]["text"] == as_json_text(want[q]) for q in prompts),
          "4 concurrent requests, each equal to `wgpt sample`'s text")
    # 4 x 12 tokens: 4 from the prefills, 44 from steps; one at a time would take 44 steps
    steps = h1["steps"] - h0["steps"]
    check(h1["tokens"] - h0["tokens"] == 48 and steps < 44, "decoded together: 44 tokens in %d steps" % steps)

    # refusals: a 4xx with an OpenAI-style error body, and the server goes on
    def refused(status, r, what, param=None, code=None):
        ok = (st == status and isinstance(r, dict) and isinstance(r.get("error", {}).get("message"), str)
              and (param is None or r["error"]["param"] == param) and (code is None or r["error"]["code"] == code))
        check(ok, "%s: %d %s" % (what, st, r))
    st, r = post(None, raw=b'{"prompt": "x", "max_tokens": ')
    refused(400, r, "malformed JSON")
    st, r = post(None, raw=b'[1, 2]')
    refused(400, r, "not an object")
    st, r = post({"prompt": "x", "max_tokens": "ten"})
    refused(400, r, "max_tokens of the wrong type", "max_tokens")
    st, r = post({"prompt": "x", "temperature": 3})
    refused(400, r, "temperature out of range", "temperature")
    st, r = post({"prompt": "x", "stream": "yes"})
    refused(400, r, "stream of the wrong type", "stream")
    st, r = post({"prompt": "x", "logit_bias": {}})
    refused(400, r, "an unknown field", "logit_bias")
    st, r = post({"prompt": ["a", "b"]})
    refused(400, r, "two prompts", "prompt")
    st, r = post({"prompt": "x", "max_tokens": ctx})
    refused(400, r, "more than the context", "max_tokens", "context_length_exceeded")
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.request("GET", "/v2/nothing")
    r = c.getresponse()
    st = r.status
    refused(404, json.loads(r.read()), "an unknown route")
    big = os.path.join(ARGS.dir, "big.json")
    with open(big, "w") as f:
        f.write('{"prompt": "' + "x" * 200000 + '"}')
    out = subprocess.run(["curl", "-sS", "--max-time", "60", "-o", "-", "-w", "\n%{http_code}",
                          "http://127.0.0.1:%d/v1/completions" % PORT, "-H", "Content-Type: application/json",
                          "--data-binary", "@" + big], stdout=subprocess.PIPE, timeout=90).stdout.decode()
    body, _, code = out.rpartition("\n")
    st = int(code)
    refused(413, json.loads(body), "an oversize body (curl)")
    st, r = post({"prompt": "x", "max_tokens": 2, "temperature": 0})
    check(st == 200, "still serving after the refusals")

    # a client that leaves mid-stream: its slot is freed long before its max_tokens
    st, h0 = get("/health")
    n = ctx - 8
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    body = json.dumps({"prompt": "a", "max_tokens": n, "temperature": 0, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    got = b""
    while b"data: " not in got:
        got += s.recv(4096)
    s.close()
    deadline, h = time.time() + 30, None
    while time.time() < deadline:
        st, h = get("/health")
        if h["busy"] == 0 and h["queued"] == 0:
            break
        time.sleep(0.05)
    made = h["tokens"] - h0["tokens"]
    check(h["busy"] == 0 and made < n, "left mid-stream: slot freed after %d of %d tokens" % (made, n))
    st, r = post({"prompt": "x", "max_tokens": 2, "temperature": 0})
    check(st == 200, "still serving after the disconnect")


def sigterm(server):
    # requests in flight when SIGTERM comes (a plain one, a stream): they finish; the process exits 0
    res = {}
    t = threading.Thread(target=lambda: res.update(r=post({"prompt": "b", "max_tokens": 100, "temperature": 0})))
    t.start()
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": "a", "max_tokens": 40, "temperature": 0,
                                                          "stream": True}))
    r = c.getresponse()
    first = r.read1(65536)  # (at least the first event's chunk)
    server.send_signal(signal.SIGTERM)
    rest = r.read()
    ev = sse_events((first + rest).decode("utf-8"))
    last = json.loads(ev[-2]) if len(ev) >= 2 else {}
    check(ev[-1] == "[DONE]" and last.get("choices", [{}])[0].get("finish_reason") == "length",
          "a stream in flight at SIGTERM finishes (%d events)" % len(ev))
    t.join(60)
    st, r = res.get("r", (0, None))
    check(st == 200 and r["usage"]["completion_tokens"] == 100, "a request in flight at SIGTERM finishes: %d" % st)
    try:
        code = server.wait(60)
    except subprocess.TimeoutExpired:
        code = None
    check(code == 0, "SIGTERM: exit status %s" % code)


if __name__ == "__main__":
    sys.exit(main())
