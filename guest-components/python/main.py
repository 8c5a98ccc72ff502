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
import wasbox_subprocess
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

wasbox_subprocess.install(process, Err, _flush)
# bz2 and lzma run their codecs in the image's bzip2 and xz (see wasbox_compress).
wasbox_compress.set_runner(wasbox_subprocess.run_child)


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
