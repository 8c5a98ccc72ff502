"""`sqlite3`: the SQLite command-line shell over the SQLite inside CPython's `sqlite3`
module, with the shell's output modes, dot commands and messages (as sqlite3 3.40 prints
them), so that `sqlite3 app.db ".tables"`, `sqlite3 -header -csv app.db "select ..."` and
`sqlite3 app.db < schema.sql` work in the sandbox."""

import csv
import io
import json
import os
import sqlite3
import sys
import time

USAGE = """Usage: sqlite3 [OPTIONS] FILENAME [SQL...]
FILENAME is the name of an SQLite database. A new database is created
if the file does not previously exist. Defaults to :memory:.
OPTIONS include:
   -bail                stop after hitting an error
   -batch               force batch I/O
   -box                 set output mode to 'box'
   -column              set output mode to 'column'
   -cmd COMMAND         run "COMMAND" before reading stdin
   -csv                 set output mode to 'csv'
   -echo                print inputs before execution
   -header              turn headers on
   -help                show this message
   -html                set output mode to HTML
   -json                set output mode to 'json'
   -line                set output mode to 'line'
   -list                set output mode to 'list'
   -markdown            set output mode to 'markdown'
   -newline SEP         set output row separator. Default: '\\n'
   -noheader            turn headers off
   -nullvalue TEXT      set text string for NULL values. Default ''
   -quote               set output mode to 'quote'
   -readonly            open the database read-only
   -separator SEP       set output column separator. Default: '|'
   -table               set output mode to 'table'
   -tabs                set output mode to 'tabs'
   -version             show SQLite version"""

HELP = """.bail on|off             Stop after hitting an error.  Default OFF
.changes on|off          Show number of rows changed by SQL
.dump ?OBJECTS?          Render database content as SQL
.echo on|off             Turn command echo on or off
.exit ?CODE?             Exit this program with return-code CODE
.headers on|off          Turn display of headers on or off
.help                    Show this message
.import FILE TABLE       Import data from FILE into TABLE
.indexes ?TABLE?         Show names of indexes
.mode MODE ?TABLE?       Set output mode (box column csv html insert json line list
                           markdown quote table tabs)
.nullvalue STRING        Use STRING in place of NULL values
.once FILE               Output for the next SQL command only to FILE
.output ?FILE?           Send output to FILE or stdout if FILE is omitted
.print STRING...         Print literal STRING
.quit                    Exit this program
.read FILE               Read input from FILE
.schema ?PATTERN?        Show the CREATE statements matching PATTERN
.separator COL ?ROW?     Change the column and row separators
.show                    Show the current values for various settings
.tables ?TABLE?          List names of tables matching LIKE pattern TABLE
.timer on|off            Turn SQL timer on or off
.width NUM1 NUM2 ...     Set minimum column widths for columnar output"""

MODES = ("box", "column", "csv", "html", "insert", "json", "line", "list", "markdown",
         "quote", "table", "tabs")


def real(v):
    """A REAL as the shell prints it (`%!.15g`: at least one digit after the point)."""
    if v != v:
        return ""
    if v in (float("inf"), float("-inf")):
        return "Inf" if v > 0 else "-Inf"
    s = "%.15g" % v
    mant, _, exp = s.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + ("e" + exp if exp else "")


