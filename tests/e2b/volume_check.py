"""E2B's Python SDK volumes, unchanged, against `wasbox serve`.

Run by tests/all/e2b.rs with E2B_API_URL, E2B_SANDBOX_URL, E2B_VOLUME_API_URL and
E2B_API_KEY pointing at the server: `Volume` (create, list, get_info, destroy), its content
API (write_file, read_file, make_dir, list, get_info, exists, update_metadata, remove) with
the volume's own token, and sandboxes made with `volume_mounts`. Each check prints `ok
<name>` or `FAIL <name>: <why>`; the exit status is the number of failures.
"""

import sys
import time
import traceback

from e2b import Sandbox, Volume

FAILURES = []


def check(name):
    def wrap(f):
        t0 = time.time()
        try:
            f()
            print(f"ok {name} ({time.time() - t0:.2f}s)", flush=True)
        except Exception as e:  # noqa: BLE001
            FAILURES.append(name)
            print(f"FAIL {name}: {e!r}", flush=True)
            traceback.print_exc()
        return f

    return wrap


def eq(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def raises(f, what):
    try:
        f()
    except Exception:  # noqa: BLE001
        return
    raise AssertionError(f"{what} did not fail")


vol = Volume.create("project-data")


@check("create, list, get_info")
def _():
    assert vol.volume_id and vol.token, vol
    eq(vol.name, "project-data", "name")
    eq(
        [v.name for v in Volume.list() if v.volume_id == vol.volume_id],
        ["project-data"],
        "listed",
    )
    info = Volume.get_info(vol.volume_id)
    eq((info.name, info.token), ("project-data", vol.token), "info")
    again = Volume.connect(vol.volume_id)
    eq(again.name, "project-data", "connect")
    raises(lambda: Volume.create("project-data"), "a second volume of one name")
    raises(lambda: Volume.create("../escape"), "a name with ..")


@check("content: write, read, stat, list")
def _():
    st = vol.write_file("/notes/a.txt", "hello")
    eq((st.name, st.size, st.path), ("a.txt", 5, "/notes/a.txt"), "written")
    eq(getattr(st.type, "value", st.type), "file", "type")
    eq(vol.read_file("/notes/a.txt"), "hello", "read text")
    eq(vol.read_file("notes/a.txt", format="bytes"), b"hello", "read bytes")
    eq(b"".join(vol.read_file("/notes/a.txt", format="stream")), b"hello", "stream")
    vol.write_file("/notes/a.txt", b"hello again")
    eq(vol.get_info("/notes/a.txt").size, 11, "replaced")
    d = vol.make_dir("/d/e", force=True)
    eq(d.name, "e", "made")
    names = sorted(e.path for e in vol.list("/"))
    eq(names, ["/d", "/notes"], "listing")
    deep = sorted(e.path for e in vol.list("/", depth=3))
    eq(deep, ["/d", "/d/e", "/notes", "/notes/a.txt"], "deep listing")
    assert vol.exists("/notes/a.txt")
    assert not vol.exists("/nope")
    eq(vol.update_metadata("/notes/a.txt", mode=0o600).mode & 0o777, 0o600, "mode")
    raises(lambda: vol.read_file("/nope"), "reading a missing file")
    raises(lambda: vol.read_file("/../../etc/passwd"), "a path out of the volume")


@check("content: a wrong token is refused")
def _():
    stranger = Volume(vol.volume_id, vol.name, token="not-the-token")
    raises(lambda: stranger.read_file("/notes/a.txt"), "a read with a wrong token")
    raises(lambda: stranger.write_file("/x", "x"), "a write with a wrong token")


@check("sandboxes: attached, shared, kept after kill")
def _():
    sbx = Sandbox.create(timeout=120, volume_mounts={"/mnt/data": vol})
    try:
        r = sbx.commands.run("cat /mnt/data/notes/a.txt; echo from-sandbox > /mnt/data/b.txt")
        eq(r.stdout, "hello again", "read in the sandbox")
        sbx.files.write("/mnt/data/c.txt", "via envd")
        eq(sbx.files.read("/mnt/data/b.txt"), "from-sandbox\n", "envd read")
        mounts = Sandbox.get_info(sbx.sandbox_id).volume_mounts
        eq(mounts, [{"name": "project-data", "path": "/mnt/data"}], "volume_mounts")
        raises(lambda: Volume.destroy(vol.volume_id), "destroying an attached volume")
        # A fork has it attached too; a paused and resumed sandbox gets it back.
        (fork,) = sbx.fork(count=1)
        try:
            eq(fork.commands.run("cat /mnt/data/b.txt").stdout, "from-sandbox\n", "in a fork")
        finally:
            fork.kill()
        sbx.pause()
        raises(lambda: Volume.destroy(vol.volume_id), "destroying a paused sandbox's volume")
        sbx = Sandbox.connect(sbx.sandbox_id)
        eq(sbx.commands.run("cat /mnt/data/c.txt").stdout, "via envd", "after a resume")
    finally:
        sbx.kill()
    eq(vol.read_file("/b.txt"), "from-sandbox\n", "written by the sandbox")
    eq(vol.read_file("/c.txt"), "via envd", "written through envd")
    # By name, under the home directory, in a new sandbox.
    other = Sandbox.create(timeout=120, volume_mounts={"/home/user/data": "project-data"})
    try:
        r = other.commands.run("cat data/b.txt data/c.txt; ls")
        assert r.stdout.startswith("from-sandbox\nvia envd"), r.stdout
        assert "data" in r.stdout.split("via envd", 1)[1].split(), r.stdout
    finally:
        other.kill()


@check("remove and destroy")
def _():
    vol.remove("/notes")
    assert not vol.exists("/notes/a.txt")
    raises(lambda: vol.remove("/notes"), "removing twice")
    eq(Volume.destroy(vol.volume_id), True, "destroyed")
    eq(Volume.destroy(vol.volume_id), False, "destroyed twice")
    raises(lambda: Volume.get_info(vol.volume_id), "a destroyed volume's info")


print(f"{len(FAILURES)} failed: {FAILURES}" if FAILURES else "all passed", flush=True)
sys.exit(len(FAILURES))
