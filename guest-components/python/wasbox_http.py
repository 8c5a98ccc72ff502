"""HTTP and HTTPS for `http.client`, `urllib.request`, urllib3 (`requests`) and httpx,
over `wasi:http`.

The host makes these connections, under the node's and the sandbox's network policy,
resolving names and doing TLS itself (a program's own sockets connect where the policy
allows too, but have no TLS: see `wasbox_ssl`). Here `http.client`'s connection gets an
exchange object in place of a socket: it collects the bytes `http.client` writes (a whole
HTTP/1.1 request), sends that request through `wasi:http/outgoing-handler` once it is
complete, and hands `http.client` the answer as HTTP/1.1 bytes to parse, so everything above
(`urllib.request.urlopen`, redirects, cookies, `http.client.HTTPResponse`) works as usual.
`http.client.HTTPSConnection` and urllib's HTTPS handler exist too (CPython leaves them out
without its `ssl` module). urllib3's connections and httpx's transports are replaced when
those packages are first imported.

A refused destination is `ConnectionRefusedError` "blocked by the sandbox network policy";
an unknown name `socket.gaierror`; a certificate problem `OSError` "certificate verify
failed" (httpx raises its own `ConnectError`/`TimeoutException` for these).
"""

import http.client
import io
import socket
import urllib.request

from wit_world.imports import outgoing_handler
from wit_world.imports import wasi_http_types as http_types

CHUNK = 4096
BLOCKED = "blocked by the sandbox network policy"


def _unwrap(value):
    """componentize-py's `Ok`/`Err` wrappers of nested results, unwrapped (`Err` raised)."""
    name = type(value).__name__
    if name == "Ok":
        return _unwrap(value.value)
    if name == "Err":
        raise _error(value.value)
    return value


def _error(code):
    """An OSError for a wasi:http error code, as socket and ssl code would raise."""
    name = type(code).__name__
    if name.startswith("ErrorCode_"):
        name = name[len("ErrorCode_"):]
    if name in ("HttpRequestDenied", "DestinationIpProhibited"):
        return ConnectionRefusedError(111, "Connection refused: " + BLOCKED)
    if name in ("ConnectionLimitReached",):
        return ConnectionRefusedError(111, "Connection refused: the sandbox's connection or byte limit is reached")
    if name in ("DnsError", "DnsTimeout", "DestinationNotFound"):
        return socket.gaierror(-2, "Name or service not known")
    if name in ("ConnectionRefused", "DestinationUnavailable", "DestinationIpUnroutable"):
        return ConnectionRefusedError(111, "Connection refused")
    if name in ("ConnectionTimeout", "ConnectionReadTimeout", "ConnectionWriteTimeout",
                "HttpResponseTimeout"):
        return TimeoutError(110, "timed out")
    if name == "TlsCertificateError":
        return OSError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    if name in ("TlsProtocolError", "TlsAlertReceived"):
        return OSError(1, "[SSL] TLS handshake failed")
    if name == "ConnectionTerminated":
        return ConnectionResetError(104, "Connection reset by peer")
    detail = getattr(code, "value", None)
    return OSError(5, "HTTP request failed: %s%s" % (name, "" if detail is None else " (%s)" % (detail,)))


_METHODS = {
    "GET": "Method_Get", "HEAD": "Method_Head", "POST": "Method_Post", "PUT": "Method_Put",
    "DELETE": "Method_Delete", "CONNECT": "Method_Connect", "OPTIONS": "Method_Options",
    "TRACE": "Method_Trace", "PATCH": "Method_Patch",
}


def _method(name):
    cls = _METHODS.get(name)
    if cls is not None:
        return getattr(http_types, cls)()
    return http_types.Method_Other(name)


def _dechunk(data):
    out = bytearray()
    at = 0
    while True:
        end = data.index(b"\r\n", at)
        size = int(data[at:end].split(b";")[0], 16)
        at = end + 2
        if size == 0:
            return bytes(out)
        out += data[at:at + size]
        at += size + 2


