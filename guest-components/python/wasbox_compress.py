"""`_bz2` and `_lzma` for the wasbox `python3`: the C modules CPython builds on libbzip2 and
liblzma are not in this interpreter, so the codecs run in the image's `bzip2` and `xz`
programs (sandbox processes, data through pipes) and these classes keep the standard
library's API: `bz2` and `lzma` (`compress`, `decompress`, `open`, the file classes,
incremental compressors and decompressors, concatenated streams, `unused_data`, `eof`,
`needs_input`, `max_length`) import them unchanged.

A compressor gathers its input and compresses it at `flush()`. A decompressor gathers its
input until a whole stream is there (found by the stream's own end marker: bzip2's 48-bit
end-of-stream magic and CRC, xz's stream footer with its CRC), then decodes that stream at
once; what follows is `unused_data`. Raw LZMA streams (`FORMAT_RAW`) and custom filter
chains are refused with `LZMAError`: the `xz` program writes `.xz` and `.lzma` files with
its presets.
"""

import sys
import types
import zlib

_run = [None]


def set_runner(run_child):
    """`run_child(argv, data)` runs a program of the image with `data` on its stdin and
    returns (exit code, stdout, stderr)."""
    _run[0] = run_child


def _install():
    """Registers `_bz2` and `_lzma` (at import: before `bz2`, `lzma`, `shutil` or `tarfile`
    look for them)."""
    for name, attrs in (("_bz2", _BZ2), ("_lzma", _LZMA)):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m


def _filter(argv, data, error):
    code, out, err = _run[0](argv, data)
    if code != 0:
        msg = err.decode("utf-8", "replace").strip().splitlines()
        raise error(msg[-1] if msg else "%s failed with status %d" % (argv[0], code))
    return out


# -- bzip2 -----------------------------------------------------------------------------

class _Compressor:
    """Gathers input and compresses it at `flush()` with the program `self._argv`."""

    _error = OSError

    def __init__(self, argv):
        self._argv = argv
        self._buf = []
        self._flushed = False

    def compress(self, data, /):
        if self._flushed:
            raise ValueError("Compressor has been flushed")
        self._buf.append(bytes(memoryview(data)))
        return b""

    def flush(self):
        if self._flushed:
            raise ValueError("Repeated call to flush()")
        self._flushed = True
        data, self._buf = b"".join(self._buf), []
        return _filter(self._argv, data, self._error)


class BZ2Compressor(_Compressor):
    def __init__(self, compresslevel=9, /):
        if not 1 <= compresslevel <= 9:
            raise ValueError("compresslevel must be between 1 and 9")
        super().__init__(["bzip2", "-c", "-%d" % compresslevel])


# The end-of-stream marker of a bzip2 stream: 0x177245385090 (sqrt(pi)), bit-aligned,
# then a 32-bit CRC, then padding to a byte.
_BZ_EOS = 0x177245385090


def _bz_stream_end(buf, start):
    """The byte offset just past the first complete bzip2 stream of `buf` whose end
    marker begins at or after byte `start`, or None."""
    n = len(buf)
    best = None
    for shift in range(8):
        # The marker starting `shift` bits into a byte covers 7 bytes; the 5 in the
        # middle are fixed for this shift.
        whole = (_BZ_EOS << (8 - shift)) & ((1 << 56) - 1)
        b = whole.to_bytes(7, "big")
        middle = b[1:6]
        pos = buf.find(middle, start + 1)
        while pos != -1:
            first = pos - 1
            if first + 7 <= n:
                window = int.from_bytes(buf[first:first + 7], "big")
                mask = ((1 << 48) - 1) << (8 - shift)
                if window & mask == whole & mask:
                    bit = first * 8 + shift + 48 + 32
                    end = (bit + 7) // 8
                    if end <= n and (best is None or end < best):
                        best = end
                    break
            pos = buf.find(middle, pos + 1)
    return best


