"""The wasbox `python3`: CPython (componentize-py) as a command of the image.

The interpreter is initialised when the component is built, so everything that depends on
the run (arguments, environment, working directory) is read here, at the start of `run`.
The standard-library modules imported below are the ones the component carries: only
modules imported at build time exist at run time.
"""

# -- the standard library a script may import (kept in the component) ------------------
# `_bz2` and `_lzma` first, before `bz2`, `lzma`, `shutil` and `tarfile` look for them.
import wasbox_compress  # noqa: E402
import abc, argparse, array, ast, asyncio, base64, binascii, bisect, builtins, bz2, lzma  # noqa: E401,F401
import calendar, cmath, codecs, collections, collections.abc, colorsys, configparser  # noqa: E401,F401
import contextlib, copy, csv, dataclasses, datetime, decimal, difflib, dis, email  # noqa: E401,F401
import email.message, email.utils, enum, errno, fnmatch, fractions, functools, gc  # noqa: E401,F401
import getopt, glob, graphlib, gzip, hashlib, heapq, hmac, html, html.parser, http  # noqa: E401,F401
import http.client, http.cookies, inspect, io, ipaddress, itertools, json, keyword  # noqa: E401,F401
import linecache, locale, logging, logging.handlers, math, mimetypes, numbers, operator  # noqa: E401,F401
import os, os.path, pathlib, pickle, pkgutil, platform, pprint, queue, quopri, random  # noqa: E401,F401
import re, reprlib, runpy, sched, secrets, selectors, shlex, shutil, signal, socket  # noqa: E401,F401
import sqlite3, stat, statistics, string, stringprep, struct, subprocess, sys, tarfile  # noqa: E401,F401
import tempfile, textwrap, threading, time, timeit, token, tokenize, tomllib, traceback  # noqa: E401,F401
import types, typing, unicodedata, unittest, unittest.mock, urllib, urllib.parse  # noqa: E401,F401
import urllib.request, uuid, warnings, weakref, xml, xml.dom.minidom, xml.etree.ElementTree  # noqa: E401,F401
import zipfile, zlib, zoneinfo, json.tool, encodings.idna, encodings.cp437  # noqa: E401,F401
# What HTTP clients installed with pip load (requests, urllib3, httpx's pieces).
import http.cookiejar, netrc, email.parser, email.feedparser, email.policy, email.header  # noqa: E401,F401
import email.headerregistry, urllib.error, urllib.response, contextvars, ipaddress  # noqa: E401,F401
import importlib.readers, importlib._abc  # noqa: E401,F401
import _strptime, doctest, getpass, importlib.resources, pdb, cProfile, profile  # noqa: E401,F401
import concurrent.futures, concurrent.futures.thread  # noqa: E401,F401
import importlib.metadata, importlib.metadata._adapters  # noqa: E401,F401
# What installed packages load their data and plugins with (pytest's assertion rewriting).
import importlib.resources, importlib.resources.abc, importlib.resources.readers  # noqa: E401,F401
import importlib.resources._adapters, importlib.resources._common  # noqa: E401,F401
import importlib.resources._itertools, importlib.resources.simple  # noqa: E401,F401
import importlib.machinery, importlib.util, importlib.abc  # noqa: E401,F401
# What the build backends pip runs for an sdist load (setuptools, flit_core, hatchling).
import email.generator, sysconfig, py_compile, compileall, filecmp, fileinput  # noqa: E401,F401
try:  # wasm has no processes to fork; kept so that the import and cpu_count() work
    import multiprocessing, multiprocessing.pool  # noqa: E401,F401
except ImportError:
    pass
import encodings.latin_1, encodings.ascii, encodings.utf_16, encodings.utf_32  # noqa: E401,F401

import wasbox_http
import wasbox_kernel  # noqa: F401 (`python3 -m wasbox_kernel`, E2B's code interpreter)
import wasbox_pip
import wasbox_sqlite3
from wit_world import exports
from wit_world.imports import environment, process
from wit_world.imports import exit as wasi_exit
from componentize_py_types import Err

VERSION = "Python %d.%d.%d" % sys.version_info[:3]

# http.client and urllib over wasi:http (the host's connections, under the network policy).
wasbox_http.install()


def _flush():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass


def _exit(code):
    _flush()
    if code:
        wasi_exit.exit_with_code(max(1, min(255, code)))


# -- what a wasm sandbox does not have, refused clearly or done without ---------------------

def _no_processes(*args, **kwargs):
    raise OSError(38, "multiprocessing is not available in this sandbox (a wasm process "
                      "cannot fork or start threads); run the work in this process or "
                      "start programs with subprocess")


