"""`ssl` for a sandbox whose TLS is the host's.

CPython here has no OpenSSL: TLS is done by the host, which verifies certificates against
the system's roots and the operator's (`--ca-cert`). HTTPS of `http.client`, `urllib`,
`requests` and `httpx` goes through the host's HTTP client (see `wasbox_http`); a program's
own socket gets TLS from `SSLContext.wrap_socket`, whose `SSLSocket` is a connection the host
makes to the same peer (`wasbox:sandbox/tls`) and carries the bytes of. The host always
verifies the server's certificate for the name given (`server_hostname`, else the address):
a context's `verify_mode` and `check_hostname` cannot turn that off. What it cannot do is
serve TLS (`server_side=True`) or TLS over memory buffers (`wrap_bio`).
"""

import enum
import errno as _errno
import os
import socket as _socket

from componentize_py_types import Err as _Err
from wit_world.imports import tls as _tls

OPENSSL_VERSION = "wasbox host TLS (rustls)"
OPENSSL_VERSION_INFO = (3, 0, 0, 0, 0)
OPENSSL_VERSION_NUMBER = 0x30000000
HAS_SNI = True
HAS_ALPN = True
HAS_ECDH = True
HAS_NPN = False
HAS_NEVER_CHECK_COMMON_NAME = True
HAS_TLSv1 = HAS_TLSv1_1 = False
HAS_TLSv1_2 = HAS_TLSv1_3 = True
HAS_SSLv2 = HAS_SSLv3 = False
HAS_PSK = False
CHANNEL_BINDING_TYPES = []

_NO_TLS = ("TLS over memory buffers and TLS servers are not available in this sandbox; "
           "a client's socket gets TLS from SSLContext.wrap_socket")


class SSLError(OSError):
    def __init__(self, *args):
        super().__init__(*args)
        self.library = None
        self.reason = args[1] if len(args) > 1 else (args[0] if args else None)


class SSLZeroReturnError(SSLError):
    pass


class SSLWantReadError(SSLError):
    pass


class SSLWantWriteError(SSLError):
    pass


class SSLSyscallError(SSLError):
    pass


class SSLEOFError(SSLError):
    pass


class SSLCertVerificationError(SSLError, ValueError):
    verify_code = 0
    verify_message = ""


CertificateError = SSLCertVerificationError


class VerifyMode(enum.IntEnum):
    CERT_NONE = 0
    CERT_OPTIONAL = 1
    CERT_REQUIRED = 2


CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED = VerifyMode


class VerifyFlags(enum.IntFlag):
    VERIFY_DEFAULT = 0
    VERIFY_CRL_CHECK_LEAF = 0x4
    VERIFY_CRL_CHECK_CHAIN = 0xC
    VERIFY_X509_STRICT = 0x20
    VERIFY_ALLOW_PROXY_CERTS = 0x40
    VERIFY_X509_TRUSTED_FIRST = 0x8000
    VERIFY_X509_PARTIAL_CHAIN = 0x80000


globals().update(VerifyFlags.__members__)


class _SSLMethod(enum.IntEnum):
    PROTOCOL_SSLv23 = 2
    PROTOCOL_TLS_CLIENT = 16
    PROTOCOL_TLS_SERVER = 17


PROTOCOL_SSLv23 = PROTOCOL_TLS = _SSLMethod.PROTOCOL_SSLv23
PROTOCOL_TLS_CLIENT = _SSLMethod.PROTOCOL_TLS_CLIENT
PROTOCOL_TLS_SERVER = _SSLMethod.PROTOCOL_TLS_SERVER