class _Decompressor:
    """Gathers input to the end of a stream and decodes the stream in one go."""

    def __init__(self):
        self._buf = bytearray()
        self._searched = 0
        self._out = b""
        self._done = False
        self.eof = False
        self.unused_data = b""
        self.needs_input = True

    def _give(self, max_length):
        if max_length is None or max_length < 0:
            out, self._out = self._out, b""
        else:
            out, self._out = self._out[:max_length], self._out[max_length:]
        if self._out:
            self.needs_input = False
        elif self._done:
            self.eof = True
            self.needs_input = False
        else:
            self.needs_input = True
        return out

    def decompress(self, data, max_length=-1):
        if self.eof:
            raise EOFError("End of stream already reached")
        if self._done:
            # The stream is decoded; its output is still being handed out.
            self.unused_data += bytes(memoryview(data))
            return self._give(max_length)
        self._buf += memoryview(data)
        self._check_start()
        end = self._find_end()
        if end is None:
            return self._give(max_length)
        stream = bytes(self._buf[:end])
        self.unused_data = bytes(self._buf[end:])
        self._buf = bytearray()
        self._out = self._decode(stream)
        self._done = True
        return self._give(max_length)


class BZ2Decompressor(_Decompressor):
    def _check_start(self):
        b = self._buf
        head = bytes(b[:3])
        if head != b"BZh"[:len(head)] or (len(b) >= 4 and not 0x31 <= b[3] <= 0x39):
            raise OSError("Invalid data stream")

    def _find_end(self):
        # Search again only through what arrived since (a marker may straddle the join).
        start = max(0, self._searched - 8)
        self._searched = len(self._buf)
        return _bz_stream_end(self._buf, max(start, 3))

    def _decode(self, stream):
        return _filter(["bzip2", "-dc"], stream, OSError)


_BZ2 = {
    "BZ2Compressor": BZ2Compressor,
    "BZ2Decompressor": BZ2Decompressor,
}


# -- xz and lzma -----------------------------------------------------------------------

FORMAT_AUTO, FORMAT_XZ, FORMAT_ALONE, FORMAT_RAW = 0, 1, 2, 3
CHECK_NONE, CHECK_CRC32, CHECK_CRC64, CHECK_SHA256 = 0, 1, 4, 10
CHECK_ID_MAX, CHECK_UNKNOWN = 15, 16
FILTER_LZMA1, FILTER_LZMA2, FILTER_DELTA = 0x4000000000000001, 0x21, 0x03
FILTER_X86, FILTER_POWERPC, FILTER_IA64 = 0x04, 0x05, 0x06
FILTER_ARM, FILTER_ARMTHUMB, FILTER_SPARC = 0x07, 0x08, 0x09
MF_HC3, MF_HC4, MF_BT2, MF_BT3, MF_BT4 = 0x03, 0x04, 0x12, 0x13, 0x14
MODE_FAST, MODE_NORMAL = 1, 2
PRESET_DEFAULT, PRESET_EXTREME = 6, 0x80000000

_CHECK_NAMES = {CHECK_NONE: "none", CHECK_CRC32: "crc32", CHECK_CRC64: "crc64",
                CHECK_SHA256: "sha256"}
_XZ_MAGIC = b"\xfd7zXZ\x00"


class LZMAError(Exception):
    """Call to liblzma failed."""


def is_check_supported(check_id):
    return check_id in _CHECK_NAMES


def _preset_of(preset, filters):
    if filters is not None:
        chain = list(filters)
        if len(chain) != 1 or chain[0].get("id") not in (FILTER_LZMA1, FILTER_LZMA2):
            raise LZMAError("only a single LZMA1 or LZMA2 filter is supported in this sandbox")
        return chain[0].get("preset", PRESET_DEFAULT)
    return PRESET_DEFAULT if preset is None else preset


class LZMACompressor(_Compressor):
    _error = LZMAError

    def __init__(self, format=FORMAT_XZ, check=-1, preset=None, filters=None):
        if format not in (FORMAT_XZ, FORMAT_ALONE, FORMAT_RAW):
            raise ValueError("Invalid container format: %d" % format)
        if format != FORMAT_XZ and check not in (-1, CHECK_NONE):
            raise ValueError("Integrity checks are only supported by FORMAT_XZ")
        if preset is not None and filters is not None:
            raise ValueError("Cannot specify both preset and filter chain")
        if format == FORMAT_RAW:
            raise LZMAError("raw LZMA streams are not supported in this sandbox")
        level = _preset_of(preset, filters)
        if check == -1:
            check = CHECK_CRC64
        if format == FORMAT_XZ and check not in _CHECK_NAMES:
            raise LZMAError("Unsupported integrity check")
        extreme = bool(level & PRESET_EXTREME)
        level &= ~PRESET_EXTREME
        if not 0 <= level <= 9:
            raise LZMAError("Invalid compression preset: %d" % level)
        argv = ["xz", "-c", "-%d" % level]
        if extreme:
            argv.append("-e")
        if format == FORMAT_ALONE:
            argv.append("--format=lzma")
        else:
            argv.append("--check=" + _CHECK_NAMES[check])
        super().__init__(argv)