try:
    multiprocessing.Pool = _no_processes
    multiprocessing.pool.Pool = _no_processes
    multiprocessing.Process.start = _no_processes
    multiprocessing.get_context = _no_processes
    concurrent.futures.ProcessPoolExecutor = _no_processes
except (NameError, AttributeError):
    pass


class _InlineExecutor(concurrent.futures.Executor):
    """`ThreadPoolExecutor` without threads: each call runs when it is submitted, its
    result (or exception) kept in its future, so `map`, `submit` and `as_completed` give
    what they would with threads, one call after another."""

    def __init__(self, max_workers=None, thread_name_prefix="", initializer=None,
                 initargs=()):
        if max_workers is not None and max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        self._shutdown = False
        if initializer is not None:
            initializer(*initargs)

    def submit(self, fn, /, *args, **kwargs):
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:
            future.set_exception(e)
        return future

    def shutdown(self, wait=True, *, cancel_futures=False):
        self._shutdown = True


concurrent.futures.ThreadPoolExecutor = _InlineExecutor
concurrent.futures.thread.ThreadPoolExecutor = _InlineExecutor


class _WaitOnlySelector(selectors.BaseSelector):
    """An event loop selector with nothing to watch: `select(timeout)` sleeps. asyncio
    then runs coroutines, tasks, timers and `asyncio.sleep`; sockets and pipes, which a
    sandbox does not give, are refused when registered."""

    def __init__(self):
        self._map = {}

    def register(self, fileobj, events, data=None):
        raise OSError(38, "asyncio cannot watch files or sockets in this sandbox")

    def unregister(self, fileobj):
        raise KeyError(fileobj)

    def select(self, timeout=None):
        if timeout is None:
            raise RuntimeError("the event loop has nothing to wait for")
        if timeout > 0:
            time.sleep(timeout)
        return []

    def get_map(self):
        return self._map


def _plain_loop():
    loop = asyncio.SelectorEventLoop(_WaitOnlySelector())
    return loop


# The loop's self-pipe (a socket pair) only wakes it from other threads and signals,
# which a sandbox process has none of.
asyncio.selector_events.BaseSelectorEventLoop._make_self_pipe = lambda self: None
asyncio.selector_events.BaseSelectorEventLoop._close_self_pipe = lambda self: None
asyncio.selector_events.BaseSelectorEventLoop._write_to_self = lambda self: None
asyncio.selector_events.BaseSelectorEventLoop._process_self_data = lambda self, data: None


# -- the user and the host, as the sandbox's `id`, `whoami` and `hostname` give them -------
# WASI has no users: `/etc/passwd` and `/etc/group` are the sandbox's own (written by
# wasbox, read-only); the process runs as `$USER` when that names one of its users, else
# as root. `pwd` and `grp` are the standard modules' interface over those files.

