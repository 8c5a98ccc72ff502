"""E2B's code interpreter SDK, unchanged, on the `datasci` template: pandas, numpy and a
matplotlib chart, the program of a code-interpreter agent.

Run by tests/all/datasci.rs with the SDK on PYTHONPATH and E2B_API_URL, E2B_SANDBOX_URL and
E2B_API_KEY pointing at the server. Prints one line per check (with its time) and "all
passed" at the end; the first failure raises.
"""

import base64
import struct
import time

from e2b_code_interpreter import Sandbox


def check(name, cond, detail=""):
    if not cond:
        raise AssertionError("%s: %s" % (name, detail))
    print("ok", name)


def timed(what, fn):
    start = time.monotonic()
    value = fn()
    print("time %s %.0f ms" % (what, (time.monotonic() - start) * 1000))
    return value


CSV = "city,month,sales\n" + "".join(
    "%s,%d,%d\n" % (city, month, base * month)
    for city, base in (("Lyon", 10), ("Oslo", 20), ("Kyiv", 30))
    for month in range(1, 13)
)

sbx = timed("create", lambda: Sandbox.create(template="datasci"))
try:
    sbx.files.write("/home/user/sales.csv", CSV)

    # Load, summarise, chart: what an analysis agent's first cell does.
    loaded = timed("first cell (imports pandas)", lambda: sbx.run_code(
        "import pandas as pd\n"
        "df = pd.read_csv('sales.csv')\n"
        "totals = df.groupby('city')['sales'].sum()\n"
        "print(totals.to_dict())\n"
        "df.describe()"
    ))
    check("no error", loaded.error is None, loaded.error)
    check("groupby sums", loaded.logs.stdout == ["{'Kyiv': 2340, 'Lyon': 780, 'Oslo': 1560}\n"],
          loaded.logs)
    check("a DataFrame's text", "count" in (loaded.text or "") and "36.0" in loaded.text,
          loaded.text)
    check("a DataFrame's html", "<table" in (loaded.results[0].html or ""), loaded.results)

    mean = timed("numpy", lambda: sbx.run_code(
        "import numpy as np\n"
        "a = np.array([[2.0, 1.0], [1.0, 3.0]])\n"
        "round(float(np.linalg.det(a)), 9), float(df['sales'].mean())"
    ))
    check("numpy and state", mean.text == "(5.0, 130.0)", mean)

    chart = timed("chart", lambda: sbx.run_code(
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots(figsize=(4, 3), dpi=100)\n"
        "totals.plot.bar(ax=ax)\n"
        "ax.set_title('Sales by city')\n"
        "plt.show()"
    ))
    check("chart without error", chart.error is None, chart.error)
    pngs = [r.png for r in chart.results if r.png]
    check("one PNG", len(pngs) == 1, chart.results)
    png = base64.b64decode(pngs[0])
    check("a PNG", png[:8] == b"\x89PNG\r\n\x1a\n", png[:16])
    width, height = struct.unpack(">II", png[16:24])
    check("its size", 300 <= width <= 420 and 220 <= height <= 360, (width, height))

    # A figure left open at the end of a cell is shown too; then none is left.
    left = sbx.run_code("plt.plot([1, 2, 3]); len(plt.get_fignums())")
    check("a figure left open", sum(1 for r in left.results if r.png) == 1, left.results)
    check("then closed", sbx.run_code("len(plt.get_fignums())").text == "0")

    # Errors keep their name, value and traceback; the context goes on.
    bad = sbx.run_code("df['nope']")
    check("error name", bad.error is not None and bad.error.name == "KeyError", bad.error)
    check("usable after", sbx.run_code("int(totals['Oslo'])").text == "1560")

    timed("1+1", lambda: sbx.run_code("1+1"))
    print("all passed")
finally:
    sbx.kill()
