"""E2B's Python SDK, unchanged, against a fleet of wasbox nodes behind one proxy.

Run by tests/all/fleet.rs with E2B_API_URL and E2B_SANDBOX_URL pointing at the proxy. Creates
WASBOX_FLEET_SANDBOXES sandboxes (ten at a time), runs a command and a file round trip in each
through the proxy; then WASBOX_FLEET_INTERPRETERS sandboxes of the code interpreter SDK, each
keeping a variable between two `run_code` calls. Prints one line per sandbox, `sandbox <id>`,
then `all passed`. The sandboxes are left running: the test asks each node which ones it
holds.
"""

import concurrent.futures
import os
import sys

from e2b import Sandbox

COUNT = int(os.environ.get("WASBOX_FLEET_SANDBOXES", "30"))
INTERPRETERS = int(os.environ.get("WASBOX_FLEET_INTERPRETERS", "6"))


def one(i):
    sbx = Sandbox.create(timeout=300)
    r = sbx.commands.run(f"echo sandbox {i}; echo $E2B_SANDBOX_ID")
    lines = r.stdout.split()
    if r.exit_code != 0 or lines[:2] != ["sandbox", str(i)] or lines[2] != sbx.sandbox_id:
        raise AssertionError(f"command in {sbx.sandbox_id}: {r.stdout!r} {r.stderr!r}")
    sbx.files.write(f"/home/user/note-{i}.txt", f"kept {i}")
    got = sbx.files.read(f"note-{i}.txt")
    if got != f"kept {i}":
        raise AssertionError(f"file in {sbx.sandbox_id}: {got!r}")
    # Found again by id alone, as another client would.
    again = Sandbox.connect(sbx.sandbox_id)
    if again.files.read(f"/home/user/note-{i}.txt") != f"kept {i}":
        raise AssertionError(f"connect to {sbx.sandbox_id}")
    return sbx.sandbox_id


def interpreter(i):
    from e2b_code_interpreter import Sandbox as CodeSandbox

    sbx = CodeSandbox.create(timeout=300)
    first = sbx.run_code(f"x = {i} * 7")
    if first.error:
        raise AssertionError(f"run_code in {sbx.sandbox_id}: {first.error}")
    second = sbx.run_code("x + 1")
    if second.text != str(i * 7 + 1):
        raise AssertionError(f"state in {sbx.sandbox_id}: {second!r}")
    return sbx.sandbox_id


def main():
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        ids = list(pool.map(one, range(COUNT)))
        ids += list(pool.map(interpreter, range(INTERPRETERS)))
    if len(set(ids)) != COUNT + INTERPRETERS:
        print(f"FAIL ids repeat: {ids}")
        return 1
    for i in ids:
        print(f"sandbox {i}")
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