class _StructPasswd(tuple):
    n_fields = n_sequence_fields = 7
    _names = ("pw_name", "pw_passwd", "pw_uid", "pw_gid", "pw_gecos", "pw_dir", "pw_shell")

    def __getattr__(self, name):
        try:
            return self[self._names.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def __repr__(self):
        return "pwd.struct_passwd(" + ", ".join(
            f"{n}={v!r}" for n, v in zip(self._names, self)) + ")"


class _StructGroup(tuple):
    n_fields = n_sequence_fields = 4
    _names = ("gr_name", "gr_passwd", "gr_gid", "gr_mem")

    def __getattr__(self, name):
        try:
            return self[self._names.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def __repr__(self):
        return "grp.struct_group(" + ", ".join(
            f"{n}={v!r}" for n, v in zip(self._names, self)) + ")"


def _entries(path, width):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    out = []
    for line in lines:
        parts = line.split(":")
        if len(parts) == width:
            out.append(parts)
    return out


def _getpwall():
    return [_StructPasswd((p[0], p[1], int(p[2]), int(p[3]), p[4], p[5], p[6]))
            for p in _entries("/etc/passwd", 7) if p[2].isdigit() and p[3].isdigit()]


def _getpwuid(uid):
    uid = operator.index(uid)
    for e in _getpwall():
        if e.pw_uid == uid:
            return e
    raise KeyError(f"getpwuid(): uid not found: {uid}")


def _getpwnam(name):
    if not isinstance(name, str):
        raise TypeError(f"getpwnam() argument must be str, not {type(name).__name__}")
    for e in _getpwall():
        if e.pw_name == name:
            return e
    raise KeyError(f"getpwnam(): name not found: {name!r}")


def _getgrall():
    return [_StructGroup((g[0], g[1], int(g[2]), [m for m in g[3].split(",") if m]))
            for g in _entries("/etc/group", 4) if g[2].isdigit()]


def _getgrgid(gid):
    gid = operator.index(gid)
    for e in _getgrall():
        if e.gr_gid == gid:
            return e
    raise KeyError(f"getgrgid(): gid not found: {gid}")


def _getgrnam(name):
    if not isinstance(name, str):
        raise TypeError(f"getgrnam() argument must be str, not {type(name).__name__}")
    for e in _getgrall():
        if e.gr_name == name:
            return e
    raise KeyError(f"getgrnam(): name not found: {name!r}")


def _me():
    want = os.environ.get("USER", "")
    users = _getpwall()
    for e in users:
        if e.pw_name == want:
            return e
    for e in users:
        if e.pw_uid == 0:
            return e
    return _StructPasswd(("root", "x", 0, 0, "root", "/root", "/bin/sh"))


def _module(name, doc, **attrs):
    m = types.ModuleType(name, doc)
    for k, v in attrs.items():
        if callable(v) and not isinstance(v, type):
            v.__module__ = name
            v.__name__ = v.__qualname__ = k
        setattr(m, k, v)
    sys.modules[name] = m
    return m


_module("pwd", "The password database (the sandbox's /etc/passwd).",
        struct_passwd=_StructPasswd, getpwuid=_getpwuid, getpwnam=_getpwnam,
        getpwall=_getpwall)
_module("grp", "The group database (the sandbox's /etc/group).",
        struct_group=_StructGroup, getgrgid=_getgrgid, getgrnam=_getgrnam,
        getgrall=_getgrall)
os.getuid = os.geteuid = lambda: _me().pw_uid
os.getgid = os.getegid = lambda: _me().pw_gid
os.getgroups = lambda: [_me().pw_gid]
os.getlogin = lambda: _me().pw_name
for _n in ("getuid", "geteuid", "getgid", "getegid", "getgroups", "getlogin"):
    getattr(os, _n).__name__ = _n


def chown(path, uid, gid, *, dir_fd=None, follow_symlinks=True):
    """Every file of the sandbox is its user's and WASI has no owners to change: a change of
    owner is accepted and changes nothing (`tarfile` run as root, `shutil.chown`); the file
    must exist."""
    os.stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)


def lchown(path, uid, gid):
    chown(path, uid, gid, follow_symlinks=False)


def fchown(fd, uid, gid):
    os.fstat(fd)


os.chown, os.lchown, os.fchown = chown, lchown, fchown


def _hostname():
    try:
        with open("/etc/hostname", encoding="utf-8") as f:
            name = f.read().strip()
    except OSError:
        name = ""
    return name or "localhost"


socket.gethostname = _hostname
_wasi_uname = os.uname


def _uname():
    u = _wasi_uname()
    return os.uname_result((u.sysname, _hostname(), u.release, u.version, u.machine))


os.uname = _uname


class _Policy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self):
        return _plain_loop()


asyncio.set_event_loop_policy(_Policy())


# -- zoneinfo from the bundled IANA database ------------------------------------------------

def _tzdata_blob():
    """The `tzdata` package's zone files, read when the component is built (the bundle's
    directories are not there at run time) and kept compressed in its memory image."""
    try:
        import tzdata
    except ImportError:
        return None
    root = os.path.join(os.path.dirname(tzdata.__file__), "zoneinfo")
    files = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            path = os.path.join(dirpath, n)
            with open(path, "rb") as f:
                data = f.read()
            if data[:4] == b"TZif":
                files[os.path.relpath(path, root)] = data
    return zlib.compress(pickle.dumps(files), 9) if files else None


_TZ_BLOB = _tzdata_blob()
_tz_files = None


def _zones():
    global _tz_files
    if _tz_files is None:
        _tz_files = pickle.loads(zlib.decompress(_TZ_BLOB)) if _TZ_BLOB else {}
    return _tz_files


def _load_tzdata(key):
    data = _zones().get(key)
    if data is None:
        raise zoneinfo.ZoneInfoNotFoundError(f"No time zone found with key {key}")
    return io.BytesIO(data)


def _available_timezones():
    return {k for k in _zones() if k != "localtime" and not k.startswith(("posix/", "right/"))}


if _TZ_BLOB is not None:
    import zoneinfo._common, zoneinfo._tzpath  # noqa: E401
    zoneinfo._common.load_tzdata = _load_tzdata
    zoneinfo._tzpath.available_timezones = _available_timezones
    zoneinfo.available_timezones = _available_timezones


# -- subprocess and os.system through the process host -----------------------------------

def _drop(*handles):
    """Releases pipe ends and children (their resources close when dropped)."""
    for h in handles:
        if h is not None:
            try:
                h.__exit__(None, None, None)
            except Exception:
                pass