def fetch(method, https, authority, path, headers, body, timeout=None):
    """One request through the host: (status, [(name, value bytes)], body bytes)."""
    fields = http_types.Fields.from_list(
        [(k, v) for k, v in headers if k.lower() not in
         ("host", "connection", "keep-alive", "transfer-encoding", "upgrade",
          "proxy-connection", "http2-settings")])
    request = http_types.OutgoingRequest(fields)
    request.set_method(_method(method))
    request.set_scheme(http_types.Scheme_Https() if https else http_types.Scheme_Http())
    request.set_authority(authority)
    request.set_path_with_query(path)
    options = None
    if timeout is not None and timeout > 0:
        options = http_types.RequestOptions()
        nanos = int(timeout * 1e9)
        options.set_connect_timeout(nanos)
        options.set_first_byte_timeout(nanos)
        options.set_between_bytes_timeout(nanos)
    outgoing = request.body()
    try:
        future = outgoing_handler.handle(request, options)
    except Exception as e:  # noqa: BLE001 (componentize-py raises Err(code))
        raise _error(getattr(e, "value", e)) from None
    if body:
        with outgoing.write() as stream:
            for at in range(0, len(body), CHUNK):
                stream.blocking_write_and_flush(body[at:at + CHUNK])
    try:
        http_types.OutgoingBody.finish(outgoing, None)
    except Exception as e:  # noqa: BLE001
        raise _error(getattr(e, "value", e)) from None
    with future.subscribe() as ready:
        ready.block()
    answer = _unwrap(future.get())
    status = answer.status()
    with answer.headers() as h:
        head = h.entries()
    incoming = answer.consume()
    data = bytearray()
    with incoming.stream() as stream:
        while True:
            try:
                piece = stream.blocking_read(65536)
            except Exception as e:  # noqa: BLE001
                err = getattr(e, "value", None)
                if type(err).__name__.endswith("Closed"):
                    break
                io_error = getattr(err, "value", None)
                code = http_types.http_error_code(io_error) if io_error is not None else None
                raise (_error(code) if code is not None else OSError(5, "HTTP read failed")) from None
            data += piece
    http_types.IncomingBody.finish(incoming)
    return status, head, bytes(data)


