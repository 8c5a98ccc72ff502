"""E2B's code interpreter SDK (`e2b-code-interpreter`), unchanged, against `wasbox serve`.

Run by tests/all/e2b.rs with the SDK on PYTHONPATH and E2B_API_URL, E2B_SANDBOX_URL and
E2B_API_KEY pointing at the server. Prints one line per check and "all passed" at the end;
the first failure raises.
"""

import asyncio
import os
import threading
import time

from e2b import SandboxException, TimeoutException
from e2b_code_interpreter import AsyncSandbox, Sandbox


def check(name, cond, detail=""):
    if not cond:
        raise AssertionError("%s: %s" % (name, detail))
    print("ok", name)


sbx = Sandbox.create()
try:
    # State between runs, the last expression's value, the execution count.
    first = sbx.run_code("x = 20\ny = x + 1\ny * 2")
    check("value", first.text == "42", first)
    check("no error", first.error is None, first.error)
    again = sbx.run_code("y")
    check("state kept", again.text == "21", again)
    check("execution count", again.execution_count == first.execution_count + 1, again)
    check("no value for a statement", sbx.run_code("z = 1").text is None)

    # Output, streamed to the callbacks as it comes and kept in the logs.
    seen = []
    out = sbx.run_code(
        "import sys, time\nprint('one')\ntime.sleep(0.05)\nprint('two', file=sys.stderr)\n"
        "print('three')",
        on_stdout=lambda m: seen.append(("out", m.line)),
        on_stderr=lambda m: seen.append(("err", m.line)),
    )
    check("stdout", out.logs.stdout == ["one\n", "three\n"], out.logs)
    check("stderr", out.logs.stderr == ["two\n"], out.logs)
    check("callbacks in order", seen == [("out", "one\n"), ("err", "two\n"), ("out", "three\n")],
          seen)
    child = sbx.run_code("import os\nos.system('echo from a child')")
    check("a child's output", "from a child\n" in "".join(child.logs.stdout), child.logs)
    bang = sbx.run_code("!echo shell $((6 * 7))")
    check("shell escape", bang.logs.stdout == ["shell 42\n"], bang.logs)

    # Errors: name, value, traceback; the context goes on.
    bad = sbx.run_code("def f():\n    return 1 / 0\nf()")
    check("error name", bad.error is not None and bad.error.name == "ZeroDivisionError", bad)
    check("error value", bad.error.value == "division by zero", bad.error)
    check("traceback", "line 2, in f" in bad.error.traceback, bad.error.traceback)
    syntax = sbx.run_code("def (")
    check("syntax error", syntax.error.name == "SyntaxError", syntax.error)
    check("usable after errors", sbx.run_code("x + 1").text == "21")
    no_input = sbx.run_code("input()")
    check("no stdin", no_input.error.name == "StdinNotImplementedError", no_input.error)

    # Rich results: `_repr_html_` and `display`.
    html = sbx.run_code(
        "class T:\n    def _repr_html_(self):\n        return '<table><tr><td>1</td></tr></table>'\n"
        "    def __repr__(self):\n        return 'T()'\nT()")
    main = html.results[0]
    check("html result", main.html.startswith("<table>") and main.text == "T()", main)
    check("main result", main.is_main_result, main)
    shown = sbx.run_code("display(T())\ndisplay(T())\n7")
    check("display", [r.is_main_result for r in shown.results] == [False, False, True], shown)

    # Environment of one run.
    env = sbx.run_code("import os\nos.environ.get('RUN_VAR')", envs={"RUN_VAR": "set"})
    check("envs", env.text == "'set'", env)
    check("envs end with the run", sbx.run_code("os.environ.get('RUN_VAR')").text is None)

    # Files written through envd are the kernel's.
    sbx.files.write("/home/user/data.csv", "name,n\na,1\nb,2\nc,3\n")
    csv = sbx.run_code("import csv\nsum(int(r['n']) for r in csv.DictReader(open('data.csv')))")
    check("files", csv.text == "6", csv)

    # Contexts: their own state and directory, side by side.
    ctx = sbx.create_code_context(cwd="/tmp")
    check("context cwd", sbx.run_code("import os; os.getcwd()", context=ctx).text == "'/tmp'")
    check("context state", sbx.run_code("'y' in dir()", context=ctx).text == "False")
    contexts = [sbx.create_code_context() for _ in range(10)]
    answers = [None] * len(contexts)

    def work(i):
        sbx.run_code("v = %d" % i, context=contexts[i])
        time.sleep(0.05)
        answers[i] = sbx.run_code("v * 10", context=contexts[i]).text

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(contexts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("10 contexts at once", answers == [str(i * 10) for i in range(10)], answers)
    listed = {c.id for c in sbx.list_code_contexts()}
    check("list", ctx.id in listed and all(c.id in listed for c in contexts), listed)
    sbx.restart_code_context(ctx)
    after = sbx.run_code("'v' in dir()", context=contexts[0])
    check("restart leaves others", after.text == "True", after)
    sbx.run_code("w = 1", context=ctx)
    sbx.restart_code_context(ctx)
    check("restart clears", sbx.run_code("'w' in dir()", context=ctx).text == "False")
    for c in contexts:
        sbx.remove_code_context(c)
    check("remove", not any(c.id == contexts[0].id for c in sbx.list_code_contexts()))
    try:
        sbx.run_code("1", context=contexts[0])
        check("removed context refused", False)
    except Exception as e:  # noqa: BLE001 (NotFoundException)
        check("removed context refused", "not found" in str(e).lower(), e)

    # Bash, with its state.
    b1 = sbx.run_code("cd /tmp && GREETING=hi; echo $GREETING", language="bash")
    check("bash", b1.logs.stdout == ["hi\n"] and b1.error is None, b1)
    b2 = sbx.run_code("echo $GREETING $(pwd); ls /nonexistent", language="bash")
    check("bash state", b2.logs.stdout == ["hi /tmp\n"], b2.logs)
    check("bash error", b2.error is not None and b2.error.value != "0", b2.error)
    check("bash stderr", "nonexistent" in "".join(b2.logs.stderr), b2.logs)
    try:
        sbx.run_code("1", language="cobol")
        check("unknown language refused", False)
    except SandboxException as e:
        check("unknown language refused", "cobol" in str(e), e)

    # A run past its timeout is interrupted; the context takes the next run.
    started = time.time()
    try:
        sbx.run_code("while True:\n    pass", timeout=2)
        check("timeout", False)
    except TimeoutException:
        check("timeout", time.time() - started < 10)
    check("usable after a timeout", sbx.run_code("1 + 1").text == "2")
finally:
    sbx.kill()


async def async_check():
    a = await AsyncSandbox.create()
    try:
        lines = []
        e = await a.run_code("for i in range(3):\n    print(i)\nsum(range(10))",
                             on_stdout=lambda m: lines.append(m.line))
        check("async", e.text == "45" and "".join(lines) == "0\n1\n2\n", (e, lines))
    finally:
        await a.kill()


asyncio.run(async_check())
print("all passed", flush=True)
# Every check has run and said so. The SDK's async HTTP client (pyqwest, whose transport
# outlives the closed event loop) at times aborts the interpreter while it shuts down:
# SIGABRT with nothing on stderr, seen in clean CI runs after "all passed". The process
# ends here, without that finalisation, which is the client's and not what is tested.
os._exit(0)