class _DrainTimeout(Exception):
    """The deadline of a drain passed; `partial` is what each pipe gave until then."""

    def __init__(self, partial):
        super().__init__("timed out")
        self.partial = partial


def _drain(*readers, deadline=None):
    """Reads every pipe to its end, whichever has data first, so that a child writing a lot
    to one stream while the other is read cannot block; by `deadline` (a `time.monotonic()`
    value) if given, else raising `_DrainTimeout` with what came (the pipes left open)."""
    bufs = [bytearray() for _ in readers]
    live = list(range(len(readers)))
    while live:
        ends = [readers[j] for j in live]
        if deadline is None:
            got = process.ready(ends)
        else:
            left = deadline - time.monotonic()
            got = process.ready_within(ends, int(left * 1000)) if left > 0 else None
            if got is None:
                raise _DrainTimeout([bytes(b) for b in bufs])
        i = live[got]
        chunk = readers[i].read(65536)
        if chunk:
            bufs[i] += chunk
        else:
            live.remove(i)
            _drop(readers[i])
    return [bytes(b) for b in bufs]


def _wait_until(child, deadline):
    """The child's exit status, or `None` if it is still running at `deadline`."""
    if deadline is None:
        return child.wait()
    return child.wait_timeout(max(0, int((deadline - time.monotonic()) * 1000)))


def _argv_of(args, shell, cwd):
    """The argv a child runs: `sh -c` for a shell command, and a sandbox script (a path
    outside the image's directories) through the shell, which runs it by its #! line."""
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args] if not shell else args
    if shell:
        argv = ["sh", "-c", args if isinstance(args, str) else os.fsdecode(args)]
    else:
        argv = [os.fsdecode(a) for a in args]
    if not argv:
        raise IndexError("list index out of range")
    if "/" in argv[0] and not argv[0].startswith(("/bin/", "/usr/bin/", "/usr/local/bin/")):
        target = os.path.join(os.path.abspath(cwd) if cwd else os.getcwd(), argv[0])
        if not os.path.exists(target):
            raise FileNotFoundError(2, "No such file or directory", argv[0])
        if os.path.isdir(target):
            raise PermissionError(13, "Permission denied", argv[0])
        argv = ["sh", "-c", '"$0" "$@"'] + argv
    return argv


def _spawn(argv, env, cwd, stdin, stdout, stderr):
    environ = env if env is not None else os.environ
    _flush()
    try:
        return process.spawn(process.Command(
            argv=argv,
            env=[(os.fsdecode(k), os.fsdecode(v)) for k, v in environ.items()],
            cwd=os.path.abspath(cwd) if cwd else os.getcwd(),
            stdin=stdin, stdout=stdout, stderr=stderr))
    except Err as e:
        err = e.value
        msg = getattr(err, "value", "cannot run")
        if isinstance(err, process.Error_NotFound):
            raise FileNotFoundError(2, "No such file or directory", argv[0]) from None
        raise OSError(msg) from None


def _run_child(args, shell, stdin_data, capture, cwd, env, timeout=None):
    """Runs a child to its end: (status, stdout, stderr). With `timeout` (seconds), a child
    still running then is killed and `subprocess.TimeoutExpired` raised, with the output
    it gave."""
    deadline = None if timeout is None else time.monotonic() + timeout
    argv = _argv_of(args, shell, cwd)
    # The child's pipe ends go to it with the spawn; this process keeps the other ends.
    in_w = out_r = err_r = None
    if stdin_data is not None:
        in_r, in_w = process.pipe()
        stdin = process.Stdio_PipeReader(in_r)
    else:
        stdin = process.Stdio_Inherit()
    if capture:
        out_r, out_w = process.pipe()
        err_r, err_w = process.pipe()
        stdout, stderr = process.Stdio_PipeWriter(out_w), process.Stdio_PipeWriter(err_w)
    else:
        stdout, stderr = process.Stdio_Inherit(), process.Stdio_Inherit()
    try:
        child = _spawn(argv, env, cwd, stdin, stdout, stderr)
    except BaseException:
        _drop(in_w, out_r, err_r)
        raise
    if in_w is not None:
        data = stdin_data.encode() if isinstance(stdin_data, str) else bytes(stdin_data)
        try:
            in_w.write(data)
        except Err:
            pass
        _drop(in_w)
    out = err = b""
    try:
        if capture:
            out, err = _drain(out_r, err_r, deadline=deadline)
        code = _wait_until(child, deadline)
    except _DrainTimeout as e:
        out, err = e.partial
        code = None
    if code is None:
        child.kill(9)
        child.wait()
        _drop(child, out_r, err_r)
        raise subprocess.TimeoutExpired(args, timeout, output=out if capture else None,
                                        stderr=err if capture else None)
    _drop(child)
    return code, out, err


