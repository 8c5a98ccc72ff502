"""`pip` of the wasbox python3 (`pip`, `pip3`, `python3 -m pip`).

The sandbox's system directories are read-only, and it has only the network its policy
allows, so this pip installs pure-Python wheels (`*-none-any.whl`) from files,
`--find-links` directories (also `PIP_FIND_LINKS`) and package indexes (the simple API,
PEP 503 HTML and PEP 691 JSON: `--index-url`, `--extra-index-url`, `PIP_INDEX_URL`,
`PIP_EXTRA_INDEX_URL`, `pip.conf`; pypi.org by default), each download checked against the
index's SHA-256, into the user site (`~/.local/lib/pythonX.Y/site-packages`, on
`sys.path` at every start), a `--target` directory or a `--prefix`, with their
dependencies, console scripts and RECORD as the wheel format (PEP 427, PEP 376) describes.
Source trees (`pip install .`, `-e .`), sdists (files, URLs, and an index's when it has no
wheel that fits) are built into wheels with their own PEP 517 build backend (setuptools,
flit_core, hatchling, poetry-core, pdm-backend, an in-tree one), its requirements installed
into an isolated directory first, as pip does. What needs a compiler (an extension module,
a wheel for another platform) is refused with pip's own messages and a reason.
`list`, `freeze`, `show` and `uninstall` work on what is installed.
"""

import base64
import configparser
import csv
import email.parser
import hashlib
import html.parser
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile

PY = "%d.%d" % sys.version_info[:2]
VERSION = "wasbox-pip 1.1 (python %s; pure-Python wheels)" % PY
NO_NETWORK = ("pip installs wheel files given as paths, found in --find-links directories "
              "(or PIP_FIND_LINKS) or on a package index the sandbox's network policy lets "
              "it reach")
DEFAULT_INDEX = "https://pypi.org/simple"


class PipError(Exception):
    pass


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


# -- versions and specifiers (PEP 440, the parts packages use) ----------------------------

_VERSION = re.compile(
    r"^v?(?:(\d+)!)?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?"
    r"(?:(?:-(\d+))|(?:[-_.]?(post|rev|r)[-_.]?(\d*)))?"
    r"(?:[-_.]?(dev)[-_.]?(\d*))?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$", re.I)


def version_key(v):
    m = _VERSION.match(v.strip())
    if not m:
        return (-1, (), (), (), ())
    epoch = int(m.group(1) or 0)
    release = [int(x) for x in m.group(2).split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    pre = m.group(3)
    if pre:
        kind = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}.get(
            pre.lower(), pre.lower())
        pre_key = ({"a": 0, "b": 1, "rc": 2}[kind], int(m.group(4) or 0))
    elif m.group(8) and not (m.group(5) or m.group(6)):
        pre_key = (-1, 0)  # a dev release comes before its pre-releases
    else:
        pre_key = (3, 0)
    post = m.group(5) or (m.group(7) or "0" if m.group(6) else None)
    post_key = (1, int(post)) if post is not None else (0, 0)
    dev_key = (0, int(m.group(9) or 0)) if m.group(8) else (1, 0)
    return (epoch, tuple(release), pre_key, post_key, dev_key)


def is_prerelease(v):
    m = _VERSION.match(v.strip())
    return bool(m and (m.group(3) or m.group(8)))


def _release(v):
    m = _VERSION.match(v.strip())
    return [int(x) for x in m.group(2).split(".")] if m else []


def spec_allows(spec, version):
    """Whether `version` meets a specifier list such as `>=1.0,!=1.3.*,<2`."""
    for part in filter(None, (p.strip() for p in spec.split(","))):
        m = re.match(r"^(===|~=|==|!=|<=|>=|<|>)\s*(.+)$", part)
        if not m:
            raise PipError("invalid requirement specifier: %s" % part)
        op, want = m.group(1), m.group(2).strip()
        if op == "===":
            ok = version == want
        elif want.endswith(".*") and op in ("==", "!="):
            prefix = _release(want[:-2])
            ok = _release(version)[:len(prefix)] + [0] * max(
                0, len(prefix) - len(_release(version))) == prefix
            ok = ok if op == "==" else not ok
        else:
            a, b = version_key(version), version_key(want)
            if op == "==":
                ok = a == b
            elif op == "!=":
                ok = a != b
            elif op == "<=":
                ok = a <= b
            elif op == ">=":
                ok = a >= b
            elif op == "<":
                # `<2` does not allow 2.0b1 (PEP 440), unless it names a pre-release.
                ok = a < b and (is_prerelease(want) or not is_prerelease(version)
                                or a[:2] != b[:2])
            elif op == ">":
                # Nor does `>2` allow 2.post1.
                ok = a > b and (a[:2] != b[:2] or a[2] != b[2] or b[3] != (0, 0)
                                or a[3] == (0, 0))
            else:  # ~=: at least this, same release prefix but the last part
                rel = _release(want)
                ok = a >= b and len(rel) > 1 and _release(version)[:len(rel) - 1] == rel[:-1]
        if not ok:
            return False
    return True


# -- environment markers (PEP 508) --------------------------------------------------------

_MARKER_TOKENS = re.compile(
    r"\s*(?:(\()|(\))|('[^']*'|\"[^\"]*\")|(===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b)"
    r"|(and\b|or\b)|([A-Za-z_.]+))")


def _environment(extra):
    return {
        "python_version": PY,
        "python_full_version": "%d.%d.%d" % sys.version_info[:3],
        "os_name": "posix",
        "sys_platform": "wasi",
        "platform_system": "WASI",
        "platform_machine": "wasm32",
        "platform_release": "",
        "platform_version": "",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "implementation_version": "%d.%d.%d" % sys.version_info[:3],
        "extra": extra,
    }


def marker_allows(marker, extras=()):
    """Evaluates a marker for this interpreter, for each requested extra (none: "")."""
    tokens = []
    pos = 0
    while pos < len(marker):
        m = _MARKER_TOKENS.match(marker, pos)
        if not m or m.end() == pos:
            if marker[pos:].strip():
                raise PipError("invalid environment marker: %s" % marker)
            break
        pos = m.end()
        kinds = ("(", ")", "str", "op", "bool", "var")
        for kind, value in zip(kinds, m.groups()):
            if value is not None:
                tokens.append((kind, re.sub(r"\s+", " ", value)))
    return any(_evaluate(tokens, _environment(e)) for e in (list(extras) or [""]))


def _evaluate(tokens, env):
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else (None, None)

    def take():
        t = peek()
        pos[0] += 1
        return t

    def value():
        """The value and what it is: "str", "version" or "extra" (compared by name)."""
        kind, v = take()
        if kind == "str":
            return v[1:-1], "str"
        if kind == "var":
            what = "version" if v.endswith("version") else "extra" if v == "extra" else "str"
            return env.get(v, ""), what
        raise PipError("invalid environment marker")

    def comparison():
        if peek()[0] == "(":
            take()
            r = disjunction()
            take()
            return r
        left, lv = value()
        _, op = take()
        right, rv = value()
        if op in ("in", "not in"):
            r = left in right
            return r if op == "in" else not r
        if "version" in (lv, rv):
            try:
                return spec_allows(op + right, left)
            except PipError:
                pass
        if "extra" in (lv, rv):
            left, right = canonical(left), canonical(right)
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        return {"<": left < right, "<=": left <= right, ">": left > right,
                ">=": left >= right}.get(op, False)

    def conjunction():
        r = comparison()
        while peek() == ("bool", "and"):
            take()
            r = comparison() and r
        return r

    def disjunction():
        r = conjunction()
        while peek() == ("bool", "or"):
            take()
            r = conjunction() or r
        return r

    return disjunction()