class Options(enum.IntFlag):
    OP_ALL = 0x80000054
    OP_NO_SSLv2 = 0
    OP_NO_SSLv3 = 0x2000000
    OP_NO_TLSv1 = 0x4000000
    OP_NO_TLSv1_1 = 0x10000000
    OP_NO_TLSv1_2 = 0x8000000
    OP_NO_TLSv1_3 = 0x20000000
    OP_NO_COMPRESSION = 0x20000
    OP_NO_TICKET = 0x4000
    OP_NO_RENEGOTIATION = 0x40000000
    OP_CIPHER_SERVER_PREFERENCE = 0x400000
    OP_SINGLE_DH_USE = 0
    OP_SINGLE_ECDH_USE = 0
    OP_ENABLE_MIDDLEBOX_COMPAT = 0x100000
    OP_IGNORE_UNEXPECTED_EOF = 0x80
    OP_LEGACY_SERVER_CONNECT = 0x4


globals().update(Options.__members__)


class TLSVersion(enum.IntEnum):
    MINIMUM_SUPPORTED = -2
    MAXIMUM_SUPPORTED = -1
    SSLv3 = 0x300
    TLSv1 = 0x301
    TLSv1_1 = 0x302
    TLSv1_2 = 0x303
    TLSv1_3 = 0x304


class AlertDescription(enum.IntEnum):
    ALERT_DESCRIPTION_HANDSHAKE_FAILURE = 40
    ALERT_DESCRIPTION_INTERNAL_ERROR = 80


class Purpose(enum.Enum):
    SERVER_AUTH = ("1.3.6.1.5.5.7.3.1", "serverAuth")
    CLIENT_AUTH = ("1.3.6.1.5.5.7.3.2", "clientAuth")


class DefaultVerifyPaths:
    cafile = None
    capath = None
    openssl_cafile_env = "SSL_CERT_FILE"
    openssl_cafile = "/etc/ssl/cert.pem"
    openssl_capath_env = "SSL_CERT_DIR"
    openssl_capath = "/etc/ssl/certs"


def get_default_verify_paths():
    return DefaultVerifyPaths()


class SSLContext:
    """Settings a library makes for its connections; the host's TLS is what is used."""

    sslsocket_class = None
    sslobject_class = None

    def __init__(self, protocol=PROTOCOL_TLS_CLIENT, *args, **kwargs):
        self.protocol = protocol
        self.verify_mode = CERT_NONE if protocol == PROTOCOL_TLS_SERVER else CERT_REQUIRED
        self.check_hostname = protocol == PROTOCOL_TLS_CLIENT
        self.options = OP_ALL | OP_NO_SSLv3
        self.verify_flags = VERIFY_X509_TRUSTED_FIRST
        self.minimum_version = TLSVersion.MINIMUM_SUPPORTED
        self.maximum_version = TLSVersion.MAXIMUM_SUPPORTED
        self.post_handshake_auth = False
        self.keylog_filename = None
        self.hostname_checks_common_name = False
        self.security_level = 2
        self.sni_callback = None
        self._alpn = []

    def load_default_certs(self, purpose=Purpose.SERVER_AUTH):
        pass

    def load_verify_locations(self, cafile=None, capath=None, cadata=None):
        for path in (cafile, capath):
            if path is not None and not os.path.exists(path):
                raise FileNotFoundError(2, "No such file or directory", path)

    def load_cert_chain(self, certfile, keyfile=None, password=None):
        if not os.path.exists(certfile):
            raise FileNotFoundError(2, "No such file or directory", certfile)

    def set_default_verify_paths(self):
        pass

    def set_ciphers(self, ciphers):
        pass

    def get_ciphers(self):
        return []

    def set_alpn_protocols(self, protocols):
        self._alpn = list(protocols)

    def set_npn_protocols(self, protocols):
        pass

    def set_ecdh_curve(self, name):
        pass

    def cert_store_stats(self):
        return {"crl": 0, "x509_ca": 0, "x509": 0}

    def get_ca_certs(self, binary_form=False):
        return []

    def session_stats(self):
        return {}

    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True,
                    suppress_ragged_eofs=True, server_hostname=None, session=None):
        if server_side:
            raise SSLError(1, _NO_TLS)
        return SSLSocket._wrap(self, sock, server_hostname)

    def wrap_bio(self, incoming, outgoing, server_side=False, server_hostname=None,
                 session=None):
        raise SSLError(1, _NO_TLS)