class _PipeIO(io.RawIOBase):
    """One end of a pipe to a child, as a raw file (Popen's stdin, stdout, stderr)."""

    def __init__(self, handle, writing):
        super().__init__()
        self._h = handle
        self._writing = writing

    def readable(self):
        return not self._writing

    def writable(self):
        return self._writing

    def readinto(self, b):
        if self._h is None:
            return 0
        try:
            data = self._h.read(min(len(b), 65536))
        except Err:
            return 0
        n = len(data)
        b[:n] = data
        return n

    def write(self, b):
        try:
            self._h.write(bytes(b))
        except Err:
            raise BrokenPipeError(32, "Broken pipe") from None
        return len(b)

    def close(self):
        if self._h is not None:
            _drop(self._h)
            self._h = None
        super().close()


def _text(stream, encoding, errors, writing):
    if writing:
        return io.TextIOWrapper(stream, encoding or "utf-8", errors or "strict",
                                write_through=True, line_buffering=True)
    return io.TextIOWrapper(stream, encoding or "utf-8", errors or "strict")


class _Popen:
    """subprocess.Popen over the sandbox's processes: PIPE, DEVNULL, STDOUT, inherited
    streams and file objects (fed from or written to through a pipe); communicate, wait
    (with a timeout), poll, kill, terminate, send_signal, and use as a context manager."""

    def __init__(self, args, bufsize=-1, executable=None, stdin=None, stdout=None,
                 stderr=None, preexec_fn=None, close_fds=True, shell=False, cwd=None,
                 env=None, universal_newlines=None, startupinfo=None, creationflags=0,
                 restore_signals=True, start_new_session=False, pass_fds=(), *,
                 encoding=None, errors=None, text=None, **_ignored):
        self.args = args
        self.returncode = None
        self.stdin = self.stdout = self.stderr = None
        self._child = None
        self._signalled = False  # send_signal was called
        self._copy_out = []  # (pipe reader, file object) to copy at the end
        self.text_mode = bool(text or universal_newlines or encoding or errors)
        self._encoding, self._errors = encoding, errors
        argv = _argv_of(args, shell, cwd)
        if executable:
            argv[0] = os.fsdecode(executable)
        keep = []  # this process's ends, released if the spawn fails
        feed = None

        def reader_for(spec):
            nonlocal feed
            if spec is None:
                return process.Stdio_Inherit(), None
            if spec == subprocess.DEVNULL:
                return process.Stdio_Null(), None
            r, w = process.pipe()
            keep.append(w)
            if spec == subprocess.PIPE:
                return process.Stdio_PipeReader(r), w
            # A file object or descriptor: its contents go to the child through the pipe.
            data = spec.read() if hasattr(spec, "read") else os.read(spec, 1 << 30)
            feed = (w, data.encode() if isinstance(data, str) else data)
            return process.Stdio_PipeReader(r), None

        def writer_for(spec):
            if spec is None:
                return process.Stdio_Inherit(), None
            if spec == subprocess.DEVNULL:
                return process.Stdio_Null(), None
            r, w = process.pipe()
            keep.append(r)
            if spec == subprocess.PIPE:
                return process.Stdio_PipeWriter(w), r
            self._copy_out.append((r, spec))
            return process.Stdio_PipeWriter(w), None

        in_stdio, in_w = reader_for(stdin)
        out_stdio, out_r = writer_for(stdout)
        if stderr == subprocess.STDOUT:
            if stdout is None:
                err_stdio, err_r = process.Stdio_InheritStdout(), None
            elif stdout == subprocess.DEVNULL:
                err_stdio, err_r = process.Stdio_Null(), None
            else:
                # The same pipe as stdout: the child's two streams interleave as written.
                err_stdio, err_r = process.Stdio_PipeWriter(out_stdio.value.dup()), None
        else:
            err_stdio, err_r = writer_for(stderr)
        try:
            self._child = _spawn(argv, env, cwd, in_stdio, out_stdio, err_stdio)
        except BaseException:
            _drop(*keep)
            raise
        self.pid = self._child.id()
        if feed is not None:
            w, data = feed
            try:
                w.write(data)
            except Err:
                pass
            _drop(w)
        if in_w is not None:
            raw = _PipeIO(in_w, True)
            buffered = io.BufferedWriter(raw) if bufsize != 0 else raw
            self.stdin = _text(buffered, encoding, errors, True) if self.text_mode else buffered
        for name, r in (("stdout", out_r), ("stderr", err_r)):
            if r is not None:
                buffered = io.BufferedReader(_PipeIO(r, False))
                setattr(self, name, _text(buffered, encoding, errors, False)
                        if self.text_mode else buffered)

    def __repr__(self):
        return f"<Popen: returncode: {self.returncode} args: {self.args!r}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        if self.stdin is not None:
            try:
                self.stdin.close()
            except OSError:
                pass
        self.wait()

    def _finish_copies(self):
        for r, f in self._copy_out:
            data = b"".join(iter(lambda: _read_or_empty(r), b""))
            _drop(r)
            if hasattr(f, "write"):
                try:
                    f.write(data)
                except TypeError:
                    f.write(data.decode(self._encoding or "utf-8", self._errors or "strict"))
                if hasattr(f, "flush"):
                    f.flush()
            else:
                os.write(f, data)
        self._copy_out = []

    def poll(self):
        if self.returncode is None and self._child is not None:
            code = self._child.wait_timeout(0)
            if code is not None:
                self._finish_copies()
                self._set(code)
        return self.returncode

    def _set(self, code):
        # A child ended by a signal reads as -signal, as on Linux.
        self.returncode = -(code - 128) if 128 < code < 160 and self._signalled else code
        _drop(self._child)
        self._child = None

    def wait(self, timeout=None):
        if self.returncode is not None:
            return self.returncode
        self._finish_copies()
        if timeout is None:
            self._set(self._child.wait())
        else:
            code = self._child.wait_timeout(max(0, int(timeout * 1000)))
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._set(code)
        return self.returncode

    def communicate(self, input=None, timeout=None):
        if self.stdin is not None:
            if input:
                try:
                    self.stdin.write(input)
                except BrokenPipeError:
                    pass
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass
        elif input:
            raise ValueError("stdin was not set to PIPE; cannot send input")
        readers = [f for f in (self.stdout, self.stderr) if f is not None]
        raw = [f.buffer.raw if self.text_mode else f.raw for f in readers]
        handles = [r._h for r in raw]
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            data = _drain(*handles, deadline=deadline) if handles else []
        except _DrainTimeout as e:
            # The pipes stay open: a later communicate() (after kill(), say) reads on,
            # after what came so far.
            before = getattr(self, "_partial", None) or [b""] * len(e.partial)
            self._partial = [p + q for p, q in zip(before, e.partial)]
            raise subprocess.TimeoutExpired(self.args, timeout) from None
        if getattr(self, "_partial", None):
            data = [p + q for p, q in zip(self._partial, data)]
            self._partial = None
        for r in raw:
            r._h = None
        got = dict(zip([id(f) for f in readers], data))
        out = got.get(id(self.stdout)) if self.stdout is not None else None
        err = got.get(id(self.stderr)) if self.stderr is not None else None
        for f in readers:
            f.close()
        if self.text_mode:
            dec = lambda b: None if b is None else io.TextIOWrapper(  # noqa: E731
                io.BytesIO(b), self._encoding or "utf-8", self._errors or "strict").read()
            out, err = dec(out), dec(err)
        self.wait(timeout)
        return out, err

    def send_signal(self, sig):
        if self.returncode is None and self._child is not None:
            self._signalled = True
            self._child.kill(int(sig))

    def terminate(self):
        self.send_signal(15)

    def kill(self):
        self.send_signal(9)