# -- requirements -------------------------------------------------------------------------

class Requirement:
    def __init__(self, text):
        self.text = text.strip()
        body, _, marker = self.text.partition(";")
        self.marker = marker.strip()
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*\(?([^)]*)\)?\s*$",
                     body)
        if not m:
            raise PipError("Invalid requirement: '%s'" % self.text)
        self.name = m.group(1)
        self.key = canonical(self.name)
        self.extras = [canonical(e) for e in (m.group(2) or "").split(",") if e.strip()]
        self.spec = m.group(3).strip()
        if self.spec:
            spec_allows(self.spec, "0")  # a bad specifier is an error now

    def display(self):
        """As pip writes it: the name, the extras, the specifiers sorted."""
        extras = "[%s]" % ",".join(sorted(self.extras)) if self.extras else ""
        specs = sorted(p.replace(" ", "") for p in self.spec.split(",") if p.strip())
        return self.name + extras + ",".join(specs)

    def applies(self, extras=()):
        return not self.marker or marker_allows(self.marker, extras)


# -- wheels -------------------------------------------------------------------------------

class Wheel:
    """A wheel file, from its name (`dist-version(-build)?-python-abi-platform.whl`)."""

    def __init__(self, path, url=None, sha256=None):
        self.path = path
        self.url = url
        self.sha256 = sha256
        name = os.path.basename(path or urllib.parse.urlsplit(url).path)[:-4]
        parts = name.split("-")
        if len(parts) not in (5, 6):
            raise PipError("%s.whl is not a valid wheel filename." % name)
        self.dist, self.version = parts[0], parts[1]
        self.key = canonical(self.dist)
        self.python, self.abi, self.platform = parts[-3:]

    def pure(self):
        pythons = self.python.split(".")
        ours = ("py3", "py%d%d" % sys.version_info[:2], "cp%d%d" % sys.version_info[:2])
        return (self.abi == "none" and self.platform == "any"
                and any(p in ours or re.fullmatch(r"py3\d*", p) for p in pythons))


def find_wheels(links):
    found = []
    for link in links:
        if link.startswith("file://"):
            link = link[7:]
        if os.path.isdir(link):
            for f in sorted(os.listdir(link)):
                if f.endswith(".whl"):
                    try:
                        found.append(Wheel(os.path.join(link, f)))
                    except PipError:
                        pass
        elif link.endswith(".whl") and os.path.isfile(link):
            found.append(Wheel(link))
    return found


# -- package indexes (the simple repository API) -------------------------------------------

class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 project page: (href, text, data-requires-python)."""

    def __init__(self):
        super().__init__()
        self.links, self._at = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            a = dict(attrs)
            self._at = [a.get("href") or "", "", a.get("data-requires-python"),
                        "data-yanked" in a]

    def handle_data(self, data):
        if self._at is not None:
            self._at[1] += data

    def handle_endtag(self, tag):
        if tag == "a" and self._at is not None:
            self.links.append(tuple(self._at))
            self._at = None


def _python_fits(requires):
    if not requires:
        return True
    try:
        return spec_allows(requires, "%d.%d.%d" % sys.version_info[:3])
    except Exception:  # noqa: BLE001 (an odd specifier: let it through, as pip does)
        return True


def _open(url, headers=None, timeout=60):
    """urlopen with the credentials of `user:password@host` sent as Basic authorization
    (urllib itself does not take them from the URL)."""
    parts = urllib.parse.urlsplit(url)
    headers = dict(headers or {})
    if parts.username is not None:
        creds = "%s:%s" % (urllib.parse.unquote(parts.username),
                           urllib.parse.unquote(parts.password or ""))
        headers["Authorization"] = "Basic " + base64.b64encode(creds.encode()).decode()
        host = parts.hostname if ":" not in (parts.hostname or "") else "[%s]" % parts.hostname
        netloc = host + (":%d" % parts.port if parts.port else "")
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def index_files(index, key, opts):
    """The wheels and source archives `index` lists for project `key`: Wheels (not yet
    downloaded) and the names of sdists. An index that answers 404 lists nothing."""
    url = index.rstrip("/") + "/" + key + "/"
    try:
        with _open(url, {"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
                         "User-Agent": "pip/25.0 (wasbox)"}) as r:
            kind = r.headers.get("Content-Type", "")
            body = r.read()
            base = r.geturl()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return [], []
        raise PipError("%s answered %d %s" % (_shown(url), e.code, e.reason))
    except (urllib.error.URLError, OSError) as e:
        # As pip does when an index cannot be reached: a warning, then no files from it.
        reason = getattr(e, "reason", e)
        print("WARNING: Could not fetch %s: %s (%s)" % (_shown(url), reason, NO_NETWORK),
              file=sys.stderr)
        return [], []
    entries = []
    if "json" in kind:
        data = json.loads(body)
        for f in data.get("files", []):
            entries.append((f.get("url", ""), f.get("filename", ""), f.get("requires-python"),
                            bool(f.get("yanked")), (f.get("hashes") or {}).get("sha256")))
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        for href, text, requires, yanked in parser.links:
            frag = urllib.parse.urlsplit(href).fragment
            sha = frag[len("sha256="):] if frag.startswith("sha256=") else None
            entries.append((href, text.strip(), requires, yanked, sha))
    wheels, sdists = [], []
    for href, filename, requires, yanked, sha in entries:
        full = urllib.parse.urljoin(base, href).split("#", 1)[0]
        # Files on the index's own host keep its credentials.
        ip, fp = urllib.parse.urlsplit(url), urllib.parse.urlsplit(full)
        if ip.username and fp.hostname == ip.hostname and fp.port == ip.port and \
                not fp.username:
            full = urllib.parse.urlunsplit(fp._replace(netloc=ip.netloc))
        filename = filename or os.path.basename(urllib.parse.urlsplit(full).path)
        if yanked or not _python_fits(requires):
            continue
        if filename.endswith(".whl"):
            try:
                w = Wheel(None, full, sha)
            except PipError:
                continue
            if w.key == key:
                wheels.append(w)
        elif filename.endswith(SDIST_SUFFIXES):
            version = sdist_version(filename, key)
            if version is not None:
                sdists.append(Sdist(filename, full, sha, version))
    return wheels, sdists


SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2", ".tgz")


class Sdist:
    """A source archive an index lists: `name-version.tar.gz` (or .zip)."""

    def __init__(self, filename, url, sha256, version):
        self.filename, self.url, self.sha256, self.version = filename, url, sha256, version
        self.path = None
        self.dist = filename.rsplit("-", 1)[0]


def sdist_version(filename, key):
    """The version in an sdist's file name, if the name before it is project `key`'s."""
    stem = filename
    for suffix in SDIST_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[:-len(suffix)]
    parts = stem.split("-")
    for i in range(1, len(parts)):
        if canonical("-".join(parts[:i])) == key:
            version = "-".join(parts[i:])
            return version if re.match(r"^v?\d", version) else None
    return None


def download(wheel, opts, into):
    """Fetches a wheel (or an sdist) an index listed into `into`, checking its SHA-256."""
    name = os.path.basename(urllib.parse.urlsplit(wheel.url).path)
    try:
        with _open(wheel.url, timeout=300) as r:
            data = r.read()
    except (urllib.error.URLError, OSError) as e:
        raise PipError("Could not download %s: %s" % (_shown(wheel.url),
                                                       getattr(e, "reason", e)))
    _say(opts, "  Downloading %s (%s)" % (name, _size(len(data))))
    if wheel.sha256 and hashlib.sha256(data).hexdigest() != wheel.sha256.lower():
        raise PipError("THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. "
                       "If you have updated the package versions, please update the hashes. "
                       "Otherwise, examine the package contents carefully; someone may have "
                       "tampered with them.\n    %s from %s:\n        Expected sha256 %s\n"
                       "             Got        %s" % (
                           wheel.dist, _shown(wheel.url), wheel.sha256,
                           hashlib.sha256(data).hexdigest()))
    path = os.path.join(into, name)
    with open(path, "wb") as f:
        f.write(data)
    wheel.path = path
    return wheel


def _size(n):
    return "%.1f kB" % (n / 1000) if n < 1000 * 1000 else "%.1f MB" % (n / 1e6)


def pip_config():
    """`index-url`, `extra-index-url` and `find-links` of pip.conf (global, user, then
    `$PIP_CONFIG_FILE`; the later wins), from the `[global]` and `[install]` sections."""
    files = ["/etc/pip.conf", os.path.expanduser("~/.pip/pip.conf"),
             os.path.expanduser("~/.config/pip/pip.conf")]
    if os.environ.get("VIRTUAL_ENV"):
        files.append(os.path.join(os.environ["VIRTUAL_ENV"], "pip.conf"))
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(os.environ["PIP_CONFIG_FILE"])
    conf = configparser.ConfigParser()
    try:
        conf.read([f for f in files if os.path.isfile(f)])
    except configparser.Error:
        return {}
    out = {}
    for section in ("global", "install"):
        if conf.has_section(section):
            for key in ("index-url", "extra-index-url", "find-links", "no-index"):
                if conf.has_option(section, key):
                    out[key] = conf.get(section, key)
    return out


def _metadata(text):
    return email.parser.Parser().parsestr(text)


def _dist_info(zf, wheel):
    names = [n for n in zf.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", n)]
    if not names:
        raise PipError("%s has no .dist-info/METADATA" % os.path.basename(wheel.path))
    return names[0].split("/")[0]


def _safe(name):
    parts = name.replace("\\", "/").split("/")
    if name.startswith("/") or ".." in parts or any(":" in p for p in parts[:1]):
        raise PipError("the wheel has an unsafe path: %s" % name)
    return "/".join(parts)


# -- where things go ----------------------------------------------------------------------

def user_base():
    return os.environ.get("PYTHONUSERBASE") or os.path.join(os.path.expanduser("~"), ".local")


def user_site():
    return os.path.join(user_base(), "lib", "python" + PY, "site-packages")


def find_venv(argv0):
    """The virtual environment the program `argv0` (a path, or a name found on PATH) is
    in: the directory above its `bin/` when that holds a `pyvenv.cfg`; else None."""
    if not argv0:
        return None
    if "/" in argv0:
        path = os.path.abspath(argv0)
    else:
        path = None
        for d in os.environ.get("PATH", "").split(":"):
            candidate = os.path.join(d or ".", argv0)
            if os.path.lexists(candidate):
                path = os.path.abspath(candidate)
                break
        if path is None:
            return None
    root = os.path.dirname(os.path.dirname(path))
    return root if os.path.isfile(os.path.join(root, "pyvenv.cfg")) else None


def venv_site(root):
    return os.path.join(root, "lib", "python" + PY, "site-packages")


# The environment `pip` and `python3` run in: a virtual environment's root, or None.
VENV = [None]

ACTIVATE = """# This file must be used with "source bin/activate" from a shell; it cannot run itself.
deactivate () {
    if [ -n "${_OLD_VIRTUAL_PATH:-}" ]; then
        PATH="${_OLD_VIRTUAL_PATH:-}"
        export PATH
        unset _OLD_VIRTUAL_PATH
    fi
    if [ -n "${_OLD_VIRTUAL_PS1:-}" ]; then
        PS1="${_OLD_VIRTUAL_PS1:-}"
        export PS1
        unset _OLD_VIRTUAL_PS1
    fi
    unset VIRTUAL_ENV
    unset VIRTUAL_ENV_PROMPT
    if [ ! "${1:-}" = "nondestructive" ]; then
        unset -f deactivate
    fi
}

