"""A store that misbehaves, for the tests of what a run does with it: an HTTP proxy on 127.0.0.1 in front of a real
S3 server (iobench's emulator), passing every request through unchanged (the Host header too, so the client's
signature holds) except those a rule picks, which it answers its own way:

- `stall`: reads the request and never answers;
- `drip`: the true headers, then one byte of the body every `drip_s` seconds;
- `announce`: a length of 100 GiB in the answer (HEAD and GET), then the true body;
- `endless`: a GET answered 200 without a length, with zeros that never end;
- `missing`: 404 NoSuchKey;
- `big-list`: every size in a listing made 100 GiB;
- `no-range`: a range answered 200 without its Content-Range (as rclone answers without the shaper).
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HUGE = 100 * 2**30


@dataclass
class Rule:
    mode: str
    method: str = "GET"  # or "*"
    key: str = ""  # a fragment of the request's path; "" for any


@dataclass
class HostileStore:
    upstream: str  # host:port of the real server
    rules: list[Rule] = field(default_factory=list)
    drip_s: float = 5.0
    seen: list[str] = field(default_factory=list)  # "METHOD path" of every request

    def __enter__(self) -> HostileStore:
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                store.handle(self)

            do_HEAD = do_PUT = do_POST = do_DELETE = do_GET  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def rule_for(self, method: str, path: str) -> Rule | None:
        for rule in self.rules:
            if rule.method in ("*", method) and rule.key in path:
                return rule
        return None

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        method, path = request.command, request.path
        self.seen.append(f"{method} {path}")
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        rule = self.rule_for(method, path)
        mode = rule.mode if rule else "pass"
        if mode == "stall":
            time.sleep(3600)
            return
        if mode == "missing":
            answer = b"<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>"
            request.send_response(404)
            request.send_header("Content-Length", str(len(answer)))
            request.end_headers()
            request.wfile.write(answer)
            return
        upstream = http.client.HTTPConnection(self.upstream, timeout=60)
        upstream.request(method, path, body=body, headers=dict(request.headers.items()))
        answer = upstream.getresponse()
        data = answer.read()
        dropped = ("content-length", "transfer-encoding", *(["content-range"] if mode == "no-range" else []))
        headers = [(k, v) for k, v in answer.getheaders() if k.lower() not in dropped]
        if mode == "big-list" and b"<ListBucketResult" in data:
            data = re.sub(rb"<Size>\d+</Size>", f"<Size>{HUGE}</Size>".encode(), data)
        request.send_response(200 if mode == "no-range" and answer.status == 206 else answer.status)
        for k, v in headers:
            request.send_header(k, v)
        if mode == "endless" and method == "GET":
            request.send_header("Connection", "close")
            request.end_headers()
            _write_forever(request.wfile.write)
            return
        length = answer.getheader("Content-Length") if method == "HEAD" else str(len(data))
        request.send_header("Content-Length", str(HUGE) if mode == "announce" else length or "0")
        request.end_headers()
        if method == "HEAD":
            return
        try:
            if mode == "drip":
                for k in range(len(data)):
                    request.wfile.write(data[k : k + 1])
                    request.wfile.flush()
                    time.sleep(self.drip_s)
            else:
                request.wfile.write(data)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            pass


def _write_forever(write: Callable[[bytes], object]) -> None:
    block = bytes(2**20)
    try:
        while True:
            write(block)
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass
