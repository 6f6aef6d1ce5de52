"""A plain HTTP proxy on 127.0.0.1 in front of an S3 server, answering a ranged GET's 200 + Content-Range as 206.

rclone 1.75.2's `serve s3` answers a range request with 200 and a Content-Range header, which obstore refuses
("non-partial response"); iobench's shaper (nginx) rewrites it the same way. This is for scripts/remote_smoke.sh
on a machine without nginx (a lent GPU machine): no shaping, no profile, nothing measured about the network.
Standard library only; prints its port, then serves until it is killed.

    python scripts/range_proxy.py UPSTREAM_PORT
"""

from __future__ import annotations

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM_PORT = int(sys.argv[1]) if __name__ == "__main__" else 0
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "trailer"}
OWN = {"server", "date", "content-length"}  # what this server writes itself


class Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect

    def forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}  # Host kept: it is signed
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM_PORT, timeout=120)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            data = reply.read()
        finally:
            upstream.close()
        partial = reply.status == 200 and reply.getheader("Content-Range") is not None
        self.send_response(206 if partial else reply.status, "Partial Content" if partial else reply.reason)
        for name, value in reply.getheaders():
            if name.lower() not in HOP_BY_HOP | OWN:
                self.send_header(name, value)
        # a HEAD's length is the object's, not its (empty) body's
        self.send_header(
            "Content-Length", reply.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data))
        )
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()