def _xz_stream_end(buf, start):
    """The offset just past the first complete .xz stream of `buf` (its 12-byte footer:
    CRC32 of the backward size and flags, which match the header's, then "YZ"), searching
    for footers that end at or after `start`."""
    flags = bytes(buf[6:8])
    pos = buf.find(b"YZ", max(start, 12 + 10))
    while pos != -1:
        f = pos - 10
        if (bytes(buf[f + 8:f + 10]) == flags
                and int.from_bytes(buf[f:f + 4], "little") == zlib.crc32(buf[f + 4:f + 10])):
            return pos + 2
        pos = buf.find(b"YZ", pos + 1)
    return None


def _alone_header_ok(b):
    """What liblzma accepts as a .lzma header: properties below 225, a dictionary size
    of 2^n or 2^n + 2^(n-1), a known size below 2^38 or the unknown size."""
    if b[0] >= 225:
        return False
    dict_size = int.from_bytes(b[1:5], "little")
    d = (dict_size - 1) & 0xFFFFFFFF
    for k in (2, 3, 4, 8, 16):
        d |= d >> k
    if (d + 1) & 0xFFFFFFFF != dict_size:
        return False
    size = int.from_bytes(b[5:13], "little")
    return size == (1 << 64) - 1 or size < (1 << 38)


class LZMADecompressor(_Decompressor):
    def __init__(self, format=FORMAT_AUTO, memlimit=None, filters=None):
        if format not in (FORMAT_AUTO, FORMAT_XZ, FORMAT_ALONE, FORMAT_RAW):
            raise ValueError("Invalid container format: %d" % format)
        if memlimit is not None and format == FORMAT_RAW:
            raise ValueError("Cannot specify memory limit with FORMAT_RAW")
        if format == FORMAT_RAW:
            raise LZMAError("raw LZMA streams are not supported in this sandbox")
        if filters is not None:
            raise ValueError("Cannot specify filters except with FORMAT_RAW")
        super().__init__()
        self._format = format
        self.check = CHECK_UNKNOWN

    def _check_start(self):
        b = self._buf
        if self._format == FORMAT_AUTO:
            head = bytes(b[:6])
            if head != _XZ_MAGIC[:len(head)]:
                self._format = FORMAT_ALONE
            elif len(head) == 6:
                self._format = FORMAT_XZ
        if self._format == FORMAT_XZ and bytes(b[:6]) != _XZ_MAGIC[:min(6, len(b))]:
            raise LZMAError("Input format not supported by decoder")
        if self._format == FORMAT_XZ and len(b) >= 8:
            self.check = b[7] & 0x0F
        if self._format == FORMAT_ALONE and len(b) >= 13 and not _alone_header_ok(b):
            raise LZMAError("Input format not supported by decoder")

    def _find_end(self):
        if self._format == FORMAT_XZ:
            start = max(0, self._searched - 12)
            self._searched = len(self._buf)
            return _xz_stream_end(self._buf, start)
        if self._format == FORMAT_ALONE and len(self._buf) >= 13:
            # A .lzma stream has no footer: try the data so far (whole when it decodes).
            code, out, _ = _run[0](["xz", "-dc", "--format=lzma"], bytes(self._buf))
            if code == 0:
                self._alone = out
                return len(self._buf)
        return None

    def _decode(self, stream):
        if self._format == FORMAT_ALONE:
            return self._alone
        return _filter(["xz", "-dc"], stream, LZMAError)


def _encode_filter_properties(filter):
    raise LZMAError("filter properties are not available in this sandbox")


def _decode_filter_properties(filter_id, encoded_props):
    raise LZMAError("filter properties are not available in this sandbox")


_LZMA = {k: v for k, v in list(globals().items())
         if k.isupper() and not k.startswith("_")}
_LZMA.update({
    "LZMACompressor": LZMACompressor,
    "LZMADecompressor": LZMADecompressor,
    "LZMAError": LZMAError,
    "is_check_supported": is_check_supported,
    "_encode_filter_properties": _encode_filter_properties,
    "_decode_filter_properties": _decode_filter_properties,
})

for _cls in (BZ2Compressor, BZ2Decompressor):
    _cls.__module__ = "_bz2"
for _cls in (LZMAError, LZMACompressor, LZMADecompressor):
    _cls.__module__ = "_lzma"

_install()
