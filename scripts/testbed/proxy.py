"""A small HTTP forward proxy for the test bed's hosts: Debian mirrors only, nothing else.

The hosts sit on a bridge with no route out (``net.ipv4.ip_forward`` stays 0), so apt on a
host can reach its package mirror only through this proxy, listening on the bridge
address. It forwards plain-HTTP ``GET``/``HEAD`` requests (what apt sends to an
``http://`` proxy) for an allow-list of mirror host names and refuses everything else
(other hosts, other methods, ``CONNECT`` tunnels) with 403. One request per connection
(``Connection: close``): apt reconnects by itself, and the proxy never has to parse a
response body.

If the machine itself reaches Debian through a proxy (apt's ``Acquire::http::Proxy`` or
``http_proxy``), requests go on to that proxy; else straight to the mirror.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 64 * 1024
CONNECT_TIMEOUT_S = 20.0
IDLE_TIMEOUT_S = 120.0


class Refused(Exception):
    """The request is not allowed (answered with 403 and this reason)."""


def parse_request_head(head: bytes, allowed: frozenset[str]) -> tuple[str, int, bytes]:
    """Validate an absolute-form request; return (host, port, request in origin form)."""
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise Refused("malformed request line") from None
    if method not in ("GET", "HEAD"):
        raise Refused(f"method {method} not allowed")
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise Refused("only absolute http:// URLs are proxied")
    host = url.hostname.lower()
    if host not in allowed:
        raise Refused(f"host {host} is not an allowed mirror")
    port = url.port or 80
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    headers = [line for line in lines[1:] if line and not line.lower().startswith(
        ("connection:", "proxy-connection:", "keep-alive:", "proxy-authorization:"))]
    out = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
    return host, port, out.encode("latin-1")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), IDLE_TIMEOUT_S)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


class Proxy:
    def __init__(self, allowed: frozenset[str], upstream: tuple[str, int] | None) -> None:
        self.allowed = allowed
        self.upstream = upstream

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
            if len(head) > MAX_HEADER_BYTES:
                raise Refused("request head too large")
            host, port, request = parse_request_head(head[:-4] + b"\r\n", self.allowed)
            if self.upstream is not None:
                # An upstream proxy wants the absolute form it was given, minus hop headers.
                first, rest = request.split(b"\r\n", 1)
                method, path, version = first.split(b" ")
                target = f"http://{host}:{port}".encode() + path
                request = b" ".join([method, target, version]) + b"\r\n" + rest
                up_host, up_port = self.upstream
            else:
                up_host, up_port = host, port
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(up_host, up_port), CONNECT_TIMEOUT_S)
            up_writer.write(request)
            await up_writer.drain()
            await _pipe(up_reader, writer)
            up_writer.close()
        except Refused as exc:
            print(f"proxy: refused: {exc}", flush=True)
            body = f"refused by the test bed's proxy: {exc}\n".encode()
            writer.write(b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
        except (TimeoutError, OSError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError) as exc:
            print(f"proxy: error: {type(exc).__name__}: {exc}", flush=True)
        finally:
            try:
                await writer.drain()
            except OSError:
                pass
            writer.close()


async def serve(host: str, port: int, allowed: frozenset[str],
                upstream: tuple[str, int] | None) -> None:
    proxy = Proxy(allowed, upstream)
    server = await asyncio.start_server(proxy.handle, host, port, limit=MAX_HEADER_BYTES)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"proxy: listening on {host}:{port}, allowed {sorted(allowed)}, "
          f"upstream {upstream}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--allow", action="append", required=True, help="mirror host name")
    parser.add_argument("--upstream", default=None, help="host:port of an upstream proxy")
    args = parser.parse_args(argv)
    upstream = None
    if args.upstream:
        up_host, _, up_port = args.upstream.rpartition(":")
        upstream = (up_host, int(up_port))
    asyncio.run(serve(args.host, args.port, frozenset(h.lower() for h in args.allow),
                      upstream))
    return 0


if __name__ == "__main__":
    sys.exit(main())