deactivate nondestructive

VIRTUAL_ENV=%(root)s
export VIRTUAL_ENV

_OLD_VIRTUAL_PATH="$PATH"
PATH="$VIRTUAL_ENV/bin:$PATH"
export PATH

VIRTUAL_ENV_PROMPT=%(prompt)s
export VIRTUAL_ENV_PROMPT

if [ -z "${VIRTUAL_ENV_DISABLE_PROMPT:-}" ]; then
    _OLD_VIRTUAL_PS1="${PS1:-}"
    PS1="(%(name)s) ${PS1:-}"
    export PS1
fi
hash -r 2> /dev/null
"""


def _quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def _link_to(target, link):
    """A symlink to a program of the image: WASI takes relative targets only."""
    rel = os.path.relpath(target, os.path.dirname(link))
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(rel, link)


def create_venv(args):
    """`python3 -m venv [--clear] [--prompt P] [--without-pip] ... DIR...`."""
    dirs, prompt, clear, system = [], None, False, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--prompt":
            i += 1
            prompt = args[i] if i < len(args) else None
        elif a.startswith("--prompt="):
            prompt = a.split("=", 1)[1]
        elif a == "--clear":
            clear = True
        elif a == "--system-site-packages":
            system = True
        elif a in ("--without-pip", "--upgrade-deps", "--symlinks", "--copies", "--upgrade",
                   "--without-scm-ignore-files"):
            pass
        elif a in ("-h", "--help"):
            print("usage: venv [-h] [--system-site-packages] [--symlinks | --copies] [--clear]"
                  " [--upgrade] [--without-pip] [--prompt PROMPT] [--upgrade-deps]"
                  " ENV_DIR [ENV_DIR ...]")
            return 0
        elif a.startswith("-"):
            print("venv: error: unrecognized arguments: %s" % a, file=sys.stderr)
            return 2
        else:
            dirs.append(a)
        i += 1
    if not dirs:
        print("usage: venv [-h] [--system-site-packages] [--symlinks | --copies] [--clear]"
              " [--upgrade] [--without-pip] [--prompt PROMPT] [--upgrade-deps]"
              " ENV_DIR [ENV_DIR ...]\nvenv: error: the following arguments are required: "
              "ENV_DIR", file=sys.stderr)
        return 2
    for d in dirs:
        root = os.path.abspath(d)
        if clear and os.path.isdir(root):
            shutil.rmtree(root)
        bindir = os.path.join(root, "bin")
        os.makedirs(bindir, exist_ok=True)
        os.makedirs(venv_site(root), exist_ok=True)
        os.makedirs(os.path.join(root, "include"), exist_ok=True)
        for name in ("python", "python3", "python" + PY):
            _link_to("/usr/bin/python3", os.path.join(bindir, name))
        for name in ("pip", "pip3", "pip" + PY):
            _link_to("/usr/bin/pip", os.path.join(bindir, name))
        with open(os.path.join(root, "pyvenv.cfg"), "w") as f:
            f.write("home = /usr/bin\ninclude-system-site-packages = %s\nversion = %d.%d.%d\n"
                    "executable = /usr/bin/python3\ncommand = /usr/bin/python3 -m venv %s\n" % (
                        "true" if system else "false", *sys.version_info[:3], root))
        name = prompt or os.path.basename(root)
        with open(os.path.join(bindir, "activate"), "w") as f:
            f.write(ACTIVATE % {"root": _quote(root), "prompt": _quote("(%s) " % name),
                                "name": name})
        with open(os.path.join(root, ".gitignore"), "w") as f:
            f.write("# Created by venv; see https://docs.python.org/3/library/venv.html\n*\n")
    return 0


class Scheme:
    def __init__(self, site, scripts, data):
        self.site, self.scripts, self.data = site, scripts, data


def installed(paths=None):
    """`{key: (name, version, dist-info path, site dir)}` of the distributions on `paths`."""
    out = {}
    for site in paths if paths is not None else [p or os.getcwd() for p in sys.path]:
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for e in entries:
            if not e.endswith(".dist-info"):
                continue
            path = os.path.join(site, e)
            try:
                with open(os.path.join(path, "METADATA"), encoding="utf-8") as f:
                    meta = _metadata(f.read())
            except OSError:
                continue
            name, version = meta.get("Name"), meta.get("Version")
            if name and version and canonical(name) not in out:
                out[canonical(name)] = (name, version, path, site)
    return out


def _record_paths(dist_info, site):
    try:
        with open(os.path.join(dist_info, "RECORD"), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except OSError:
        return [dist_info]
    paths = []
    for row in rows:
        if row and row[0]:
            p = os.path.normpath(os.path.join(site, row[0]))
            paths.append(p)
    return paths + [dist_info]


def remove_dist(dist_info, site):
    dirs = set()
    for p in _record_paths(dist_info, site):
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                os.remove(p)
            except OSError:
                pass
        dirs.add(os.path.dirname(p))
        if p.endswith(".py"):
            dirs.add(os.path.join(os.path.dirname(p), "__pycache__"))
    # Directories the files left empty.
    for d in sorted(dirs, key=len, reverse=True):
        while d.startswith(site.rstrip("/") + "/") and d != site:
            try:
                if os.path.basename(d) == "__pycache__":
                    shutil.rmtree(d, ignore_errors=True)
                else:
                    os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)


def _hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _interpreter():
    """What installed scripts start with: the environment's own python in a venv."""
    if VENV[0]:
        return "#!%s\n" % os.path.join(VENV[0], "bin", "python")
    return "#!/usr/bin/env python3\n"