def literal(v):
    """A value as an SQL literal (`.dump`, the insert and quote modes)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return real(v) if float(real(v)) == v else repr(v)
    if isinstance(v, bytes):
        return "X'" + v.hex().upper() + "'"
    return "'" + v.replace("'", "''") + "'"


# Options that set a setting of the shell to their argument.
VALUE_OPTIONS = {"separator": "sep", "newline": "rowsep", "nullvalue": "null"}


class Quit(Exception):
    def __init__(self, code):
        self.code = code


class Shell:
    def __init__(self):
        self.mode = "list"
        self.headers = False
        self.sep = "|"
        self.rowsep = "\n"
        self.null = ""
        self.bail = False
        self.echo = False
        self.changes = False
        self.timer = False
        self.widths = []
        self.out = sys.stdout
        self.once = False
        self.insert_table = "table"
        self.db = None
        self.path = ":memory:"
        self.readonly = False
        self.failed = False
        # The exit status after an error in SQL from the command line: 1, or a failed
        # step's result code (19 for a constraint), as sqlite3 exits.
        self.status = 1

    def open(self):
        if self.db is None:
            if self.readonly and self.path != ":memory:":
                uri = "file:%s?mode=ro" % self.path
                self.db = sqlite3.connect(uri, uri=True, isolation_level=None)
            else:
                self.db = sqlite3.connect(self.path, isolation_level=None)
        return self.db

    def text(self, v):
        if v is None:
            return self.null
        if isinstance(v, float):
            return real(v)
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        return str(v)

    def set_mode(self, mode, dot=False):
        """`-MODE` or, with `dot`, `.mode MODE` (whose csv rows end in CRLF, as RFC 4180
        has them)."""
        if mode not in MODES:
            return False
        if mode == "csv":
            self.sep, self.rowsep = ",", "\r\n" if dot else "\n"
        elif mode == "tabs":
            self.sep, self.mode = "\t", "list"
            return True
        elif mode == "list" and self.mode in ("csv",):
            self.sep = "|"
        self.mode = mode
        return True

    def write(self, s):
        self.out.write(s)

    # ------------------------------------------------------------ results

    def show(self, names, rows):
        m = self.mode
        if m == "list":
            if self.headers:
                self.write(self.sep.join(names) + self.rowsep)
            for r in rows:
                self.write(self.sep.join(self.text(v) for v in r) + self.rowsep)
        elif m == "csv":
            buf = io.StringIO()
            w = csv.writer(buf, delimiter=self.sep, lineterminator=self.rowsep,
                           quoting=csv.QUOTE_MINIMAL)
            if self.headers:
                w.writerow(names)
            for r in rows:
                w.writerow([self.text(v) for v in r])
            self.write(buf.getvalue())
        elif m == "json":
            if not rows:
                return
            parts = []
            for r in rows:
                fields = []
                for n, v in zip(names, r):
                    if isinstance(v, float):
                        val = real(v)
                    elif isinstance(v, bytes):
                        val = json.dumps(v.decode("latin-1"))
                    else:
                        val = json.dumps(v, ensure_ascii=False)
                    fields.append(json.dumps(n, ensure_ascii=False) + ":" + val)
                parts.append("{" + ",".join(fields) + "}")
            self.write("[" + ",\n".join(parts) + "]\n")
        elif m == "line":
            width = max([5] + [len(n) for n in names])
            for i, r in enumerate(rows):
                if i:
                    self.write("\n")
                for n, v in zip(names, r):
                    self.write("%*s = %s\n" % (width, n, self.text(v)))
        elif m in ("column", "table", "box", "markdown"):
            self.grid(names, rows)
        elif m == "quote":
            if self.headers:
                self.write(",".join("'%s'" % n.replace("'", "''") for n in names) + "\n")
            for r in rows:
                self.write(",".join(literal(v) for v in r) + "\n")
        elif m == "insert":
            for r in rows:
                self.write("INSERT INTO %s VALUES(%s);\n"
                           % (self.insert_table, ",".join(literal(v) for v in r)))
        elif m == "html":
            esc = lambda s: (s.replace("&", "&amp;").replace("<", "&lt;")  # noqa: E731
                             .replace(">", "&gt;").replace('"', "&quot;"))
            if self.headers:
                self.write("<TR>" + "".join("<TH>%s</TH>\n" % esc(n) for n in names) + "</TR>\n")
            for r in rows:
                self.write("<TR>" + "".join("<TD>%s</TD>\n" % esc(self.text(v)) for v in r)
                           + "</TR>\n")

    def grid(self, names, rows):
        cells = [[self.text(v) for v in r] for r in rows]
        widths = []
        for i, n in enumerate(names):
            w = max([len(n)] + [len(c[i]) for c in cells])
            if i < len(self.widths) and self.widths[i]:
                w = max(w, abs(self.widths[i]))
            widths.append(w)
        pad = lambda s, w: s + " " * (w - len(s))  # noqa: E731
        m = self.mode
        if m == "column":
            if not rows:
                return
            if self.headers:
                self.write("  ".join(pad(n, w) for n, w in zip(names, widths)) + "\n")
                self.write("  ".join("-" * w for w in widths) + "\n")
            for c in cells:
                self.write("  ".join(pad(v, w) for v, w in zip(c, widths)) + "\n")
            return
        if not rows:
            return
        if m == "markdown":
            self.write("| " + " | ".join(pad(n, w) for n, w in zip(names, widths)) + " |\n")
            self.write("|" + "|".join("-" * (w + 2) for w in widths) + "|\n")
            for c in cells:
                self.write("| " + " | ".join(pad(v, w) for v, w in zip(c, widths)) + " |\n")
            return
        if m == "table":
            line = "+" + "+".join("-" * (w + 2) for w in widths) + "+\n"
            self.write(line)
            self.write("| " + " | ".join(pad(n, w) for n, w in zip(names, widths)) + " |\n")
            self.write(line)
            for c in cells:
                self.write("| " + " | ".join(pad(v, w) for v, w in zip(c, widths)) + " |\n")
            self.write(line)
            return
        bar = lambda l, m_, r: l + m_.join("\u2500" * (w + 2) for w in widths) + r + "\n"  # noqa: E731
        self.write(bar("\u250c", "\u252c", "\u2510"))
        self.write("\u2502 " + " \u2502 ".join(pad(n, w) for n, w in zip(names, widths))
                   + " \u2502\n")
        self.write(bar("\u251c", "\u253c", "\u2524"))
        for c in cells:
            self.write("\u2502 " + " \u2502 ".join(pad(v, w) for v, w in zip(c, widths))
                       + " \u2502\n")
        self.write(bar("\u2514", "\u2534", "\u2518"))

    # ------------------------------------------------------------ SQL

    def statements(self, sql):
        """`sql` cut into complete statements (a `;` inside a string or a trigger body
        does not end one); the unfinished rest last, when there is one."""
        out, start = [], 0
        for i, ch in enumerate(sql):
            if ch == ";" and sqlite3.complete_statement(sql[start:i + 1]):
                out.append(sql[start:i + 1])
                start = i + 1
        rest = sql[start:]
        if rest.strip():
            out.append(rest)
        return out

    def run_sql(self, sql, line=None):
        """Runs every statement of `sql`; `False` after an error."""
        ok = True
        for stmt in self.statements(sql):
            if not stmt.strip() or stmt.strip() == ";":
                continue
            # sqlite3 echoes what it reads (stdin, `.read`), not SQL given as an argument.
            if self.echo and line is not None:
                self.write(stmt.strip() + "\n")
            began = (time.perf_counter(), time.process_time())
            try:
                db = self.open()
                cur = db.execute(stmt)
                if cur.description:
                    names = [d[0] for d in cur.description]
                    self.show(names, cur.fetchall())
                if self.changes:
                    self.write("changes: %d   total_changes: %d\n"
                               % (max(cur.rowcount, 0), db.total_changes))
            except sqlite3.Warning as e:
                self.error(str(e), line, "prepare")
                ok = False
            except sqlite3.Error as e:
                msg = str(e)
                if "incomplete input" in msg or not sqlite3.complete_statement(stmt + ";"):
                    msg = "incomplete input"
                runtime = isinstance(e, (sqlite3.IntegrityError, sqlite3.DataError))
                code = getattr(e, "sqlite_errorcode", None)
                if runtime and code is not None:
                    msg += " (%d)" % (code & 0xff)
                    self.status = code & 0xff
                self.error(msg, line, "stepping" if runtime else "prepare")
                if not runtime:
                    self.context(stmt, msg)
                ok = False
            finally:
                if self.once:
                    self.close_output()
                if self.timer:
                    # The process's CPU time is not split into user and system here.
                    self.write("Run Time: real %.3f user %.6f sys %.6f\n" % (
                        time.perf_counter() - began[0], time.process_time() - began[1], 0.0))
            if not ok and self.bail:
                break
        return ok

    def error(self, msg, line, stage):
        self.failed = True
        sys.stdout.flush()
        if line is None and stage == "stepping":
            print("Error: stepping, %s" % msg, file=sys.stderr)
        elif line is None:
            print("Error: in %s, %s" % (stage, msg), file=sys.stderr)
        elif stage == "stepping":
            print("Runtime error near line %d: %s" % (line, msg), file=sys.stderr)
        else:
            print("Parse error near line %d: %s" % (line, msg), file=sys.stderr)

    def context(self, stmt, msg):
        """The statement and a caret under the token an error names, as sqlite3 shows
        them (`^--- error here`) when SQLite knows where the error is."""
        import re
        m = (re.match(r'near "(.+)": syntax error$', msg)
             or re.match(r"(?:table|index|view|trigger) (\S+) already exists$", msg)
             or re.match(r"no such (?:column|function): (\S+)$", msg))
        if not m:
            return
        text = " ".join(stmt.strip().splitlines()).rstrip()
        word = m.group(1)
        for at in re.finditer(re.escape(word), text, re.IGNORECASE):
            i, j = at.start(), at.end()
            ident = lambda c: c.isalnum() or c == "_"  # noqa: E731
            if (i == 0 or not ident(text[i - 1]) or not ident(word[0])) and \
                    (j == len(text) or not ident(text[j]) or not ident(word[-1])):
                print("  %s\n  %s^--- error here" % (text, " " * i), file=sys.stderr)
                return

    def close_output(self):
        if self.out is not sys.stdout:
            self.out.close()
        self.out = sys.stdout
        self.once = False

    # ------------------------------------------------------------ dot commands

    def dot(self, line):
        """A dot command; `False` after an error."""
        try:
            import shlex
            args = shlex.split(line[1:])
        except ValueError:
            args = line[1:].split()
        if not args:
            return True
        cmd, rest = args[0], args[1:]

        def onoff(v):
            return v.lower() in ("on", "1", "yes", "true")

        if cmd in ("quit", "q"):
            raise Quit(0)
        if cmd == "exit":
            raise Quit(int(rest[0]) if rest and rest[0].lstrip("-").isdigit() else 0)
        if cmd in ("headers", "header", "h") and rest:
            self.headers = onoff(rest[0])
        elif cmd == "mode" and rest:
            if not self.set_mode(rest[0], dot=True):
                print('Error: mode should be one of: %s' % " ".join(MODES), file=sys.stderr)
                return False
            if rest[0] == "insert" and len(rest) > 1:
                self.insert_table = rest[1]
        elif cmd == "mode":
            self.write("current output mode: %s\n" % self.mode)
        elif cmd == "separator" and rest:
            self.sep = rest[0].encode().decode("unicode_escape")
            if len(rest) > 1:
                self.rowsep = rest[1].encode().decode("unicode_escape")
        elif cmd == "nullvalue" and rest:
            self.null = rest[0]
        elif cmd in ("bail", "echo", "changes", "timer") and rest:
            setattr(self, cmd, onoff(rest[0]))
        elif cmd == "width":
            self.widths = [int(w) for w in rest if w.lstrip("-").isdigit()]
        elif cmd == "print":
            self.write(" ".join(rest) + "\n")
        elif cmd == "help":
            self.write(HELP + "\n")
        elif cmd in ("tables", "table"):
            self.tables(rest[0] if rest else None)
        elif cmd == "schema":
            self.schema(rest[0] if rest else None)
        elif cmd in ("indexes", "indices"):
            q = "SELECT name FROM sqlite_schema WHERE type='index'"
            params = ()
            if rest:
                q += " AND tbl_name LIKE ?"
                params = (rest[0],)
            for (n,) in self.open().execute(q + " ORDER BY 1", params):
                self.write(n + "\n")
        elif cmd == "dump":
            self.dump(rest)
        elif cmd == "read" and rest:
            try:
                with open(rest[0], encoding="utf-8", errors="replace") as f:
                    return self.script(f.read())
            except OSError:
                print("Error: cannot open \"%s\"" % rest[0], file=sys.stderr)
                return False
        elif cmd == "import" and rest:
            return self.import_(rest)
        elif cmd in ("output", "once"):
            if self.out is not sys.stdout:
                self.out.close()
            self.out = sys.stdout
            if rest and rest[0] != "stdout":
                try:
                    self.out = open(rest[0], "w", encoding="utf-8")
                except OSError:
                    print("Error: cannot open \"%s\"" % rest[0], file=sys.stderr)
                    return False
                self.once = cmd == "once"
        elif cmd == "databases":
            for _, name, file in self.open().execute("PRAGMA database_list"):
                self.write("%s: %s r/w\n" % (name, file or '""'))
        elif cmd == "show":
            for k, v in (("echo", "on" if self.echo else "off"),
                         ("headers", "on" if self.headers else "off"),
                         ("mode", self.mode), ("nullvalue", '"%s"' % self.null),
                         ("output", "stdout"), ("colseparator", json.dumps(self.sep)),
                         ("rowseparator", json.dumps(self.rowsep))):
                self.write("%12s: %s\n" % (k, v))
        else:
            print('Error: unknown command or invalid arguments:  "%s". Enter ".help" for help'
                  % cmd, file=sys.stderr)
            return False
        return True

    def tables(self, pattern):
        q = ("SELECT name FROM sqlite_schema WHERE type IN ('table','view') "
             "AND name NOT LIKE 'sqlite_%'")
        params = ()
        if pattern:
            q += " AND name LIKE ?"
            params = (pattern,)
        names = [n for (n,) in self.open().execute(q + " ORDER BY 1", params)]
        if not names:
            return
        width = max(len(n) for n in names)
        cols = max(1, 80 // (width + 2))
        rows = (len(names) + cols - 1) // cols
        for i in range(rows):
            line = "  ".join("%-*s" % (width, names[j]) for j in range(i, len(names), rows))
            self.write(line + "\n")

    def schema(self, pattern):
        q = "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
        params = ()
        if pattern:
            q += " AND (name LIKE ? OR tbl_name LIKE ?)"
            params = (pattern, pattern)
        for (sql,) in self.open().execute(q + " ORDER BY rowid", params):
            self.write(shown_sql(sql) + ";\n")

    def dump(self, objects):
        db = self.open()
        self.write("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")
        entries = list(db.execute(
            "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"))
        if objects:
            entries = [e for e in entries if any(_like(o, e[1]) for o in objects)]
        for kind, name, sql in entries:
            if kind != "table":
                continue
            self.write(shown_sql(sql) + ";\n")
            quoted = '"%s"' % name.replace('"', '""')
            shown = name if name.isidentifier() else quoted
            for row in db.execute("SELECT * FROM " + quoted):
                self.write("INSERT INTO %s VALUES(%s);\n"
                           % (shown, ",".join(literal(v) for v in row)))
        for kind, name, sql in entries:
            if kind != "table":
                self.write(sql + ";\n")
        self.write("COMMIT;\n")

    def import_(self, args):
        opts = [a for a in args if a.startswith("--")]
        rest = [a for a in args if not a.startswith("--")]
        skip = 0
        if "--skip" in args:
            i = args.index("--skip")
            skip = int(args[i + 1]) if i + 1 < len(args) else 0
            rest = [a for a in rest if a != args[i + 1]]
        if len(rest) != 2:
            print("Usage: .import FILE TABLE", file=sys.stderr)
            return False
        path, table = rest
        sep = "," if ("--csv" in opts or self.mode == "csv") else self.sep
        try:
            with open(path, newline="", encoding="utf-8", errors="replace") as f:
                rows = list(csv.reader(f, delimiter=sep))
        except OSError:
            print("Error: cannot open \"%s\"" % path, file=sys.stderr)
            return False
        rows = rows[skip:]
        db = self.open()
        quoted = '"%s"' % table.replace('"', '""')
        exists = db.execute("SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?",
                            (table,)).fetchone()
        if not exists:
            if not rows:
                return True
            header, rows = rows[0], rows[1:]
            cols = ", ".join('"%s" TEXT' % c.replace('"', '""') for c in header)
            db.execute("CREATE TABLE %s(\n%s)" % (quoted, cols))
        ncol = len(db.execute("SELECT * FROM %s LIMIT 0" % quoted).description)
        db.execute("BEGIN")
        for n, r in enumerate(rows, 1 + skip):
            if len(r) != ncol:
                print("%s:%d: expected %d columns but found %d - %s"
                      % (path, n, ncol, len(r),
                         "filling the rest with NULL" if len(r) < ncol else "extras ignored"),
                      file=sys.stderr)
                r = (r + [None] * ncol)[:ncol]
            db.execute("INSERT INTO %s VALUES(%s)" % (quoted, ",".join("?" * ncol)), r)
        db.execute("COMMIT")
        if sep == ",":
            # As sqlite3 3.40 leaves it after a CSV import.
            self.rowsep = "\n"
        return True

    # ------------------------------------------------------------ input

    def script(self, text):
        """Runs lines of input (stdin, `.read`): dot commands, and SQL once a statement is
        complete; `False` after an error."""
        ok = True
        buf, start = "", 0
        for n, line in enumerate(text.splitlines(), 1):
            if not buf and line.lstrip().startswith("."):
                if self.echo:
                    self.write(line.strip() + "\n")
                if not self.dot(line.strip()):
                    ok = False
                    if self.bail:
                        return False
                continue
            if not buf:
                start = n
            buf += line + "\n"
            if sqlite3.complete_statement(buf):
                if not self.run_sql(buf, start):
                    ok = False
                    if self.bail:
                        return False
                buf = ""
        if buf.strip():
            if not self.run_sql(buf, start):
                ok = False
        return ok


def shown_sql(sql):
    """A table's CREATE statement as `.schema` and `.dump` print it: a quoted name gets
    `IF NOT EXISTS`."""
    if sql.startswith('CREATE TABLE "'):
        return 'CREATE TABLE IF NOT EXISTS ' + sql[len("CREATE TABLE "):]
    return sql


def _like(pattern, name):
    import fnmatch
    return fnmatch.fnmatchcase(name.lower(), pattern.lower().replace("%", "*").replace("_", "?"))


def main(args):
    sh = Shell()
    cmds, sql, path = [], [], None
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a.startswith("-") and len(a) > 1:
            opt = a.lstrip("-")
            if opt in MODES:
                sh.set_mode(opt)
            elif opt == "header":
                sh.headers = True
            elif opt == "noheader":
                sh.headers = False
            elif opt in VALUE_OPTIONS or opt in ("cmd", "init"):
                if i >= len(args):
                    print("sqlite3: Error: missing argument to %s" % a, file=sys.stderr)
                    return 1
                v = args[i]
                i += 1
                if opt in VALUE_OPTIONS:
                    setattr(sh, VALUE_OPTIONS[opt], v)
                elif opt == "cmd":
                    cmds.append(v)
                else:
                    try:
                        with open(v, encoding="utf-8") as f:
                            cmds.append(f.read())
                    except OSError:
                        pass
            elif opt in ("bail", "echo", "readonly"):
                setattr(sh, opt, True)
            elif opt in ("batch", "interactive", "safe", "nofollow", "memtrace", "stats"):
                pass
            elif opt == "version":
                print(sqlite3.sqlite_version)
                return 0
            elif opt == "help":
                print(USAGE, file=sys.stderr)
                return 0
            else:
                print("sqlite3: Error: unknown option: %s\nUse -help for a list of options."
                      % a, file=sys.stderr)
                return 1
        elif path is None:
            path = a
        else:
            sql.append(a)
    sh.path = path or ":memory:"
    try:
        sh.open()
    except sqlite3.Error as e:
        print("Error: unable to open database \"%s\": %s" % (sh.path, e), file=sys.stderr)
        return 1
    try:
        for c in cmds:
            ok = sh.dot(c) if c.startswith(".") else sh.script(c)
            if not ok and sh.bail:
                return 1
        if sql:
            for s in sql:
                ok = sh.dot(s) if s.startswith(".") else sh.run_sql(s)
                if not ok:
                    return sh.status
            return 0
        text = sys.stdin.read()
        sh.script(text)
        return 1 if sh.failed else 0
    except Quit as q:
        return q.code
    finally:
        sys.stdout.flush()
        if sh.db is not None:
            sh.db.close()
