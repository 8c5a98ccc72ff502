"""A stateful Python kernel for E2B's code interpreter (`python3 -m wasbox_kernel`).

The server starts one per code context and writes one request per line to its stdin:
`{"code": ..., "env_vars": {...}}`. The kernel runs the code in the context's namespace, as
a Jupyter cell runs: the value of a last expression is the cell's main result (its `repr`,
and the rich forms its `_repr_*_` methods give, such as a DataFrame's HTML), `display(x)`
adds results, `!cmd`, `%pip`, `%cd`, `%env` and `%%bash` work as in IPython, and an
exception is an error with its name, value and traceback. Everything it says goes to its
stdout as event lines that start with U+001E; output of a program it started (`os.system`,
`subprocess` without capture) arrives as plain lines, which the server reports as stdout.
A cell ends with an `end_of_execution` event. Reading stdin raises, as in Jupyter.
"""

import ast
import base64
import builtins
import io
import json
import os
import subprocess
import sys
import time
import traceback

MARK = "\x1e"
CELL = "<cell>"
_real_stdout = None  # the process's stdout, where events go (set in main)
_execution_count = 0


def _emit(event):
    _real_stdout.write(MARK + json.dumps(event) + "\n")
    _real_stdout.flush()


class _Stream(io.TextIOBase):
    """The cell's `sys.stdout` or `sys.stderr`: what is written becomes events, a line at
    a time (and the rest when the cell ends)."""

    def __init__(self, name):
        self.name = name
        self._pending = ""

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self._pending += s
        if "\n" in self._pending:
            cut = self._pending.rindex("\n") + 1
            text, self._pending = self._pending[:cut], self._pending[cut:]
            _emit({"type": self.name, "text": text, "timestamp": time.time_ns()})
        return len(s)

    def flush(self):
        if self._pending:
            text, self._pending = self._pending, ""
            _emit({"type": self.name, "text": text, "timestamp": time.time_ns()})


class StdinNotImplementedError(RuntimeError):
    """Raised when code asks for input: a code interpreter's cell has none."""


def _no_input(prompt=""):
    raise StdinNotImplementedError("raw_input was called, but this frontend does not support "
                                   "input requests.")


# -- results -----------------------------------------------------------------------------