def _script(module, func):
    return (_interpreter() + "import sys\nfrom %s import %s\n"
            "if __name__ == \"__main__\":\n"
            "    if sys.argv[0].endswith(\".exe\"):\n        sys.argv[0] = sys.argv[0][:-4]\n"
            "    sys.exit(%s())\n") % (module, func.split(".")[0], func)


def install_wheel(wheel, scheme, requested):
    with zipfile.ZipFile(wheel.path) as zf:
        # Every path is checked before anything is written.
        for item in zf.infolist():
            _safe(item.filename)
        info = _dist_info(zf, wheel)
        data_dir = info[:-len(".dist-info")] + ".data"
        try:
            wheel_meta = _metadata(zf.read(info + "/WHEEL").decode("utf-8"))
        except KeyError:
            raise PipError("%s has no .dist-info/WHEEL" % os.path.basename(wheel.path))
        if wheel_meta.get("Root-Is-Purelib", "true").strip().lower() != "true":
            raise PipError("%s is not a pure-Python wheel" % os.path.basename(wheel.path))
        record = []
        for item in zf.infolist():
            name = _safe(item.filename)
            if name.endswith("/") or name.endswith("/RECORD.jws") or name.endswith("/RECORD.p7s"):
                continue
            if name.startswith(data_dir + "/"):
                kind, _, rest = name[len(data_dir) + 1:].partition("/")
                base = {"purelib": scheme.site, "platlib": scheme.site,
                        "scripts": scheme.scripts, "data": scheme.data,
                        "headers": os.path.join(scheme.data, "include")}.get(kind)
                if base is None or not rest:
                    continue
                dest = os.path.join(base, rest)
            elif name == info + "/RECORD":
                continue
            else:
                dest = os.path.join(scheme.site, name)
            data = zf.read(item)
            if name.startswith(data_dir + "/scripts/") and data.startswith(b"#!python"):
                # The wheel's placeholder for the interpreter.
                body = data.split(b"\n", 1)[1] if b"\n" in data else b""
                data = _interpreter().encode() + body
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            mode = (item.external_attr >> 16) & 0o777
            if mode & 0o111 or dest.startswith(scheme.scripts + "/"):
                os.chmod(dest, 0o755)
            record.append((os.path.relpath(dest, scheme.site), _hash(data), str(len(data))))
        dist_info = os.path.join(scheme.site, info)
        extra_files = {"INSTALLER": b"pip\n"}
        if requested:
            extra_files["REQUESTED"] = b""
        for fname, data in extra_files.items():
            with open(os.path.join(dist_info, fname), "wb") as f:
                f.write(data)
            record.append((os.path.relpath(os.path.join(dist_info, fname), scheme.site),
                           _hash(data), str(len(data))))
        try:
            entry_points = zf.read(info + "/entry_points.txt").decode("utf-8")
        except KeyError:
            entry_points = ""
        scripts = []
        section = None
        for line in entry_points.splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip()
            elif "=" in line and section in ("console_scripts", "gui_scripts"):
                name, _, target = line.partition("=")
                target = target.split("[")[0].strip()
                module, _, func = target.partition(":")
                path = os.path.join(scheme.scripts, name.strip())
                data = _script(module.strip(), func.strip() or "main").encode()
                os.makedirs(scheme.scripts, exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
                os.chmod(path, 0o755)
                scripts.append(name.strip())
                record.append((os.path.relpath(path, scheme.site), _hash(data), str(len(data))))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for row in record:
            w.writerow(row)
        w.writerow((os.path.relpath(os.path.join(dist_info, "RECORD"), scheme.site), "", ""))
        with open(os.path.join(dist_info, "RECORD"), "w", encoding="utf-8") as f:
            f.write(buf.getvalue())
        meta = _metadata(zf.read(info + "/METADATA").decode("utf-8"))
    return meta, scripts


# -- the commands ---------------------------------------------------------------------------

def _options(args, spec):
    """Splits `args` into options (by `spec`: name -> takes a value) and the rest."""
    opts, rest = {}, []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i + 1:])
            break
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        if name.startswith("-") and len(name) > 1:
            if name not in spec:
                if len(name) > 2 and not name.startswith("--") and name[:2] in spec:
                    name, value, eq = name[:2], name[2:], "="  # -rfile, -fDIR
                else:
                    raise PipError("no such option: %s" % name)
            key, takes = spec[name]
            if takes:
                if not eq:
                    i += 1
                    if i >= len(args):
                        raise PipError("%s option requires 1 argument" % name)
                    value = args[i]
                opts.setdefault(key, []).append(value)
            else:
                opts[key] = opts.get(key, 0) + 1
        else:
            rest.append(a)
        i += 1
    return opts, rest


_COMMON = {"-q": ("quiet", False), "--quiet": ("quiet", False), "-v": ("verbose", False),
           "--verbose": ("verbose", False), "--disable-pip-version-check": ("noop", False),
           "--no-cache-dir": ("noop", False), "--no-color": ("noop", False),
           "--isolated": ("noop", False), "--no-input": ("noop", False),
           "--root-user-action": ("noop", True), "--progress-bar": ("noop", True),
           "--cache-dir": ("noop", True), "--timeout": ("noop", True),
           "--retries": ("noop", True), "--python": ("noop", True)}