def create_default_context(purpose=Purpose.SERVER_AUTH, *, cafile=None, capath=None,
                           cadata=None):
    context = SSLContext(PROTOCOL_TLS_CLIENT if purpose == Purpose.SERVER_AUTH
                         else PROTOCOL_TLS_SERVER)
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


_create_default_https_context = create_default_context
_create_unverified_context = create_default_context


def _tls_error(err):
    """The exception Python's `ssl` would raise for the host's `tls-error`."""
    name = type(err).__name__
    value = getattr(err, "value", None)
    if name.endswith("Refused"):
        return ConnectionRefusedError(_errno.ECONNREFUSED, "Connection refused: %s" % value)
    if name.endswith("Handshake"):
        if "certificate" in str(value).lower():
            e = SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate "
                                            "verify failed: %s" % value)
            e.verify_message = str(value)
            return e
        return SSLError(1, "[SSL] %s" % value)
    if name.endswith("Timeout"):
        return TimeoutError(_errno.ETIMEDOUT, "The read operation timed out")
    if "refused" in str(value).lower():
        return ConnectionRefusedError(_errno.ECONNREFUSED, str(value))
    return OSError(_errno.EIO, str(value))


def _millis(timeout):
    return None if timeout is None else max(0, int(timeout * 1000))