_FORMS = (
    ("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
    ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("pdf", "_repr_pdf_"),
    ("latex", "_repr_latex_"), ("json", "_repr_json_"), ("javascript", "_repr_javascript_"),
)


def _result(value, main):
    """A result event for `value`: its text and every rich form it offers."""
    event = {"type": "result", "is_main_result": main}
    mimebundle = getattr(value, "_repr_mimebundle_", None)
    if callable(mimebundle) and not isinstance(value, type):
        try:
            bundle = mimebundle() or {}
            if isinstance(bundle, tuple):
                bundle = bundle[0]
            for mime, key in (("text/html", "html"), ("text/markdown", "markdown"),
                              ("image/svg+xml", "svg"), ("image/png", "png"),
                              ("image/jpeg", "jpeg"), ("text/latex", "latex"),
                              ("application/json", "json")):
                if mime in bundle:
                    event[key] = bundle[mime]
        except Exception:  # noqa: BLE001 (a broken formatter only loses its form)
            pass
    for key, method in _FORMS:
        fn = getattr(value, method, None)
        if key in event or not callable(fn) or isinstance(value, type):
            continue
        try:
            form = fn()
        except Exception:  # noqa: BLE001
            continue
        if form is None:
            continue
        if isinstance(form, tuple):
            form = form[0]
        if isinstance(form, (bytes, bytearray)):
            form = base64.b64encode(form).decode("ascii")
        event[key] = form
    event["text"] = repr(value)
    return event


# -- matplotlib, as Jupyter's inline backend shows it ------------------------------------

def _figure_result(figure):
    """A result event for a matplotlib figure: its PNG and its text, as Jupyter's."""
    buf = io.BytesIO()
    figure.savefig(buf, format="png", bbox_inches="tight")
    return {"type": "result", "is_main_result": False, "text": repr(figure),
            "png": base64.b64encode(buf.getvalue()).decode("ascii")}


def _show_figures(*args, **kwargs):
    """`plt.show()`: every open figure a result of the cell, then closed (Jupyter's inline
    backend); also what ends each cell that left figures open."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            _emit(_figure_result(figure))
        finally:
            pyplot.close(figure)


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


def _inline_show(pyplot):
    pyplot.show = _show_figures


class _PyplotHook:
    """Gives `matplotlib.pyplot.show` the inline behaviour when pyplot is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None and spec.loader is not None:
                spec.loader = _Then(spec.loader, _inline_show)
                return spec
        return None


def display(*objs, **kwargs):
    """IPython's `display`: each object as a result of the cell (not its main one)."""
    for obj in objs:
        sys.stdout.flush()
        _emit(_result(obj, False))


# -- IPython's shell syntax ---------------------------------------------------------------

def _system(command):
    """`!command`: runs it in `sh`, its output the cell's."""
    sys.stdout.flush()
    sys.stderr.flush()
    done = subprocess.run(["sh", "-c", command], capture_output=True)
    if done.stdout:
        sys.stdout.write(done.stdout.decode("utf-8", "replace"))
    if done.stderr:
        sys.stderr.write(done.stderr.decode("utf-8", "replace"))
    return done.returncode


def _magic(line):
    """A line magic: `%pip`, `%cd`, `%env`, `%pwd`."""
    name, _, rest = line.partition(" ")
    rest = rest.strip()
    if name == "pip":
        _system("pip " + rest)
    elif name == "cd":
        os.chdir(os.path.expanduser(rest or "~"))
        print(os.getcwd())
    elif name == "pwd":
        return os.getcwd()
    elif name == "env":
        if not rest:
            return dict(os.environ)
        key, sep, value = rest.replace("=", " ", 1).partition(" ")
        if sep:
            os.environ[key] = value.strip()
        else:
            return os.environ.get(key)
    else:
        raise NameError("UsageError: Line magic function `%%%s` not found." % name)
    return None


def _transform(code):
    """IPython's shell and magic lines as Python: `!cmd`, `%magic args`, `%%bash` cells."""
    stripped = code.lstrip()
    if stripped.startswith(("%%bash", "%%sh")):
        body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        return "_wasbox_system(%r)" % body
    lines = []
    for line in code.split("\n"):
        s = line.lstrip()
        indent = line[:len(line) - len(s)]
        if s.startswith("!"):
            lines.append("%s_wasbox_system(%r)" % (indent, s[1:]))
        elif s.startswith("%") and not s.startswith("%%"):
            lines.append("%s_wasbox_magic(%r)" % (indent, s[1:]))
        else:
            lines.append(line)
    return "\n".join(lines)


# -- running a cell -----------------------------------------------------------------------

_namespace = {"__name__": "__main__", "__builtins__": builtins, "display": display,
              "_wasbox_system": _system, "_wasbox_magic": _magic}
_loop = None


def _run_code(code_obj):
    value = eval(code_obj, _namespace)
    if code_obj.co_flags & 0x80 and value is not None:  # CO_COROUTINE: a top-level await
        global _loop
        import asyncio
        if _loop is None:
            _loop = asyncio.new_event_loop()
        value = _loop.run_until_complete(value)
    return value


def _error(e):
    tb = e.__traceback__
    # The kernel's own frames are not the cell's.
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(e), e, tb))
    _emit({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": text})


def run_cell(code, env_vars):
    global _execution_count
    _execution_count += 1
    saved = {}
    for key, value in (env_vars or {}).items():
        saved[key] = os.environ.get(key)
        os.environ[key] = str(value)
    out, err = _Stream("stdout"), _Stream("stderr")
    real_stderr = sys.stderr
    sys.stdout, sys.stderr = out, err
    sys.stdin = io.StringIO("")
    try:
        flags = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = ast.parse(_transform(code), CELL, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        _run_code(compile(tree, CELL, "exec", flags=flags))
        if last is not None:
            value = _run_code(compile(last, CELL, "eval", flags=flags))
            if value is not None:
                _namespace["_"] = value
                out.flush()
                err.flush()
                _emit(_result(value, True))
    except SystemExit as e:
        if e.code not in (None, 0):
            _error(e)
    except BaseException as e:  # noqa: BLE001 (KeyboardInterrupt included: it is the cell's)
        out.flush()
        err.flush()
        _error(e)
    finally:
        try:
            _show_figures()
        except Exception as e:  # noqa: BLE001 (a figure that cannot be drawn is the cell's)
            _error(e)
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = _real_stdout, real_stderr
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    # The end of this run's stderr (the server waits for it, not for a pause): whatever the
    # run and its children wrote there came before.
    sys.stderr.flush()
    os.write(2, b"\x1e\n")
    _emit({"type": "number_of_executions", "execution_count": _execution_count})


def main():
    global _real_stdout
    _real_stdout = sys.stdout
    builtins.input = _no_input
    # Figures are drawn off screen and shown as results (see `_show_figures`).
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.meta_path.insert(0, _PyplotHook())
    # Requests come on the real stdin; the cell's is empty.
    requests = sys.stdin
    while True:
        line = requests.readline()
        if not line:
            return
        try:
            request = json.loads(line)
            code = request["code"]
            env = request.get("env_vars") or {}
        except (ValueError, KeyError, TypeError) as e:
            _emit({"type": "error", "name": "BadRequest", "value": str(e), "traceback": ""})
        else:
            run_cell(code, env)
        _emit({"type": "end_of_execution"})


if __name__ == "__main__":
    main()