_INSTALL = dict(_COMMON, **{
    "-r": ("requirement", True), "--requirement": ("requirement", True),
    "-c": ("constraint", True), "--constraint": ("constraint", True),
    "-f": ("find_links", True), "--find-links": ("find_links", True),
    "--no-index": ("no_index", False), "-i": ("index_url", True),
    "--index-url": ("index_url", True), "--extra-index-url": ("extra_index", True),
    "--trusted-host": ("noop", True),
    "--user": ("user", False), "-t": ("target", True), "--target": ("target", True),
    "--prefix": ("prefix", True), "-U": ("upgrade", False), "--upgrade": ("upgrade", False),
    "--upgrade-strategy": ("noop", True), "--force-reinstall": ("force", False),
    "--no-deps": ("no_deps", False), "--pre": ("pre", False),
    "--break-system-packages": ("noop", False), "--no-warn-script-location": ("no_warn", False),
    "--no-build-isolation": ("no_build_isolation", False),
    "--only-binary": ("only_binary", True),
    "--prefer-binary": ("noop", False), "--no-binary": ("noop", True),
    "--require-hashes": ("noop", False), "--ignore-installed": ("force", False),
    "-I": ("force", False), "-e": ("editable", True), "--editable": ("editable", True),
    "--dry-run": ("dry_run", False), "--no-compile": ("noop", False),
    "--compile": ("noop", False), "--use-pep517": ("noop", False),
    "--no-warn-conflicts": ("noop", False),
})


