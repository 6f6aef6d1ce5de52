"""moto's S3 server behind a gate that answers only requests signed with the run's own keys.

moto's server checks no signature (its IAM checks are off by default, and its `/moto-api/` answers anyone, even with
them on), so on a shared host any local user could list, read and write the checkpoints iobench put in it through
127.0.0.1. The gate is WSGI middleware in moto's own process: every request must carry an AWS Signature Version 4
`Authorization` header for the run's access key whose signature, recomputed with the run's secret key by botocore's
S3 signer (as moto's own IAM check does), matches, and a date within `CLOCK_SKEW_S`; anything else is 403 before
moto sees it. The signature covers the method, the path and query, the signed headers and the payload hash the
client declares (`x-amz-content-sha256`); the body is not hashed again (a body swap needs the connection itself,
which another unprivileged user cannot intercept on loopback).

The keys reach this process through its environment (`KEYS_VARIABLE`: /proc/PID/environ is readable by its own user
only), never its command line (which every local user reads with `ps`). Run as
`python -m iobench.storage.remote.signed_gate HOST PORT STATE`: STATE, the store's state folder, is named only so
that a later start can tell the process is this store's.
"""

from __future__ import annotations

import datetime
import hmac
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

KEYS_VARIABLE = "IOBENCH_STORE_KEYS"  # "ACCESS:SECRET"
CLOCK_SKEW_S = 900  # S3's own limit on a request's date
ALGORITHM = "AWS4-HMAC-SHA256"

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]


def header_items(environ: Environ) -> dict[str, str]:
    """The request's headers, by lower-case name, from a WSGI environment."""
    headers = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            headers[key[5:].replace("_", "-").lower()] = value
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers[key.replace("_", "-").lower()] = value
    return headers


def parse_authorization(value: str) -> dict[str, str] | None:
    """`AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...` as its three parts; None otherwise."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        return None
    parts = {}
    for item in rest.split(","):
        name, eq, text = item.strip().partition("=")
        if eq:
            parts[name] = text
    return parts if {"Credential", "SignedHeaders", "Signature"} <= parts.keys() else None


def signed_by(environ: Environ, access_key: str, secret_key: str, now: datetime.datetime | None = None) -> str | None:
    """None when the request is signed with these keys; else why not (a short reason, for the log)."""
    headers = header_items(environ)
    auth = parse_authorization(headers.get("authorization", ""))
    if auth is None:
        return "not signed (SigV4 header)"
    scope = auth["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return "malformed credential scope"
    if not hmac.compare_digest(scope[0].encode(), access_key.encode()):
        return "another access key"
    signed = auth["SignedHeaders"].split(";")
    if "host" not in signed or "x-amz-date" not in signed or any(name not in headers for name in signed):
        return "a signed header is missing"
    if "x-amz-content-sha256" not in headers:
        return "no payload hash"
    try:
        when = datetime.datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return "malformed date"
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if abs((now - when).total_seconds()) > CLOCK_SKEW_S or scope[1] != headers["x-amz-date"][:8]:
        return "date out of range"
    expected = signature(environ, headers, signed, scope, secret_key)
    return None if hmac.compare_digest(expected.encode(), auth["Signature"].encode()) else "signature does not match"


def signature(environ: Environ, headers: dict[str, str], signed: list[str], scope: list[str], secret: str) -> str:
    """The signature botocore's S3 signer computes for this request (the path and query exactly as sent)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    uri = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
    if "?" not in uri and environ.get("QUERY_STRING"):
        uri = f"{uri}?{environ['QUERY_STRING']}"
    request = AWSRequest(method=environ["REQUEST_METHOD"], url=uri, headers={h: headers[h] for h in signed})
    request.context["timestamp"] = headers["x-amz-date"]
    auth = S3SigV4Auth(Credentials(scope[0], secret), scope[3], scope[2])
    canonical = auth.canonical_request(request)
    return auth.signature(auth.string_to_sign(request, canonical), request)


class SignedOnly:
    """WSGI middleware: the wrapped application sees only requests signed with these keys."""

    def __init__(self, app: App, access_key: str, secret_key: str) -> None:
        self.app, self._access, self._secret = app, access_key, secret_key

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        reason = signed_by(environ, self._access, self._secret)
        if reason is None:
            return self.app(environ, start_response)
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>"
            f"<Message>iobench's store answers only the run's signed requests: {reason}</Message></Error>"
        ).encode()
        start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]


def keys_from_environment() -> tuple[str, str]:
    """The run's keys, taken out of this process's environment (what it starts does not inherit them)."""
    access, _, secret = os.environ.pop(KEYS_VARIABLE, "").partition(":")
    if not access or not secret:
        raise SystemExit(f"{KEYS_VARIABLE} must hold ACCESS:SECRET")
    return access, secret


def main(host: str, port: int) -> None:
    import signal

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    access, secret = keys_from_environment()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = SignedOnly(DomainDispatcherApplication(create_backend_app), access, secret)
    run_simple(host, port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))  # sys.argv[3]: the state folder, read by a later start's stale removal