def _read_or_empty(r):
    try:
        return r.read(65536)
    except Err:
        return b""


def _sp_run(args, *, stdin=None, input=None, stdout=None, stderr=None, capture_output=False,
            shell=False, cwd=None, timeout=None, check=False, encoding=None, errors=None,
            text=None, env=None, universal_newlines=None, **_ignored):
    capture = capture_output or stdout == subprocess.PIPE or stderr == subprocess.PIPE
    code, out, err = _run_child(args, shell, input, capture, cwd, env, timeout)
    if text or universal_newlines or encoding:
        out, err = out.decode(encoding or "utf-8", errors or "strict"), err.decode(
            encoding or "utf-8", errors or "strict")
    if stderr == subprocess.STDOUT:
        out, err = out + err, None
    if not capture:
        out = err = None
    cp = subprocess.CompletedProcess(args, code, out, err)
    if check and code:
        raise subprocess.CalledProcessError(code, args, out, err)
    return cp


def _sp_call(args, **kw):
    return _sp_run(args, **kw).returncode


def _sp_check_call(args, **kw):
    return _sp_run(args, check=True, **kw).returncode


def _sp_check_output(args, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    return _sp_run(args, check=True, **kw).stdout


def _sp_getstatusoutput(cmd):
    cp = _sp_run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = cp.stdout[:-1] if cp.stdout.endswith("\n") else cp.stdout
    return cp.returncode, out


def _os_system(cmd):
    code, _, _ = _run_child(cmd, True, None, False, None, None)
    return code << 8


subprocess.run = _sp_run
subprocess.call = _sp_call
subprocess.check_call = _sp_check_call
subprocess.check_output = _sp_check_output
subprocess.getstatusoutput = _sp_getstatusoutput
subprocess.getoutput = lambda cmd: _sp_getstatusoutput(cmd)[1]
subprocess.Popen = _Popen

# bz2 and lzma run their codecs in the image's bzip2 and xz (see wasbox_compress).
wasbox_compress.set_runner(lambda argv, data: _run_child(argv, False, data, True, "/", None))
os.system = _os_system

def _chmod(path, mode, *, dir_fd=None, follow_symlinks=True):
    """WASI has no file modes; the host keeps them (what `ls -l`, `test -x` and running
    `./script` see)."""
    if isinstance(path, int):
        raise OSError(38, "Function not implemented", path)
    target = os.path.abspath(os.fsdecode(path))
    try:
        process.set_file_mode(target, mode & 0o7777)
    except Err as e:
        err = e.value
        if isinstance(err, process.Error_NotFound):
            raise FileNotFoundError(2, "No such file or directory", os.fsdecode(path))
        raise PermissionError(1, getattr(err, "value", "Operation not permitted"),
                              os.fsdecode(path))


os.chmod = _chmod

_real_stat, _real_lstat = os.stat, os.lstat
_STAT_EXTRA = ("st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns", "st_ctime_ns",
               "st_blksize", "st_blocks", "st_rdev")


def _with_mode(st, path, follow):
    """`st` with the permission bits the host keeps (WASI reports none), so that
    `stat.S_IMODE`, `os.access`-style checks and `shutil.copymode` see real modes."""
    if isinstance(path, int) or (not follow and stat.S_ISLNK(st.st_mode)):
        return st
    try:
        mode = process.file_mode(os.path.abspath(os.fsdecode(path)))
    except Exception:
        return st
    if mode is None:
        return st
    fields = list(st)
    fields[0] = (st.st_mode & ~0o7777) | (mode & 0o7777)
    extra = {k: getattr(st, k) for k in _STAT_EXTRA if hasattr(st, k)}
    return os.stat_result(fields, extra)


def _os_stat(path, *, dir_fd=None, follow_symlinks=True):
    st = _real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    return st if dir_fd is not None else _with_mode(st, path, follow_symlinks)


def _os_lstat(path, *, dir_fd=None):
    st = _real_lstat(path, dir_fd=dir_fd)
    return st if dir_fd is not None else _with_mode(st, path, False)


os.stat, os.lstat = _os_stat, _os_lstat

_umask = [0o022]


def _os_umask(mask):
    """WASI has no umask: the mask is kept (the next call returns it, as POSIX says) and
    new files get the sandbox's usual modes."""
    old = _umask[0]
    _umask[0] = mask & 0o777
    return old


if not hasattr(os, "umask"):
    os.umask = _os_umask


# -- the command line ----------------------------------------------------------------------

USAGE = "usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ..."


# A wasm process has no dup(2): pytest's default capture of fds 1 and 2 and its
# faulthandler plugin need it. Capturing sys.stdout/sys.stderr works; the user's own
# PYTEST_ADDOPTS come after these and win.
PYTEST_DEFAULTS = "-p no:faulthandler --capture=sys"


def _setup():
    os.environ.clear()
    os.environ.update(dict(environment.get_environment()))
    os.environ["PYTEST_ADDOPTS"] = (
        PYTEST_DEFAULTS + " " + os.environ.get("PYTEST_ADDOPTS", "")).strip()
    cwd = environment.initial_cwd() or os.environ.get("PWD")
    if cwd:
        try:
            os.chdir(cwd)
        except OSError:
            pass
    return environment.get_arguments()


def _paths(flags, argv0=""):
    """`sys.path` as CPython makes it from the environment: `PYTHONPATH` before the
    standard library (unless -E or -I), then the site-packages of the virtual environment
    the program was started from (`.venv/bin/python`, or found on PATH), or else the user
    site (unless -s, -I or PYTHONNOUSERSITE), each with its `.pth` files: where
    `pip install` puts packages."""
    isolated = "-I" in flags
    if not isolated and "-E" not in flags:
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
        sys.path[0:0] = [os.path.abspath(p) for p in extra]
    venv = wasbox_pip.find_venv(argv0)
    wasbox_pip.VENV[0] = venv
    if venv:
        sys.prefix = sys.exec_prefix = venv
        wasbox_pip.add_site_dir(wasbox_pip.venv_site(venv))
        return
    if not (isolated or "-s" in flags or os.environ.get("PYTHONNOUSERSITE")):
        wasbox_pip.add_site_dir(wasbox_pip.user_site())


def _main(argv):
    args = argv[1:]
    # The path it was started by when that was a symlink to it (a venv's bin/python): the
    # shell passes it as PYTHONEXECUTABLE, read once and not passed on.
    argv0 = os.environ.pop("PYTHONEXECUTABLE", "") or (argv[0] if argv else "")
    if os.path.basename(argv0) == "sqlite3":
        return wasbox_sqlite3.main(args)
    if os.path.basename(argv0) in ("pip", "pip3", "pip" + wasbox_pip.PY):
        _paths((), argv0)
        return wasbox_pip.main(args)
    flags = set()
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-c", "-m"):
            _paths(flags, argv0)
            if i + 1 >= len(args):
                print("Argument expected for the %s option" % a, file=sys.stderr)
                print(USAGE, file=sys.stderr)
                return 2
            rest = args[i + 2:]
            if a == "-c":
                sys.argv = ["-c"] + rest
                sys.path.insert(0, "")
                _exec_main(compile(args[i + 1], "<string>", "exec"))
            else:
                name = args[i + 1]
                if name == "pip":
                    return wasbox_pip.main(rest)
                if name == "venv":
                    return wasbox_pip.create_venv(rest)
                sys.argv = [name] + rest
                sys.path.insert(0, os.getcwd())
                mod = sys.modules.get(name)
                if mod is None:
                    # A module of the workspace: run its source as __main__.
                    runpy.run_module(name, run_name="__main__", alter_sys=True)
                    return 0
                # A module the component carries (its source is not): run its main().
                if name == "unittest":
                    unittest.main(module=None)
                    return 0
                entry = getattr(mod, "main", None) or getattr(mod, "_main", None)
                if not callable(entry):
                    print("python3: No code object available for %s" % name, file=sys.stderr)
                    return 1
                entry()
            return 0
        if a in ("-V", "--version"):
            print(VERSION)
            return 0
        if a in ("-h", "--help"):
            print(USAGE)
            return 0
        if a == "-":
            i += 1
            break
        if a == "--":
            i += 1
            break
        if a.startswith("-") and len(a) > 1:
            if a in ("-W", "-X"):
                i += 2
                continue
            flags.update("-" + c for c in a[1:])
            i += 1
            continue
        break
    _paths(flags, argv0)
    rest = args[i:]
    if rest and (i == 0 or args[i - 1] != "-"):
        path = rest[0]
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            print("python3: can't open file %r: [Errno %d] %s" % (
                os.path.abspath(path), e.errno or 2, e.strerror or "No such file or directory"),
                file=sys.stderr)
            return 2
        sys.argv = rest
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        _exec_main(compile(source, path, "exec"), path)
        return 0
    source = sys.stdin.read()
    sys.argv = ["-"] + rest if rest or (i and args[i - 1] == "-") else [""]
    sys.path.insert(0, "")
    _exec_main(compile(source, "<stdin>", "exec"))
    return 0


def _exec_main(code, path=None):
    """Runs a script as the module `__main__` (so that `unittest.main()`, `doctest.testmod()`
    and pickle find what it defines), as CPython does."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    if path is not None:
        module.__dict__["__file__"] = path
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def _exit_code(e):
    c = e.code
    if c is None:
        return 0
    if isinstance(c, int):
        return c & 0xff
    print(c, file=sys.stderr)
    return 1


class _WholeWrites(io.RawIOBase):
    """fd 1 or 2, whose `write` writes everything. The interpreter's stdio is unbuffered
    here (a FileIO under the TextIOWrapper), and a TextIOWrapper drops whatever a short
    write leaves: a single `print` of more than the host takes at once lost its tail."""

    def __init__(self, fd):
        super().__init__()
        self._fd = fd

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        try:
            return os.isatty(self._fd)
        except OSError:
            return False

    def write(self, b):
        view = memoryview(b).cast("B")
        done = 0
        while done < len(view):
            done += os.write(self._fd, view[done:])
        return done


def _whole_stdio():
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if old is None:
            continue
        new = io.TextIOWrapper(_WholeWrites(fd), encoding=old.encoding, errors=old.errors,
                               line_buffering=old.line_buffering, write_through=True)
        setattr(sys, name, new)
        setattr(sys, "__%s__" % name, new)


class Run(exports.Run):
    def run(self) -> None:
        try:
            _whole_stdio()
            argv = _setup()
            code = _main(argv)
        except SystemExit as e:
            code = _exit_code(e)
        except KeyboardInterrupt:
            code = 130
        except BaseException as e:
            # The script's frames only, as CPython shows them.
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                tb = tb.tb_next
            traceback.print_exception(type(e), e, tb)
            code = 1
        _exit(code)