def _requirements_file(path, seen=None):
    seen = seen or set()
    if path in seen:
        return [], []
    seen.add(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PipError("Could not open requirements file: [Errno %d] %s: '%s'" % (
            e.errno or 2, e.strerror or "No such file or directory", path))
    reqs, links = [], []
    base = os.path.dirname(path)
    joined = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + line
        else:
            joined.append(line)
    for line in joined:
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement")):
            sub = line.split(None, 1)[1] if " " in line else line.split("=", 1)[1]
            r, lk = _requirements_file(os.path.join(base, sub.strip()), seen)
            reqs += r
            links += lk
        elif line.startswith(("-f ", "--find-links")):
            value = line.split(None, 1)[1] if " " in line else line.split("=", 1)[1]
            links.append(os.path.join(base, value.strip()))
        elif line.startswith(("-i ", "--index-url", "--extra-index-url", "--no-index")):
            name, _, value = line.replace("=", " ", 1).partition(" ")
            links.append((name, value.strip()))
        elif line.startswith("-"):
            continue
        else:
            reqs.append(line)
    return reqs, links


def _shown(url):
    """An index URL as pip prints it: without its password."""
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = "%s:****@%s" % (parts.username, parts.hostname + (
            ":%d" % parts.port if parts.port else ""))
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def _say(opts, *lines):
    if not opts.get("quiet"):
        for line in lines:
            print(line)


# -- building from source (PEP 517) -------------------------------------------------------

# What a project without a pyproject.toml (or without a backend in it) is built with.
_LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
_LEGACY_REQUIRES = ["setuptools>=40.8.0"]
# Builds inside builds (a build requirement that is itself only an sdist) stop here.
_MAX_BUILD_DEPTH = 3

# The backend's hooks, run in a child python3 with the build environment on its path:
# argv is the backend, its in-tree path (JSON), the hook, its output directory and the file
# the result goes to (stdout is the backend's own).
_HOOK = """
import importlib, json, os, sys
backend, backend_path, hook, out, result = sys.argv[1:6]
sys.path[:0] = [os.path.abspath(p) for p in json.loads(backend_path)]
module, _, obj = backend.partition(":")
b = importlib.import_module(module)
for part in [p for p in obj.split(".") if p]:
    b = getattr(b, part)
if hook.startswith("get_requires"):
    f = getattr(b, hook, None)
    value = f({}) if f else []
else:
    f = getattr(b, hook, None)
    if f is None:
        sys.exit("the build backend %s has no %s hook" % (backend, hook))
    value = f(out, {})
with open(result, "w") as fh:
    json.dump(value, fh)
"""


def _extract(archive, into):
    """Unpacks an sdist, refusing members that would land outside `into`; returns the
    project's directory (the archive's single top directory)."""
    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                target = os.path.realpath(os.path.join(into, name))
                if not target.startswith(os.path.realpath(into) + os.sep):
                    raise PipError("%s holds a path outside itself: %s" % (
                        os.path.basename(archive), name))
            zf.extractall(into)
    else:
        try:
            with tarfile.open(archive) as tf:
                tf.extractall(into, filter="data")
        except (tarfile.TarError, OSError) as e:
            raise PipError("cannot unpack %s: %s" % (os.path.basename(archive), e))
    entries = [e for e in os.listdir(into) if not e.startswith(".")]
    if len(entries) == 1 and os.path.isdir(os.path.join(into, entries[0])):
        return os.path.join(into, entries[0])
    return into


def _build_system(source):
    """(requires, backend, backend-path) of a source tree, as PEP 517 and 518 read them."""
    pyproject = os.path.join(source, "pyproject.toml")
    if os.path.isfile(pyproject):
        try:
            with open(pyproject, "rb") as f:
                system = tomllib.load(f).get("build-system") or {}
        except (tomllib.TOMLDecodeError, OSError) as e:
            raise PipError("%s could not be read: %s" % (pyproject, e))
        requires = system.get("requires", _LEGACY_REQUIRES)
        if "build-backend" in system:
            return requires, system["build-backend"], system.get("backend-path", [])
        return requires, _LEGACY_BACKEND, []
    if os.path.isfile(os.path.join(source, "setup.py")) or \
            os.path.isfile(os.path.join(source, "setup.cfg")):
        return _LEGACY_REQUIRES, _LEGACY_BACKEND, []
    raise PipError("Directory '%s' is not installable. Neither 'setup.py' nor "
                   "'pyproject.toml' found." % source)


def _run_hook(source, env_dir, backend, backend_path, hook, out, opts):
    result = os.path.join(env_dir, "hook-result.json")
    child_env = dict(os.environ)
    if env_dir:
        child_env["PYTHONPATH"] = os.pathsep.join(
            [env_dir] + [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p])
    child_env.pop("PIP_REQUIRE_VIRTUALENV", None)
    done = subprocess.run(
        ["python3", "-c", _HOOK, backend, json.dumps(backend_path), hook, out, result],
        cwd=source, env=child_env, capture_output=True)
    log = (done.stdout + done.stderr).decode("utf-8", "replace")
    if opts.get("verbose"):
        sys.stderr.write(log)
    if done.returncode != 0:
        tail = "\n".join(log.rstrip().splitlines()[-25:])
        native = re.search(r"(gcc|cc|clang|cl\.exe|x86_64-linux-gnu-gcc|cargo|rustc|gfortran)"
                           r"[^\n]*(failed|not found|No such file)|Microsoft Visual C\+\+|"
                           r"unable to execute|CompileError|Cython|setuptools_rust|"
                           r"maturin|scikit_build|mesonpy", log)
        why = ("it has code that needs a compiler, which this sandbox does not have: install "
               "a pure-Python wheel instead" if native else
               "see the build backend's output above")
        raise PipError("%s\nerror: subprocess-exited-with-error\n\n  x Building wheel for %s "
                       "did not run successfully (exit code %d): %s" % (
                           tail, os.path.basename(source), done.returncode, why))
    with open(result) as f:
        return json.load(f)


def build_wheel(source, opts, index_args, downloads, editable=False):
    """Builds a wheel of the source tree `source` with its PEP 517 backend; returns it as a
    Wheel. The backend's requirements go into an isolated directory unless
    `--no-build-isolation`."""
    depth = int(os.environ.get("WASBOX_PIP_BUILD_DEPTH", "0"))
    if depth >= _MAX_BUILD_DEPTH:
        raise PipError("building %s needs builds nested %d deep: stopped" % (source, depth))
    requires, backend, backend_path = _build_system(source)
    env_dir = tempfile.mkdtemp(prefix="pip-build-env-", dir=_download_dir(downloads))
    isolated = not opts.get("no_build_isolation")
    saved = os.environ.get("WASBOX_PIP_BUILD_DEPTH")
    os.environ["WASBOX_PIP_BUILD_DEPTH"] = str(depth + 1)
    try:
        def requirements(reqs, what):
            if not reqs or not isolated:
                return
            _say(opts, "  Installing %s ... " % what)
            sub = ["-q", "--no-warn-script-location", "--target", env_dir] + index_args
            if _install(sub + list(reqs), downloads) != 0:
                raise PipError("could not install the build requirements %s" % ", ".join(reqs))
        requirements(requires, "build dependencies")
        kind = "editable" if editable else "wheel"
        _say(opts, "  Getting requirements to build %s ... " % kind)
        more = _run_hook(source, env_dir if isolated else "", backend, backend_path,
                         "get_requires_for_build_" + kind, env_dir, opts)
        requirements([r for r in more if canonical(Requirement(r).name) not in
                      {canonical(Requirement(q).name) for q in requires}],
                     "backend dependencies")
        _say(opts, "  Building %s for %s ..." % (kind, os.path.basename(source)))
        out = tempfile.mkdtemp(prefix="pip-wheel-", dir=_download_dir(downloads))
        name = _run_hook(source, env_dir if isolated else "", backend, backend_path,
                         "build_" + kind, out, opts)
    finally:
        if saved is None:
            os.environ.pop("WASBOX_PIP_BUILD_DEPTH", None)
        else:
            os.environ["WASBOX_PIP_BUILD_DEPTH"] = saved
    wheel = Wheel(os.path.join(out, name))
    if not wheel.pure():
        raise PipError("%s was built for this interpreter only (%s): it has compiled code, "
                       "which a wasm sandbox cannot build or run; install a pure-Python "
                       "wheel instead" % (wheel.dist, os.path.basename(wheel.path)))
    return wheel


def build_sdist(archive, opts, index_args, downloads, editable=False):
    """An sdist file (or a source directory) made into a wheel."""
    if os.path.isdir(archive):
        return build_wheel(os.path.abspath(archive), opts, index_args, downloads, editable)
    into = tempfile.mkdtemp(prefix="pip-src-", dir=_download_dir(downloads))
    source = _extract(archive, into)
    _say(opts, "Processing %s" % archive)
    return build_wheel(source, opts, index_args, downloads, editable)


def cmd_install(args):
    """`pip install`; what it downloaded (into a directory of /tmp) is removed at the end."""
    downloads = []
    try:
        return _install(args, downloads)
    finally:
        for d in downloads:
            shutil.rmtree(d, ignore_errors=True)


def _download_dir(downloads):
    if not downloads:
        downloads.append(tempfile.mkdtemp(prefix="pip-download-"))
    return downloads[0]


def _satisfied(opts, req, have, version):
    """Whether the installed distribution `have` is already `version` (and `--force` was
    not given); says so as pip does."""
    if have and not opts.get("force") and version_key(have[1]) == version_key(version):
        _say(opts, "Requirement already satisfied: %s in %s (%s)" % (
            req.name, have[3], have[1]))
        return True
    return False


def _install(args, downloads_made):
    opts, rest = _options(args, _INSTALL)
    conf = pip_config()
    links = list(opts.get("find_links", []))
    links += [x for x in os.environ.get("PIP_FIND_LINKS", conf.get("find-links", "")).split()
              if x]
    texts = list(rest)
    file_index = []
    for path in opts.get("requirement", []):
        r, lk = _requirements_file(path)
        texts += r
        links += [x for x in lk if isinstance(x, str)]
        file_index += [x for x in lk if not isinstance(x, str)]
    # The indexes: the flag, else the environment, else pip.conf, else pypi.org; the extra
    # ones after it. `--no-index` (or PIP_NO_INDEX) uses none.
    index_url = (opts.get("index_url") or [None])[-1]
    extra = list(opts.get("extra_index", []))
    no_index = bool(opts.get("no_index"))
    for name, value in file_index:
        if name in ("-i", "--index-url"):
            index_url = index_url or value
        elif name == "--extra-index-url":
            extra.append(value)
        elif name == "--no-index":
            no_index = True
    index_url = (index_url or os.environ.get("PIP_INDEX_URL") or conf.get("index-url")
                 or DEFAULT_INDEX)
    extra += [x for x in (os.environ.get("PIP_EXTRA_INDEX_URL")
                          or conf.get("extra-index-url", "")).split() if x]
    if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on") or \
            conf.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        no_index = True
    indexes = [] if no_index else [index_url] + extra
    # How a build's own requirements are found: the same indexes and links.
    index_args = ["--no-index"] if no_index else ["--index-url", index_url]
    for e in extra if not no_index else []:
        index_args += ["--extra-index-url", e]
    for link in links:
        index_args += ["--find-links", link]
    listed = {}  # key -> (wheels, sdists) from the indexes
    if not texts and not opts.get("editable"):
        raise PipError("You must give at least one requirement to install (see \"pip help "
                       "install\")")
    constraints = []
    for path in opts.get("constraint", []):
        constraints += [Requirement(t) for t in _requirements_file(path)[0]]
    if opts.get("target"):
        target = os.path.abspath(opts["target"][-1])
        scheme = Scheme(target, os.path.join(target, "bin"), target)
    elif opts.get("prefix"):
        prefix = os.path.abspath(opts["prefix"][-1])
        scheme = Scheme(os.path.join(prefix, "lib", "python" + PY, "site-packages"),
                        os.path.join(prefix, "bin"), prefix)
    elif VENV[0] and not opts.get("user"):
        scheme = Scheme(venv_site(VENV[0]), os.path.join(VENV[0], "bin"), VENV[0])
    else:
        if not opts.get("user"):
            _say(opts, "Defaulting to user installation because normal site-packages is not "
                       "writeable")
        scheme = Scheme(user_site(), os.path.join(user_base(), "bin"), user_base())
    present = installed([scheme.site]) if (opts.get("target") or opts.get("prefix")) \
        else installed()
    if indexes and indexes != [DEFAULT_INDEX]:
        _say(opts, "Looking in indexes: %s" % ", ".join(_shown(i) for i in indexes))
    if links:
        _say(opts, "Looking in links: %s" % ", ".join(links))
    pool = find_wheels(links)
    todo = []  # (Requirement or Wheel, requested, extras)
    for t in opts.get("editable", []):
        if not os.path.isdir(t):
            raise PipError("%s is not a valid editable requirement. It should either be a path "
                           "to a local project or a VCS URL (beginning with bzr+http, "
                           "bzr+https, bzr+ssh, bzr+sftp, bzr+ftp, bzr+lp, bzr+file, git+http, "
                           "git+https, git+ssh, git+git, git+file, hg+file, hg+http, "
                           "hg+https, hg+ssh, hg+static-http, svn+ssh, svn+http, svn+https, "
                           "svn+svn, svn+file)." % t)
        _say(opts, "Obtaining file://%s" % os.path.abspath(t))
        todo.append((build_sdist(t, opts, index_args, downloads_made, editable=True), True, []))
    for t in texts:
        if t.endswith(".whl"):
            if not os.path.isfile(t):
                raise PipError("Requirement '%s' looks like a filename, but the file does not "
                               "exist" % t)
            todo.append((Wheel(t), True, []))
        elif os.path.isdir(t) or (t.endswith(SDIST_SUFFIXES) and os.path.isfile(t)):
            if os.path.isdir(t):
                _say(opts, "Processing %s" % t)
            todo.append((build_sdist(t, opts, index_args, downloads_made), True, []))
        elif t.startswith((".", "/")) or t.endswith(SDIST_SUFFIXES) and "://" not in t:
            raise PipError("Invalid requirement: '%s'\nHint: It looks like a path. File '%s' "
                           "does not exist." % (t, t))
        elif re.match(r"^https?://", t) and urllib.parse.urlsplit(t).path.endswith(".whl"):
            todo.append((download(Wheel(None, t), opts, _download_dir(downloads_made)), True,
                         []))
        elif re.match(r"^https?://", t) and urllib.parse.urlsplit(t).path.endswith(
                SDIST_SUFFIXES):
            name = os.path.basename(urllib.parse.urlsplit(t).path)
            sd = download(Sdist(name, t, None, None), opts, _download_dir(downloads_made))
            todo.append((build_sdist(sd.path, opts, index_args, downloads_made), True, []))
        elif re.match(r"^[a-z+]+://", t):
            raise PipError("cannot install %s: only wheels (.whl) and source archives "
                           "(.tar.gz, .zip) can be fetched by URL in this sandbox" % t)
        else:
            todo.append((Requirement(t), True, []))
    chosen = {}  # key -> (Wheel, requested)
    order = []
    while todo:
        item, requested, parent_extras = todo.pop(0)
        if isinstance(item, Wheel):
            wheel, req = item, None
            _say(opts, "Processing %s" % wheel.path)
        else:
            req = item
            if not req.applies(parent_extras):
                continue
            if req.key in chosen:
                continue
            have = present.get(req.key)
            if have and not opts.get("upgrade") and not opts.get("force") and (
                    not req.spec or spec_allows(req.spec, have[1])):
                _say(opts, "Requirement already satisfied: %s in %s (%s)" % (
                    req.text.split(";")[0].strip(), have[3], have[1]))
                continue
            specs = [req.spec] + [c.spec for c in constraints if c.key == req.key and c.spec]
            fits = [w for w in pool if w.key == req.key and w.pure()
                    and all(spec_allows(s, w.version) for s in specs if s)]
            if not fits and indexes and req.key not in listed:
                _say(opts, "Collecting %s" % req.text.split(";")[0].strip())
                found, sdists = [], []
                for index in indexes:
                    w, sd = index_files(index, req.key, opts)
                    found += w
                    sdists += sd
                listed[req.key] = (found, sdists)
                pool += found
                fits = [w for w in pool if w.key == req.key and w.pure()
                        and all(spec_allows(s, w.version) for s in specs if s)]
            if not opts.get("pre") and any(not is_prerelease(w.version) for w in fits):
                fits = [w for w in fits if not is_prerelease(w.version)]
            if not fits:
                versions = sorted({w.version for w in pool if w.key == req.key and w.pure()},
                                  key=version_key)
                if not links and not indexes:
                    print("WARNING: %s" % NO_NETWORK, file=sys.stderr)
                sdists = [sd for sd in listed.get(req.key, ((), ()))[1]
                          if all(spec_allows(s, sd.version) for s in specs if s)]
                if not opts.get("pre") and any(not is_prerelease(sd.version) for sd in sdists):
                    sdists = [sd for sd in sdists if not is_prerelease(sd.version)]
                binary_only = {canonical(n) for v in opts.get("only_binary", [])
                               for n in v.split(",")}
                if ":all:" in binary_only or req.key in binary_only:
                    sdists = []
                if sdists and not versions:
                    sd = max(sdists, key=lambda x: version_key(x.version))
                    if _satisfied(opts, req, have, sd.version):
                        continue
                    download(sd, opts, _download_dir(downloads_made))
                    fits = [build_sdist(sd.path, opts, index_args, downloads_made)]
                    pool += fits
            if not fits:
                impure = [w for w in pool if w.key == req.key and not w.pure()]
                if impure:
                    print("WARNING: skipping %s: only wheels for any platform (none-any) run "
                          "here" % ", ".join(os.path.basename(w.path or w.url) for w in impure),
                          file=sys.stderr)
                raise PipError("Could not find a version that satisfies the requirement %s "
                               "(from versions: %s)\nERROR: No matching distribution found for "
                               "%s" % (req.display(), ", ".join(versions) or "none",
                                       req.display()))
            wheel = max(fits, key=lambda w: version_key(w.version))
            if _satisfied(opts, req, have, wheel.version):
                continue
            if wheel.path is None:
                download(wheel, opts, _download_dir(downloads_made))
            else:
                _say(opts, "Processing %s" % wheel.path)
        if not wheel.pure():
            raise PipError("%s is not a supported wheel on this platform (only pure-Python "
                           "wheels, *-none-any.whl, run in a wasm sandbox)" %
                           os.path.basename(wheel.path))
        if wheel.key in chosen:
            continue
        chosen[wheel.key] = (wheel, requested)
        order.append(wheel.key)
        if opts.get("no_deps"):
            continue
        with zipfile.ZipFile(wheel.path) as zf:
            meta = _metadata(zf.read(_dist_info(zf, wheel) + "/METADATA").decode("utf-8"))
        extras = req.extras if req else []
        for dep in meta.get_all("Requires-Dist") or []:
            todo.append((Requirement(dep), False, extras))
    if not order:
        return 0
    # Dependencies before what needs them (they were found after it).
    order.reverse()
    names = [chosen[k][0].dist for k in order]
    if opts.get("dry_run"):
        _say(opts, "Would install %s" % " ".join(
            "%s-%s" % (chosen[k][0].dist, chosen[k][0].version) for k in order))
        return 0
    _say(opts, "Installing collected packages: %s" % ", ".join(names))
    done, new_scripts = [], []
    for key in order:
        wheel, requested = chosen[key]
        have = present.get(key)
        if have:
            _say(opts, "  Attempting uninstall: %s" % have[0],
                 "    Found existing installation: %s %s" % (have[0], have[1]))
            remove_dist(have[2], have[3])
            _say(opts, "    Successfully uninstalled %s-%s" % (have[0], have[1]))
        meta, scripts = install_wheel(wheel, scheme, requested)
        new_scripts += scripts
        done.append("%s-%s" % (meta.get("Name", wheel.dist), meta.get("Version", wheel.version)))
    path_dirs = os.environ.get("PATH", "").split(":")
    if new_scripts and scheme.scripts not in path_dirs and not opts.get("no_warn"):
        print("  WARNING: The script%s %s %s installed in '%s' which is not on PATH.\n"
              "  Consider adding this directory to PATH or, if you prefer to suppress this "
              "warning, use --no-warn-script-location." % (
                  "s" if len(new_scripts) > 1 else "", ", ".join(new_scripts),
                  "are" if len(new_scripts) > 1 else "is", scheme.scripts), file=sys.stderr)
    _say(opts, "Successfully installed %s" % " ".join(done))
    if scheme.site in (user_site(), VENV[0] and venv_site(VENV[0])) and \
            scheme.site not in sys.path:
        sys.path.append(scheme.site)
    return 0


def cmd_uninstall(args):
    opts, rest = _options(args, dict(_COMMON, **{"-y": ("yes", False), "--yes": ("yes", False),
                                                "-r": ("requirement", True),
                                                "--requirement": ("requirement", True),
                                                "--break-system-packages": ("noop", False)}))
    for path in opts.get("requirement", []):
        rest += _requirements_file(path)[0]
    if not rest:
        raise PipError("You must give at least one requirement to uninstall (see \"pip help "
                       "uninstall\")")
    present = installed()
    for text in rest:
        req = Requirement(text)
        have = present.get(req.key)
        if not have:
            print("WARNING: Skipping %s as it is not installed." % req.name, file=sys.stderr)
            continue
        name, version, dist_info, site = have
        _say(opts, "Found existing installation: %s %s" % (name, version))
        if not opts.get("yes"):
            print("Uninstalling %s-%s:" % (name, version))
            for p in _record_paths(dist_info, site):
                print("    %s" % p)
            sys.stdout.write("Proceed (Y/n)? ")
            sys.stdout.flush()
            answer = sys.stdin.readline().strip().lower()
            if answer not in ("", "y", "yes"):
                continue
        else:
            _say(opts, "Uninstalling %s-%s:" % (name, version))
        remove_dist(dist_info, site)
        _say(opts, "  Successfully uninstalled %s-%s" % (name, version))
    return 0


def cmd_list(args):
    opts, rest = _options(args, dict(_COMMON, **{"--format": ("format", True),
                                                "--user": ("noop", False),
                                                "-l": ("noop", False), "--local": ("noop", False),
                                                "--path": ("path", True),
                                                "--not-required": ("noop", False),
                                                "-o": ("outdated", False),
                                                "--outdated": ("outdated", False),
                                                "-u": ("noop", False),
                                                "--uptodate": ("noop", False)}))
    if opts.get("outdated"):
        raise PipError("cannot look for newer versions: %s" % NO_NETWORK)
    dists = sorted(installed(opts.get("path")).values(), key=lambda d: d[0].lower())
    fmt = (opts.get("format") or ["columns"])[-1]
    if fmt == "json":
        import json
        print(json.dumps([{"name": n, "version": v} for n, v, _, _ in dists]))
    elif fmt == "freeze":
        for n, v, _, _ in dists:
            print("%s==%s" % (n, v))
    else:
        if not dists:
            return 0
        width = max(len("Package"), *(len(d[0]) for d in dists))
        vwidth = max(len("Version"), *(len(d[1]) for d in dists))
        print("%-*s %s" % (width, "Package", "Version"))
        print("%s %s" % ("-" * width, "-" * vwidth))
        for n, v, _, _ in dists:
            print("%-*s %s" % (width, n, v))
    return 0


def cmd_freeze(args):
    opts, _ = _options(args, dict(_COMMON, **{"--user": ("noop", False), "--all": ("noop", False),
                                             "-l": ("noop", False), "--local": ("noop", False),
                                             "--path": ("path", True),
                                             "--exclude-editable": ("noop", False)}))
    for n, v, _, _ in sorted(installed(opts.get("path")).values(), key=lambda d: d[0].lower()):
        print("%s==%s" % (n, v))
    return 0


def cmd_show(args):
    opts, rest = _options(args, dict(_COMMON, **{"-f": ("files", False),
                                                "--files": ("files", False)}))
    if not rest:
        raise PipError("Please provide a package name or names.")
    present = installed()
    missing = []
    first = True
    for text in rest:
        have = present.get(canonical(text))
        if not have:
            missing.append(text)
            continue
        name, version, dist_info, site = have
        with open(os.path.join(dist_info, "METADATA"), encoding="utf-8") as f:
            meta = _metadata(f.read())
        requires = sorted({Requirement(r).name for r in meta.get_all("Requires-Dist") or []
                           if Requirement(r).applies()})
        required_by = []
        for key, (other, _, other_info, _) in present.items():
            try:
                with open(os.path.join(other_info, "METADATA"), encoding="utf-8") as f:
                    deps = _metadata(f.read()).get_all("Requires-Dist") or []
            except OSError:
                continue
            if any(Requirement(d).key == canonical(name) and Requirement(d).applies()
                   for d in deps):
                required_by.append(other)
        if not first:
            print("---")
        first = False
        print("Name: %s" % name)
        print("Version: %s" % version)
        print("Summary: %s" % (meta.get("Summary") or ""))
        print("Home-page: %s" % (meta.get("Home-page") or ""))
        print("Author: %s" % (meta.get("Author") or ""))
        print("Author-email: %s" % (meta.get("Author-email") or ""))
        print("License: %s" % (meta.get("License") or ""))
        print("Location: %s" % site)
        print("Requires: %s" % ", ".join(requires))
        print("Required-by: %s" % ", ".join(sorted(required_by)))
        if opts.get("files"):
            print("Files:")
            for p in _record_paths(dist_info, site)[:-1]:
                print("  %s" % os.path.relpath(p, site))
    if missing:
        print("WARNING: Package(s) not found: %s" % ", ".join(missing), file=sys.stderr)
        return 1
    return 0


USAGE = """
Usage:
  pip <command> [options]

Commands:
  install                     Install packages (wheel files, and wheels found in
                              --find-links directories; this sandbox has no network).
  uninstall                   Uninstall packages.
  list                        List installed packages.
  freeze                      Output installed packages in requirements format.
  show                        Show information about installed packages.
  help                        Show help for commands.

General Options:
  -h, --help                  Show help.
  -V, --version               Show version and exit.
  -q, --quiet                 Give less output.
"""

COMMANDS = {"install": cmd_install, "uninstall": cmd_uninstall, "list": cmd_list,
            "freeze": cmd_freeze, "show": cmd_show}


def main(args):
    """Runs pip with `args` (without the program name); returns the exit status."""
    while args and args[0] in ("-q", "--quiet", "-v", "--verbose", "--isolated",
                               "--disable-pip-version-check", "--no-cache-dir", "--no-input",
                               "--no-color"):
        args = args[1:]
    if not args or args[0] in ("-h", "--help", "help") and len(args) == 1:
        print(USAGE.strip("\n"))
        return 0 if args else 1
    if args[0] in ("-V", "--version"):
        print(VERSION)
        return 0
    command, rest = args[0], args[1:]
    if command == "help":
        command, rest = rest[0], ["--help"]
    if command in ("download", "wheel", "index", "search", "hash", "cache", "config",
                   "debug", "inspect", "check"):
        if command == "check":
            return _check()
        print("ERROR: pip %s is not available: %s" % (command, NO_NETWORK), file=sys.stderr)
        return 1
    fn = COMMANDS.get(command)
    if fn is None:
        print("ERROR: unknown command \"%s\"" % command, file=sys.stderr)
        return 1
    if "-h" in rest or "--help" in rest:
        print(USAGE.strip("\n"))
        return 0
    try:
        return fn(rest)
    except PipError as e:
        print("ERROR: %s" % e, file=sys.stderr)
        return 1
    except (OSError, zipfile.BadZipFile) as e:
        print("ERROR: %s" % e, file=sys.stderr)
        return 1


def _check():
    present = installed()
    broken = 0
    for key, (name, version, dist_info, _) in sorted(present.items()):
        try:
            with open(os.path.join(dist_info, "METADATA"), encoding="utf-8") as f:
                deps = _metadata(f.read()).get_all("Requires-Dist") or []
        except OSError:
            continue
        for d in deps:
            req = Requirement(d)
            if not req.applies():
                continue
            have = present.get(req.key)
            if not have:
                print("%s %s requires %s, which is not installed." % (name, version, req.name))
                broken = 1
            elif req.spec and not spec_allows(req.spec, have[1]):
                print("%s %s has requirement %s, but you have %s %s." % (
                    name, version, req.display(), have[0], have[1]))
                broken = 1
    if not broken:
        print("No broken requirements found.")
    return broken


def add_site_dir(path):
    """Puts a site directory on `sys.path` with its `.pth` files, as `site` does."""
    if path in sys.path or not os.path.isdir(path):
        return
    sys.path.append(path)
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".pth") and not n.startswith("."))
    except OSError:
        return
    for name in names:
        try:
            with open(os.path.join(path, name), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith(("import ", "import\t")):
                try:
                    exec(line)
                except Exception as e:
                    print("Error processing line of %s: %s" % (name, e), file=sys.stderr)
                continue
            entry = os.path.normpath(os.path.join(path, line.rstrip()))
            if os.path.exists(entry) and entry not in sys.path:
                sys.path.append(entry)
