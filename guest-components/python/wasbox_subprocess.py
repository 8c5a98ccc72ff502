"""`subprocess` and `os.system` over the sandbox's process host, for both pythons.

The base image's python3 reaches the host through its `wasbox:sandbox/process` import (the
bindings componentize-py made); the scientific python3 through the same operations sent
through its door (`wasbox_door`). `install(process, err, flush)` takes the one or the
other: `process` the bindings module (or one that behaves as it does), `err` the class its
calls raise, `flush` what flushes the caller's streams before a child writes to them.
"""

import io
import os
import subprocess
import time

process = None
Err = Exception


def _flush():
    pass


def install(bindings, err, flush):
    global process, Err, _flush
    process, Err, _flush = bindings, err, flush
    subprocess.run = _sp_run
    subprocess.call = _sp_call
    subprocess.check_call = _sp_check_call
    subprocess.check_output = _sp_check_output
    subprocess.getstatusoutput = _sp_getstatusoutput
    subprocess.getoutput = lambda cmd: _sp_getstatusoutput(cmd)[1]
    subprocess.Popen = _Popen
    os.system = _os_system


def run_child(argv, data):
    """Runs `argv` with `data` on its stdin, its output captured: (status, stdout, stderr)."""
    return _run_child(argv, False, data, True, "/", None)


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