class _Exchange:
    """What `http.client` takes for its socket: it collects a request and, once complete,
    sends it through the host; `makefile` gives the answer back as HTTP/1.1 bytes."""

    def __init__(self, host, port, https, timeout):
        self.host, self.port, self.https, self.timeout = host, port, https, timeout
        self.sent = bytearray()
        self.answer = None

    def _authority(self):
        host = self.host
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host
        default = 443 if self.https else 80
        return host if self.port in (None, default) else "%s:%d" % (host, self.port)

    def sendall(self, data):
        self.sent += bytes(data)
        self._maybe_send()

    send = sendall

    def _maybe_send(self):
        if self.answer is not None:
            return
        end = self.sent.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.sent[:end]).decode("latin-1").split("\r\n")
        body = bytes(self.sent[end + 4:])
        method, path = head[0].split(" ")[:2]
        headers = []
        length, chunked = None, False
        for line in head[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip(), value.strip()
            if name.lower() == "content-length":
                length = int(value)
            if name.lower() == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            headers.append((name, value.encode("latin-1")))
        if chunked:
            if not body.endswith(b"0\r\n\r\n"):
                return
            body = _dechunk(body)
            headers.append(("Content-Length", str(len(body)).encode()))
        elif length is not None:
            if len(body) < length:
                return
            body = body[:length]
        status, answer_headers, data = fetch(
            method, self.https, self._authority(), path, headers, body, self.timeout)
        lines = ["HTTP/1.1 %d %s" % (status, http.client.responses.get(status, ""))]
        for name, value in answer_headers:
            if name.lower() in ("transfer-encoding", "content-length", "connection"):
                continue
            lines.append("%s: %s" % (name, value.decode("latin-1")))
        if method != "HEAD":
            lines.append("Content-Length: %d" % len(data))
        lines.append("Connection: close")
        self.answer = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data

    def makefile(self, mode="rb", *args, **kwargs):
        if self.answer is None:
            raise ConnectionResetError(104, "the request was not complete")
        return io.BufferedReader(io.BytesIO(self.answer))

    def settimeout(self, timeout):
        self.timeout = timeout

    def setsockopt(self, *args):
        pass

    def close(self):
        pass

    def shutdown(self, how):
        pass


def _connect(self):
    self.sock = _Exchange(self.host, self.port, getattr(self, "_wasbox_https", False),
                          self.timeout if isinstance(self.timeout, (int, float)) else None)


class HTTPSConnection(http.client.HTTPConnection):
    """HTTPS through the host (which verifies certificates against the system's roots and
    the operator's); `context` and the certificate arguments are accepted and unused."""

    default_port = 443
    _wasbox_https = True

    def __init__(self, host, port=None, *, context=None, timeout=socket._GLOBAL_DEFAULT_TIMEOUT,
                 source_address=None, blocksize=8192, key_file=None, cert_file=None, **kwargs):
        super().__init__(host, port, timeout, source_address, blocksize=blocksize)
        self._context = context


class HTTPSHandler(urllib.request.AbstractHTTPHandler):
    def __init__(self, debuglevel=None, context=None, check_hostname=None):
        super().__init__(debuglevel)
        self._context = context

    def https_open(self, req):
        return self.do_open(HTTPSConnection, req, context=self._context)

    https_request = urllib.request.AbstractHTTPHandler.do_request_


def _patch_urllib3(pool):
    """urllib3 (and so `requests`) over the exchange: its connections get one in place of a
    socket, never pooled (each request is its own exchange), and HTTPS (which urllib3 turns
    off without the `ssl` module) goes through the host's TLS."""
    import urllib3.connection as conn

    def _new_conn(self):
        timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
        return _Exchange(self._dns_host, self.port,
                         isinstance(self, WasiHTTPSConnection), timeout)

    conn.HTTPConnection._new_conn = _new_conn
    conn.HTTPConnection.is_connected = property(lambda self: False)

    class WasiHTTPSConnection(conn.HTTPConnection):
        default_port = 443
        default_scheme = "https"
        is_verified = True
        proxy_is_verified = None

        def __init__(self, host, port=None, *, cert_file=None, key_file=None,
                     key_password=None, cert_reqs=None, ca_certs=None, ca_cert_dir=None,
                     ca_cert_data=None, assert_hostname=None, assert_fingerprint=None,
                     ssl_version=None, ssl_minimum_version=None, ssl_maximum_version=None,
                     ssl_context=None, server_hostname=None, **kwargs):
            super().__init__(host, port, **kwargs)

    pool.HTTPSConnectionPool.ConnectionCls = WasiHTTPSConnection
    conn.HTTPSConnection = WasiHTTPSConnection


def _patch_httpx(httpx):
    """httpx's transports over the host's HTTP: every request one `fetch`, its answer read
    whole (a streamed response arrives at once); the TLS arguments are accepted and unused,
    the host verifying certificates itself."""
    import httpx._client as client

    def _timeout(request):
        t = request.extensions.get("timeout") or {}
        values = [v for v in (t.get("connect"), t.get("read")) if v is not None]
        return max(values) if values else None

    def _send(request, body):
        url = request.url
        headers = [(k.decode("latin-1"), v) for k, v in request.headers.raw]
        try:
            status, head, data = fetch(request.method, url.scheme == "https",
                                       url.netloc.decode("ascii"), url.raw_path.decode("ascii"),
                                       headers, body, _timeout(request))
        except TimeoutError as e:
            raise httpx.ReadTimeout(str(e), request=request) from None
        except ConnectionResetError as e:
            raise httpx.ReadError(str(e), request=request) from None
        except OSError as e:
            raise httpx.ConnectError(str(e), request=request) from None
        return httpx.Response(
            status, headers=[(k.encode("latin-1"), v) for k, v in head],
            stream=httpx.ByteStream(data), request=request,
            extensions={"http_version": b"HTTP/1.1",
                        "reason_phrase": http.client.responses.get(status, "").encode()})

    class WasiTransport(httpx.BaseTransport):
        def __init__(self, *args, **kwargs):
            pass

        def handle_request(self, request):
            return _send(request, request.read())

    class AsyncWasiTransport(httpx.AsyncBaseTransport):
        def __init__(self, *args, **kwargs):
            pass

        async def handle_async_request(self, request):
            return _send(request, await request.aread())

    httpx.HTTPTransport = client.HTTPTransport = WasiTransport
    httpx.AsyncHTTPTransport = client.AsyncHTTPTransport = AsyncWasiTransport


class _PatchOnImport:
    """Patches a module right after it is first imported: urllib3's connection pools,
    httpx's transports."""

    PATCHES = {"urllib3.connectionpool": _patch_urllib3, "httpx": _patch_httpx}

    def find_spec(self, name, path, target=None):
        patch = self.PATCHES.get(name)
        if patch is None:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    """Puts the exchange under `http.client`, urllib, urllib3 and httpx, and `wasbox_ssl`
    in the place of `ssl`."""
    import sys
    import wasbox_ssl
    sys.modules.setdefault("ssl", wasbox_ssl)
    http.client.HTTPConnection.connect = _connect
    http.client.HTTPSConnection = HTTPSConnection
    urllib.request.HTTPSHandler = HTTPSHandler
    urllib.request._opener = None
    sys.meta_path.insert(0, _PatchOnImport())
