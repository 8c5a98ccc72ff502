"""`ssl` for a sandbox whose TLS is the host's.

CPython here has no OpenSSL: HTTPS is done by the host, which verifies certificates against
the system's roots and the operator's (`--ca-cert`), for `http.client`, `urllib`, `requests`
and `httpx` (see `wasbox_http`). This module stands in for `ssl` so that libraries which
import it (httpx, httpcore, anyio, urllib3) load, and their contexts can be made and
configured. What it cannot do is TLS on a program's own socket: `wrap_socket` and
`wrap_bio` raise `SSLError` saying so.
"""

import enum
import os
import socket as _socket

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

_NO_TLS = ("TLS on a program's own socket is not available in this sandbox; HTTPS goes "
           "through the host (http.client, urllib, requests and httpx do)")


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
        raise SSLError(1, _NO_TLS)

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


class SSLSocket(_socket.socket):
    def __init__(self, *args, **kwargs):
        raise TypeError("SSLSocket does not have a public constructor; " + _NO_TLS)


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


def wrap_socket(sock, *args, **kwargs):
    raise SSLError(1, _NO_TLS)


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
    raise SSLError(1, _NO_TLS)


def RAND_bytes(n):
    return os.urandom(n)


def RAND_status():
    return True


def RAND_add(string, entropy):
    pass