class SSLSocket(_socket.socket):
    """A client's TLS connection: the host's (`wasbox:sandbox/tls`), to the peer of the
    socket it wraps. The plain socket is closed; this one keeps its family and options."""

    def __init__(self, *args, **kwargs):
        raise TypeError("SSLSocket does not have a public constructor; use "
                        "SSLContext.wrap_socket")

    @classmethod
    def _wrap(cls, context, sock, server_hostname):
        self = _socket.socket.__new__(cls)
        _socket.socket.__init__(self, sock.family, sock.type, sock.proto)
        self.settimeout(sock.gettimeout())
        self._context = context
        self.server_hostname = server_hostname
        self.server_side = False
        self.session = None
        self._conn = None
        self._peer = None
        self._eof = False
        try:
            peer = sock.getpeername()
        except OSError:
            peer = None
        sock.close()
        if peer is not None:
            self._open(peer[0], peer[1])
        return self

    def _open(self, host, port):
        name = self.server_hostname or host
        try:
            conn = _tls.connect(host, port, name, _millis(self.gettimeout()))
        except _Err as e:
            raise _tls_error(e.value) from None
        self._conn = conn
        self._peer = (host, port)

    @property
    def context(self):
        return self._context

    def connect(self, address):
        if self._conn is not None:
            raise ValueError("attempt to connect already-connected SSLSocket!")
        host, port = address[0], address[1]
        infos = _socket.getaddrinfo(host, port, self.family, _socket.SOCK_STREAM)
        if self.server_hostname is None:
            self.server_hostname = host
        self._open(infos[0][4][0], port)

    def connect_ex(self, address):
        try:
            self.connect(address)
        except OSError as e:
            return e.errno or _errno.ECONNREFUSED
        return 0

    def _check(self):
        if self._conn is None:
            raise OSError(_errno.ENOTCONN, "Socket is not connected")

    def do_handshake(self, block=False):
        self._check()

    def getpeername(self):
        self._check()
        return self._peer

    def recv(self, bufsize=1024, flags=0):
        self._check()
        if self._eof or bufsize <= 0:
            return b""
        try:
            data = self._conn.read(min(bufsize, 1 << 20), _millis(self.gettimeout()))
        except _Err as e:
            raise _tls_error(e.value) from None
        if not data:
            self._eof = True
        return bytes(data)

    def read(self, len=1024, buffer=None):
        if buffer is None:
            return self.recv(len)
        return self.recv_into(buffer, len)

    def recv_into(self, buffer, nbytes=None, flags=0):
        view = memoryview(buffer).cast("B")
        n = len(view) if not nbytes else min(nbytes, len(view))
        data = self.recv(n)
        view[:len(data)] = data
        return len(data)

    def send(self, data, flags=0):
        self._check()
        data = bytes(data)
        try:
            self._conn.write(data, _millis(self.gettimeout()))
        except _Err as e:
            raise _tls_error(e.value) from None
        return len(data)

    write = send

    def sendall(self, data, flags=0):
        self.send(data)

    def sendfile(self, file, offset=0, count=None):
        return self._sendfile_use_send(file, offset, count)

    def makefile(self, mode="r", buffering=None, *, encoding=None, errors=None, newline=None):
        return _socket.socket.makefile(self, mode, buffering, encoding=encoding,
                                       errors=errors, newline=newline)

    def pending(self):
        return 0

    def version(self):
        return None if self._conn is None else self._conn.version()

    def cipher(self):
        if self._conn is None:
            return None
        name = self._conn.cipher()
        bits = 128 if "128" in name else 256
        return name, self._conn.version(), bits

    def shared_ciphers(self):
        return None

    def compression(self):
        return None

    def selected_alpn_protocol(self):
        return None

    def selected_npn_protocol(self):
        return None

    def get_channel_binding(self, cb_type="tls-unique"):
        return None

    def getpeercert(self, binary_form=False):
        # Verified by the host, which keeps the certificate to itself.
        self._check()
        return b"" if binary_form else {}

    def unwrap(self):
        raise SSLError(1, "unwrapping a TLS connection to its plain socket is not available")

    def shutdown(self, how):
        if self._conn is not None and how in (_socket.SHUT_WR, _socket.SHUT_RDWR):
            self._conn.shutdown()
        if how in (_socket.SHUT_RD, _socket.SHUT_RDWR):
            self._eof = True

    def _real_close(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.__exit__(None, None, None)
        super()._real_close()


class SSLObject:
    def __init__(self, *args, **kwargs):
        raise TypeError("SSLObject does not have a public constructor; " + _NO_TLS)


class MemoryBIO:
    """The buffer TLS objects read from and write to (it works; TLS over it does not)."""

    def __init__(self):
        self._data = bytearray()
        self.eof = False

    @property
    def pending(self):
        return len(self._data)

    def read(self, size=-1):
        size = len(self._data) if size < 0 else size
        out = bytes(self._data[:size])
        del self._data[:size]
        return out

    def write(self, data):
        self._data += data
        return len(data)

    def write_eof(self):
        self.eof = True


class SSLSession:
    pass


def wrap_socket(sock, keyfile=None, certfile=None, server_side=False, cert_reqs=None,
                ssl_version=None, ca_certs=None, do_handshake_on_connect=True,
                suppress_ragged_eofs=True, ciphers=None, server_hostname=None):
    return create_default_context().wrap_socket(sock, server_side=server_side,
                                                server_hostname=server_hostname)


def match_hostname(cert, hostname):
    raise CertificateError("hostname %r doesn't match (no certificate here)" % hostname)


def cert_time_to_seconds(cert_time):
    import calendar
    import time
    return calendar.timegm(time.strptime(cert_time, "%b %d %H:%M:%S %Y GMT"))


def DER_cert_to_PEM_cert(der_cert_bytes):
    import base64
    text = base64.standard_b64encode(der_cert_bytes).decode("ascii")
    lines = [text[i:i + 64] for i in range(0, len(text), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


def PEM_cert_to_DER_cert(pem_cert_string):
    import base64
    body = pem_cert_string.strip()
    body = body[len("-----BEGIN CERTIFICATE-----"):-len("-----END CERTIFICATE-----")]
    return base64.decodebytes(body.encode("ascii"))


def get_server_certificate(addr, ssl_version=None, ca_certs=None, timeout=None):
    raise SSLError(1, "the host verifies servers' certificates and keeps them to itself")


def RAND_bytes(n):
    return os.urandom(n)


def RAND_status():
    return True


def RAND_add(string, entropy):
    pass
