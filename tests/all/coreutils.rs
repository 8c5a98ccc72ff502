//! Every applet of the multi-call coreutils program answers, under each name it has.

use crate::support::runtime::sh;
use wasbox_runtime::JobSpec;

/// (command, expected stdout). Every applet of guest-components/coreutils/applets.txt
/// must appear here (checked below).
const APPLETS: &[(&str, &str, &str)] = &[
    (
        "awk",
        "printf '1 2\\n3 4\\n' | /usr/bin/awk '{ s += $2 } END { print s }'",
        "6\n",
    ),
    ("cat", "printf 'a\\nb\\n' > f; cat f", "a\nb\n"),
    (
        "cmp",
        "echo abc > a; echo abd > b; cmp a b; cmp -s a a && echo same",
        "a b differ: char 3, line 1\nsame\n",
    ),
    ("du", "printf 12345 > f; du -b f; du -k f", "5\tf\n4\tf\n"),
    (
        "mktemp",
        "f=$(mktemp); test -f $f && echo ${f%.*}; d=$(mktemp -d -p /workspace); test -d $d && echo dir",
        "/tmp/tmp\ndir\n",
    ),
    (
        "stat",
        "printf 12345 > f; chmod 640 f; stat -c '%n %s %a %A %F' f",
        "f 5 640 -rw-r----- regular file\n",
    ),
    (
        "timeout",
        "timeout 5 echo fast; timeout 0.1 sleep 10; echo $?",
        "fast\n124\n",
    ),
    ("cp", "echo x > f; cp f g; cat g", "x\n"),
    (
        "sudo",
        "sudo echo hi; sudo -E -u root -- FOO=bar sh -c 'echo $FOO'; sudo -D /tmp pwd; sudo -n true && echo ok; sudo -Z x 2>/dev/null; echo $?; sudo; echo $?",
        "hi\nbar\n/tmp\nok\n1\n1\n",
    ),
    (
        "tput",
        "COLUMNS=100 LINES=30 tput cols; LINES=30 tput lines; TERM=xterm-256color tput colors; TERM=xterm tput setaf 1 | od -An -c | tr -s ' '; TERM=xterm tput cup 2 3 | od -An -c | tr -s ' '; TERM=xterm tput nope; echo $?; unset TERM; tput bold; echo $?",
        "100\n30\n256\n 033 [ 3 1 m\n 033 [ 3 ; 4 H\n4\n2\n",
    ),
    ("cut", "echo a:b:c | cut -d: -f2", "b\n"),
    ("echo", "/bin/echo -n hi; /usr/bin/echo", "hi\n"),
    ("env", "env -i A=1 B=2 env", "A=1\nB=2\n"),
    ("false", "/bin/false; echo $?", "1\n"),
    ("head", "seq 10 | head -n 2", "1\n2\n"),
    ("ln", "echo x > f; ln -s f l; cat l", "x\n"),
    ("ls", "touch b a; ls", "a\nb\n"),
    (
        "mkdir",
        "mkdir -p x/y /workspace/z/w && ls -d x/y z/w",
        "x/y\nz/w\n",
    ),
    ("mv", "echo x > f; mv f g; cat g; ls", "x\ng\n"),
    ("printenv", "A=5 printenv A", "5\n"),
    ("pwd", "mkdir d; cd d; /bin/pwd", "/workspace/d\n"),
    ("rm", "touch f; rm f; ls | wc -l", "0\n"),
    ("seq", "seq 2 2 6", "2\n4\n6\n"),
    ("sleep", "sleep 0.1 && echo slept", "slept\n"),
    ("sort", "printf '10\\n9\\n' | sort -n", "9\n10\n"),
    ("tail", "seq 5 | tail -n 2", "4\n5\n"),
    ("touch", "touch t; ls", "t\n"),
    ("tr", "echo abc | tr a-z A-Z", "ABC\n"),
    ("true", "/bin/true; echo $?", "0\n"),
    (
        "uniq",
        "printf 'a\\na\\nb\\n' | uniq -c",
        "      2 a\n      1 b\n",
    ),
    ("wc", "printf 'a b\\nc\\n' | wc -w", "3\n"),
    ("yes", "yes x | head -2", "x\nx\n"),
    ("basename", "basename /a/b/c.txt .txt", "c\n"),
    ("base64", "printf hi | base64", "aGk=\n"),
    (
        "chmod",
        "touch s; chmod +x s && chmod 644 s && echo ok",
        "ok\n",
    ),
    (
        "comm",
        "printf 'a\\nb\\n' > x; printf 'b\\nc\\n' > y; comm x y",
        "a\n\t\tb\n\tc\n",
    ),
    ("date", "date -u -d @0 +%Y-%m-%d", "1970-01-01\n"),
    ("dirname", "dirname /a/b/c", "/a/b\n"),
    ("expr", "expr 2 + 3", "5\n"),
    ("fold", "echo abcdef | fold -w 2", "ab\ncd\nef\n"),
    (
        "md5sum",
        "printf abc | md5sum",
        "900150983cd24fb0d6963f7d28e17f72  -\n",
    ),
    ("nl", "printf 'a\\nb\\n' | nl", "     1\ta\n     2\tb\n"),
    ("od", "printf AB | od -c", "0000000   A   B\n0000002\n"),
    (
        "paste",
        "printf '1\\n2\\n' > a; printf 'x\\ny\\n' > b; paste a b",
        "1\tx\n2\ty\n",
    ),
    (
        "printf",
        "/bin/printf '%05.1f|%s\\n' 3.14159 x",
        "003.1|x\n",
    ),
    ("readlink", "ln -s target l; readlink l", "target\n"),
    (
        "realpath",
        "mkdir -p d/e; cd d; realpath e",
        "/workspace/d/e\n",
    ),
    ("rmdir", "mkdir e; rmdir e; ls | wc -l", "0\n"),
    (
        "sha256sum",
        "printf abc | sha256sum",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\n",
    ),
    ("tac", "seq 3 | tac", "3\n2\n1\n"),
    ("tee", "echo hi | tee f > /dev/null; cat f", "hi\n"),
    ("test", "/usr/bin/test 2 -gt 1 && echo yes", "yes\n"),
    ("[", "/usr/bin/[ a = a ] && echo same", "same\n"),
    (
        "truncate",
        "echo hello > f; truncate -s 2 f; cat f; echo",
        "he\n",
    ),
    (
        "grep",
        "printf 'apple\\nbanana\\ncherry\\n' > f; grep -n an f",
        "2:banana\n",
    ),
    (
        "egrep",
        "printf 'a1\\nb22\\nc\\n' | egrep '[0-9]+$'",
        "a1\nb22\n",
    ),
    ("fgrep", "printf 'a.b\\naxb\\n' | fgrep .", "a.b\n"),
    ("rev", "echo abc | rev", "cba\n"),
    ("find", "mkdir d; touch d/x; find d -type f", "d/x\n"),
    ("xargs", "echo a b | xargs -n1 echo", "a\nb\n"),
    ("sed", "echo abc | sed 's/b/B/'", "aBc\n"),
    (
        "diff",
        "echo a > x; echo b > y; diff x y; echo $?",
        "1c1\n< a\n---\n> b\n1\n",
    ),
    (
        "sha1sum",
        "printf abc | sha1sum",
        "a9993e364706816aba3e25717850c26c9cd0d89d  -\n",
    ),
    (
        "sha512sum",
        "printf abc | sha512sum | cut -c1-16",
        "ddaf35a193617aba\n",
    ),
    (
        "b2sum",
        "printf abc | b2sum | cut -c1-16",
        "ba80a53f981c4d0d\n",
    ),
    ("cksum", "printf abc | cksum", "1219131554 3\n"),
    ("base32", "printf hello | base32", "NBSWY3DP\n"),
    (
        "join",
        "printf '1 a\\n2 b\\n' > x; printf '1 X\\n2 Y\\n' > y; join x y",
        "1 a X\n2 b Y\n",
    ),
    ("expand", "printf 'a\\tb\\n' | expand -t 4", "a   b\n"),
    ("unexpand", "printf 'a       b\\n' | unexpand -a", "a\tb\n"),
    ("shuf", "seq 5 | shuf | sort -n | tr -d '\\n'", "12345"),
    ("numfmt", "numfmt --to=iec 1048576", "1.0M\n"),
    ("split", "seq 5 | split -l 2; cat xab", "3\n4\n"),
    // csplit (GNU coreutils manual 7.4): pieces at a line number and at each match of a
    // pattern repeated `{N}` times, their sizes printed unless `-s`.
    (
        "csplit",
        "seq 20 | csplit - '/5/' '{1}'; ls xx*; csplit -s -f p numbers 2 2>&1; seq 5 > n && csplit -s -f p n 3 && cat p00",
        "8\n25\n18\nxx00\nxx01\nxx02\ncsplit: cannot open 'numbers' for reading: No such file or directory\n1\n2\n",
    ),
    (
        "factor",
        "factor 12 97 100; echo 360 | factor",
        "12: 2 2 3\n97: 97\n100: 2 2 5 5\n360: 2 2 2 3 3 5\n",
    ),
    ("link", "echo hi > f; link f g; cat g", "hi\n"),
    (
        "unlink",
        "echo hi > f; unlink f; ls; unlink f 2>&1; echo $?",
        "unlink: cannot unlink 'f': No such file or directory\n1\n",
    ),
    // stdbuf runs the command; a sandbox's output is never held in a C library's buffer.
    (
        "stdbuf",
        "seq 3 | stdbuf -oL -e0 cat; stdbuf --output=L sh -c 'echo x'; stdbuf -o X true; echo $?; \
         stdbuf -x true 2>&1; echo $?; stdbuf -é true 2>&1; echo $?; stdbuf -oé true 2>&1; echo $?",
        "1\n2\n3\nx\n125\nstdbuf: invalid option -- 'x'\nTry 'stdbuf --help' for more information.\n125\n\
         stdbuf: invalid option -- 'é'\nTry 'stdbuf --help' for more information.\n125\n\
         stdbuf: invalid mode 'é'\n125\n",
    ),
    ("tsort", "printf 'a b\\nb c\\n' | tsort", "a\nb\nc\n"),
    ("which", "which ls sh", "/usr/bin/ls\n/usr/bin/sh\n"),
    (
        "strings",
        "printf 'abc\\0\\1defgh\\0xy\\n' | strings",
        "defgh\n",
    ),
    (
        "xxd",
        "echo hello | xxd",
        "00000000: 6865 6c6c 6f0a                           hello.\n",
    ),
    (
        "hexdump",
        "printf 'hi' | hexdump -C",
        "00000000  68 69                                             |hi|\n00000002\n",
    ),
    (
        "hd",
        "printf 'hi' | hd",
        "00000000  68 69                                             |hi|\n00000002\n",
    ),
    (
        "file",
        "printf '{\"a\": 1}\\n' > j.json; file j.json",
        "j.json: JSON text data\n",
    ),
    (
        "column",
        "printf 'a bb\\nccc d\\n' | column -t",
        "a    bb\nccc  d\n",
    ),
    ("arch", "arch", "wasm32\n"),
    (
        "shasum",
        "printf abc | shasum -a 256; printf abc | shasum; printf abc > f; shasum -a 512 f | cut -c1-16",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  -\na9993e364706816aba3e25717850c26c9cd0d89d  -\nddaf35a193617aba\n",
    ),
    (
        "uuidgen",
        "uuidgen | grep -cE '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'; uuidgen -t | grep -cE '^[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'; [ \"$(uuidgen)\" != \"$(uuidgen)\" ] && echo differ",
        "1\n1\ndiffer\n",
    ),
    ("uname", "uname; uname -m", "Linux\nwasm32\n"),
    ("nproc", "nproc", "1\n"),
    ("ps", "ps -o comm= -p 1", "sh\n"),
    ("pgrep", "sleep 2 & pgrep -x sleep; kill $!", "2\n"),
    (
        "pkill",
        "sleep 5 & pkill -x sleep; wait $!; echo $?",
        "143\n",
    ),
    (
        "getopt",
        "getopt -o ab: -l alpha,beta: -- -a -b x --alpha file",
        " -a -b 'x' --alpha -- 'file'\n",
    ),
    (
        "iconv",
        "printf 'caf\\xe9\\n' | iconv -f latin1 -t utf-8; echo 'x – y' | iconv -f utf-8 -t ascii//TRANSLIT",
        "caf\u{e9}\nx - y\n",
    ),
    (
        "killall",
        "sleep 5 & sleep 6 & killall -w sleep; echo $?; wait; killall -9 sleep 2>/dev/null; \
         echo $?; killall -q nosuch; echo $?; sleep 5 & killall -s KILL sleep; wait $!; echo $?",
        "0\n1\n1\n137\n",
    ),
    (
        "free",
        "free -b | awk 'NR == 2 { print ($2 > 0), ($3 > 0) }'",
        "1 1\n",
    ),
    (
        "top",
        "top -b -n 1 | sed -n '5p;6p' | awk '{ print $1 }'",
        "\nPID\n",
    ),
    ("id", "id", "uid=0(root) gid=0(root) groups=0(root)\n"),
    ("whoami", "whoami", "root\n"),
    ("logname", "logname", "root\n"),
    ("groups", "groups", "root\n"),
    ("hostname", "hostname", "wasbox\n"),
    ("tty", "tty || echo no", "not a tty\nno\n"),
    ("nohup", "nohup echo hi", "hi\n"),
    ("nice", "nice; nice -n 5 echo hi", "0\nhi\n"),
    ("chown", "touch f; chown root:root f && echo ok", "ok\n"),
    ("chgrp", "touch f; chgrp root f && echo ok", "ok\n"),
    ("sync", "sync && echo ok", "ok\n"),
    ("getconf", "getconf LONG_BIT", "32\n"),
    ("less", "printf 'a\\n' | less", "a\n"),
    ("more", "echo b > f; more f", "b\n"),
    (
        "dd",
        "printf 'hello world' | dd bs=5 count=1 status=none; echo",
        "hello\n",
    ),
    (
        "df",
        "df | awk '{ print $1, $NF }'",
        "Filesystem on\nsandbox /\n",
    ),
    ("gawk", "echo 'a b' | gawk '{ print $2 }'", "b\n"),
    ("mawk", "echo 'a b' | mawk '{ print $1 }'", "a\n"),
    ("nawk", "echo 3 | nawk '{ print $1 * 2 }'", "6\n"),
    (
        "tree",
        "mkdir -p d/e; touch d/f d/e/g; tree d; LANG=C.UTF-8 tree --noreport d/e",
        "d\n|-- e\n|   `-- g\n`-- f\n\n1 directory, 2 files\nd/e\n\u{2514}\u{2500}\u{2500} g\n",
    ),
    (
        "patch",
        "printf 'a\\nb\\n' > f; printf -- '--- f\\n+++ f\\n@@ -1,2 +1,2 @@\\n a\\n-b\\n+B\\n' | patch; cat f",
        "patching file f\na\nB\n",
    ),
    (
        "install",
        "echo x > s; install -D -m 640 s a/b/t; stat -c '%a %s' a/b/t",
        "640 2\n",
    ),
    ("envsubst", "echo 'v=$V ${V}' | V=1 envsubst", "v=1 1\n"),
    (
        "fmt",
        "printf 'one two\\nthree\\n' | fmt",
        "one two three\n",
    ),
    ("sum", "printf abc | sum", "16556     1\n"),
    (
        "sha224sum",
        "printf abc | sha224sum",
        "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7  -\n",
    ),
    (
        "sha384sum",
        "printf abc | sha384sum",
        "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7  -\n",
    ),
    (
        "basenc",
        "printf abc | basenc --base64url; printf hi | basenc --base16",
        "YWJj\n6869\n",
    ),
    (
        "clear",
        "TERM=xterm clear | od -An -c | tr -s ' '; TERM=xterm clear -x | od -An -c | tr -s ' '",
        " 033 [ H 033 [ 2 J 033 [ 3 J\n 033 [ H 033 [ 2 J\n",
    ),
    ("stty", "stty size; echo $?; TERM= clear; echo $?", "1\n1\n"),
    (
        "locale",
        "locale | head -3; LANG=C.UTF-8 LC_TIME=C locale | sed -n '1p;5p;15p'; locale charmap; LANG=C.UTF-8 locale charmap; locale -a | head -1",
        "LANG=\nLANGUAGE=\nLC_CTYPE=\"POSIX\"\nLANG=C.UTF-8\nLC_TIME=C\nLC_ALL=\nANSI_X3.4-1968\nUTF-8\nC\n",
    ),
];

/// On a terminal, `stty size` answers its size; what it cannot do (list or change the
/// terminal's modes, which are the host's) it refuses, saying so.
#[tokio::test]
async fn stty_tells_the_terminal_size_and_refuses_modes() {
    let out = crate::support::runtime::runtime()
        .run(
            JobSpec::shell("stty size; stty -echo; echo $?")
                .terminal(wasbox_runtime::Terminal::new(100, 30)),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "30 100\n1\n", "{out:?}");
    assert!(
        out.stderr.contains("cannot be listed or changed"),
        "{out:?}"
    );
}

#[tokio::test]
async fn every_applet_works() {
    let listed: Vec<&str> = include_str!("../../guest-components/coreutils/applets.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for name in &listed {
        assert!(
            APPLETS.iter().any(|(n, _, _)| n == name),
            "applet `{name}` has no test case"
        );
    }
    let mut failures = Vec::new();
    for (name, script, want) in APPLETS {
        assert!(listed.contains(name), "`{name}` is not in applets.txt");
        let out = sh(script).await;
        if out.stdout != *want || out.exit_code != 0 {
            failures.push(format!(
                "{name}: {script:?}\n  want {want:?}\n  got  {out:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn messages_have_no_raw_keys() {
    let out = sh("cat missing; ls missing; rm missing; head missing; sort missing").await;
    for line in out.stderr.lines() {
        assert!(
            line.contains("No such file or directory"),
            "{line:?} in {out:?}"
        );
        assert!(
            !line.contains("-error-") && !line.contains("{"),
            "raw message key: {line:?}"
        );
    }
    assert_eq!(out.stderr.lines().count(), 5, "{out:?}");
}

/// grep's options, each checked against GNU grep 3 (script, stdout, exit code).
const GREP: &[(&str, &str, i32)] = &[
    (
        "printf 'Foo\\nbar\\nfoo bar\\n' > f; grep -i foo f",
        "Foo\nfoo bar\n",
        0,
    ),
    (
        "printf 'Foo\\nbar\\nfoo bar\\n' > f; grep -c foo f; grep -v foo f",
        "1\nFoo\nbar\n",
        0,
    ),
    ("printf 'foo\\n' > f; grep nothing f", "", 1),
    ("grep x missing-file", "", 2),
    (
        "mkdir -p src/a; echo 'fn main' > src/a/m.rs; echo 'main()' > src/b.py; echo no > src/c.txt; grep -rn main src | sort",
        "src/a/m.rs:1:fn main\nsrc/b.py:1:main()\n",
        0,
    ),
    (
        "mkdir -p src; echo main > src/a.rs; echo main > src/b.py; grep -rl main --include='*.rs' .",
        "./src/a.rs\n",
        0,
    ),
    (
        "mkdir -p s; echo hit > s/x; cd s; grep -r hit",
        "x:hit\n",
        0,
    ),
    ("echo 'a1b22c333' | grep -oE '[0-9]+'", "1\n22\n333\n", 0),
    ("echo 'cat concat' | grep -ow cat", "cat\n", 0),
    // -P (Perl regular expressions, GNU grep built with PCRE2).
    (
        "echo 'version=1.2.3 x' | grep -oP 'version=\\K[\\d.]+'",
        "1.2.3\n",
        0,
    ),
    ("echo 'k: v' | grep -Po '(?<=k: ).*'", "v\n", 0),
    ("echo 'id=7;' | grep -oP '\\d+(?=;)'", "7\n", 0),
    ("echo 'aXbXc' | grep -oP 'a.*?X'", "aX\n", 0),
    ("echo 'hello hello' | grep -cP '(\\w+) \\1'", "1\n", 0),
    ("echo 'Foo bar' | grep -ioP 'foo\\b'", "Foo\n", 0),
    ("echo 'foobar' | grep -wP 'foo'", "", 1),
    ("echo x | grep -P '['", "", 2),
    ("echo foo | grep -P -e a -e b", "", 2),
    // -m stops after its matches but still prints their trailing context.
    ("printf 'a\\na\\nb\\nc\\n' | grep -m1 -A1 a", "a\na\n", 0),
    ("printf 'x\\n' | grep -q x && echo found", "found\n", 0),
    (
        "printf '1\\n2\\n3\\n4\\n5\\n' | grep -A1 -B1 3",
        "2\n3\n4\n",
        0,
    ),
    ("printf 'ab\\n' | grep 'a\\(b\\)'", "ab\n", 0),
    ("printf 'a+b\\nab\\n' | grep 'a+b'", "a+b\n", 0),
    ("printf 'x1\\ny\\n' | grep -L x - ; echo $?", "0\n", 0),
    (
        "printf 'one\\ntwo\\n' > f; grep -x two f; grep -e one -e two -c f",
        "two\n2\n",
        0,
    ),
    (
        "printf 'a\\nb\\n' > f1; printf 'b\\n' > f2; grep b f1 f2; grep -h b f1 f2",
        "f1:b\nf2:b\nb\nb\n",
        0,
    ),
    ("printf 'a\\nb\\na\\n' | grep -m1 -n a", "1:a\n", 0),
];

#[tokio::test]
async fn grep_like_gnu() {
    check_table(GREP).await;
}

/// find and xargs, each checked against GNU findutils 4.9 (script, stdout, exit code).
const FIND: &[(&str, &str, i32)] = &[
    // -depth (and -delete, which implies it): a directory after its contents; -quit.
    (
        "mkdir -p d/e; touch d/f d/e/g; find d -depth; find d -name '*' -type f -print -quit; find d -delete; ls d 2>&1 | wc -l",
        "d/e/g\nd/e\nd/f\nd\nd/e/g\n1\n",
        0,
    ),
    // sort -c/-C: the first line out of order, as GNU sort reports it.
    (
        "printf '1\\n3\\n4\\n2\\n' > a; sort -c a 2>&1; echo $?; sort -n -C a; echo $?; printf '1\\n2\\n2\\n' | sort -cu 2>&1; echo $?; printf '9\\n10\\n' | sort -nc; echo $?; sort -c a a 2>&1; echo $?",
        "sort: a:4: disorder: 2\n1\n1\nsort: -:3: disorder: 2\n1\n0\nsort: extra operand 'a' not allowed with -c\n2\n",
        0,
    ),
    // -d takes C escapes; quotes and blanks in items are then plain characters.
    (
        "printf 'one 1\\ntwo\\n' | xargs -d '\\n' -I{} echo '<{}>'",
        "<one 1>\n<two>\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . | sort",
        ".\n./docs\n./docs/README.md\n./empty.txt\n./src\n./src/lib\n./src/lib/util.py\n./src/main.py\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -name '*.py' | sort",
        "./src/lib/util.py\n./src/main.py\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find src -type d | sort",
        "src\nsrc/lib\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -maxdepth 1 -type f",
        "./empty.txt\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -iname 'readme*'",
        "./docs/README.md\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -empty -type f",
        "./empty.txt\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -name '*.py' -exec cat {} \\; | sort",
        "a\nb\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find src -name '*.py' -exec echo files: {} + | tr ' ' '\\n' | sort | tr '\\n' ' '",
        "files: src/lib/util.py src/main.py ",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -path ./src -prune -o -type f -print | sort",
        "./docs/README.md\n./empty.txt\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . -type f ! -name '*.py' | sort",
        "./docs/README.md\n./empty.txt\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find . \\( -name '*.md' -o -name '*.txt' \\) | sort",
        "./docs/README.md\n./empty.txt\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find docs -mindepth 1",
        "docs/README.md\n",
        0,
    ),
    (
        "mkdir -p src/lib docs; echo a > src/main.py; echo b > src/lib/util.py; echo c > docs/README.md; touch empty.txt; find src -name '*.py' -delete; find src -type f | wc -l",
        "0\n",
        0,
    ),
    ("find missing; echo $?", "1\n", 0),
    ("echo a b c | xargs -n 1 echo", "a\nb\nc\n", 0),
    (
        "printf 'x\\ny\\n' | xargs -I{} echo item {}",
        "item x\nitem y\n",
        0,
    ),
    ("echo one two | xargs", "one two\n", 0),
    ("printf 'a b\\0c\\0' | xargs -0 -n1 echo", "a b\nc\n", 0),
    (
        "mkdir d; touch d/f1 d/f2; find d -type f | sort | xargs rm; ls d | wc -l",
        "0\n",
        0,
    ),
    ("echo x | xargs false; echo $?", "123\n", 0),
    ("echo 'q \"w e\" r' | xargs -n1 echo", "q\nw e\nr\n", 0),
];

#[tokio::test]
async fn find_and_xargs_like_gnu() {
    check_table(FIND).await;
}

/// sed, each checked against GNU sed 4.9 (script, stdout, exit code).
const SED: &[(&str, &str, i32)] = &[
    // GNU's first~step addresses.
    ("seq 10 | sed -n '0~4p'", "4\n8\n", 0),
    ("seq 10 | sed -n '2~3p'", "2\n5\n8\n", 0),
    ("seq 5 | sed '1~2d'", "2\n4\n", 0),
    ("echo hello world | sed 's/o/0/'", "hell0 world\n", 0),
    ("echo hello world | sed 's/o/0/g'", "hell0 w0rld\n", 0),
    ("echo hello world | sed 's/o/0/2'", "hello w0rld\n", 0),
    ("echo 'a-b' | sed 's/\\(a\\)-\\(b\\)/\\2-\\1/'", "b-a\n", 0),
    ("echo 'a-b' | sed -E 's/(a)-(b)/\\2+\\1/'", "b+a\n", 0),
    ("echo abc | sed 's/b/[&]/'", "a[b]c\n", 0),
    ("echo Hello | sed 's/hello/bye/I'", "bye\n", 0),
    ("echo /usr/bin | sed 's|/usr|/opt|'", "/opt/bin\n", 0),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n 2p f",
        "two\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n '2,4p' f",
        "two\nthree\nfour\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed '2d' f",
        "one\nthree\nfour\nfive\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed '/t/d' f",
        "one\nfour\nfive\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n '/two/,/four/p' f",
        "two\nthree\nfour\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n '$p' f",
        "five\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed '3q' f",
        "one\ntwo\nthree\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n '/e/!p' f",
        "two\nfour\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed '1i first' f | head -2",
        "first\none\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed '1a after' f | head -3",
        "one\nafter\ntwo\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed '2c changed' f | head -3",
        "one\nchanged\nthree\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n '/three/=' f",
        "3\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -i 's/one/ONE/' f; head -1 f",
        "ONE\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -i.bak 's/two/2/' f; sed -n 2p f; sed -n 2p f.bak",
        "2\ntwo\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -e 's/one/1/' -e 's/two/2/' f | head -2",
        "1\n2\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed 's/o/0/g;s/e/E/' f | head -2",
        "0nE\ntw0\n",
        0,
    ),
    ("echo hello | sed 'y/abcdefghij/ABCDEFGHIJ/'", "HEllo\n", 0),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n '2{p;p}' f",
        "two\ntwo\n",
        0,
    ),
    (
        "printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > f; sed -n 's/o/O/p' f",
        "One\ntwO\nfOur\n",
        0,
    ),
    ("printf 'a\\nb' | sed 's/b/c/'", "a\nc", 0),
    ("echo x | sed 's/x/a\\nb/'", "a\nb\n", 0),
    ("sed p missing; echo $?", "2\n", 0),
];

#[tokio::test]
async fn sed_like_gnu() {
    check_table(SED).await;
}

/// diff, recorded from GNU diffutils 3.8 (script, stdout, exit code).
const DIFF: &[(&str, &str, i32)] = &[
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; cp a b; diff a b; echo $?",
        "0\n",
        0,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed 's/c/C/' a > b; diff a b; echo $?",
        "3c3\n< c\n---\n> C\n1\n",
        0,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed '2d' a > b; diff a b",
        "2d1\n< b\n",
        1,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed '4a new' a > b; diff a b",
        "4a5\n> new\n",
        1,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed -e 's/b/B/' -e '9d' a > b; diff a b",
        "2c2\n< b\n---\n> B\n9d8\n< i\n",
        1,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed 's/c/C/' a > b; diff -u a b | tail -n +3",
        "@@ -1,6 +1,6 @@\n a\n b\n-c\n+C\n d\n e\n f\n",
        0,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed -e 's/b/B/' -e 's/i/I/' a > b; diff -u a b | tail -n +3",
        "@@ -1,10 +1,10 @@\n a\n-b\n+B\n c\n d\n e\n f\n g\n h\n-i\n+I\n j\n",
        0,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed -e 's/b/B/' -e 's/e/E/' a > b; diff -U1 a b | tail -n +3",
        "@@ -1,6 +1,6 @@\n a\n-b\n+B\n c\n d\n-e\n+E\n f\n",
        0,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; printf 'x' > b; diff a b | tail -2",
        "> x\n\\ No newline at end of file\n",
        0,
    ),
    (
        "printf 'x' > a; printf 'x\\n' > b; diff a b",
        "1c1\n< x\n\\ No newline at end of file\n---\n> x\n",
        1,
    ),
    (
        "printf 'a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n' > a; sed 's/j/J/' a > b; diff -q a b",
        "Files a and b differ\n",
        1,
    ),
    ("diff nope a; echo $?", "2\n", 0),
    (
        ": > e; printf 'x\\n' > f; diff -u e f | tail -n +3",
        "@@ -0,0 +1 @@\n+x\n",
        0,
    ),
];

#[tokio::test]
async fn diff_like_gnu() {
    check_table(DIFF).await;
}

/// Runs each (script, stdout, exit code) row and reports every row that differs.
async fn check_table(table: &[(&str, &str, i32)]) {
    let mut failures = Vec::new();
    for (script, want, code) in table {
        let out = sh(script).await;
        if out.stdout != *want || out.exit_code != *code {
            failures.push(format!(
                "{script:?}\n  want {want:?} exit {code}\n  got  {out:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}

/// `patch` on unified diffs, the way GNU patch 2.7 answers them with its input not a
/// terminal (expected output recorded from GNU patch on the build machine).
#[tokio::test]
async fn patch_like_gnu() {
    let script = "seq 1 10 | sed 's/^/line/' > a.txt; cp a.txt orig.txt; sed 's/line3/LINE3/; s/line9/LINE9/' a.txt > b.txt\ndiff -u a.txt b.txt | sed '1s#.*#--- x/a.txt#; 2s#.*#+++ x/a.txt#' > p.diff\npatch -p1 < p.diff; echo rc=$?; cmp a.txt b.txt && echo same\npatch -p1 < p.diff; echo rc=$?\npatch -N -p1 < p.diff; echo rc=$?\npatch -R -p1 -i p.diff; echo rc=$?; cmp a.txt orig.txt && echo back\n{ echo extra; cat orig.txt; } > a.txt; patch -s -p1 < p.diff; echo rc=$?; head -4 a.txt | tail -1\nsed -i 's/line4/Y/; s/line8/Z/; s/line10/Q/' a.txt; patch -p1 --dry-run < p.diff; echo rc=$?; ls a.txt*\npatch -p1 < p.diff; echo rc=$?; ls a.txt*; head -2 a.txt.rej\nprintf -- '--- /dev/null\\n+++ b/sub/new.txt\\n@@ -0,0 +1,2 @@\\n+hello\\n+world\\n' | patch -p1; cat sub/new.txt\nprintf -- '--- a/sub/new.txt\\n+++ /dev/null\\n@@ -1,2 +0,0 @@\\n-hello\\n-world\\n' | patch -p1; ls sub 2>&1\nprintf 'x\\ny' > nl.txt; printf -- '--- nl.txt\\n+++ nl.txt\\n@@ -1,2 +1,2 @@\\n-x\\n+X\\n y\\n\\\\ No newline at end of file\\n' | patch -s; od -c nl.txt | head -1\n";
    let out = sh(script).await;
    assert_eq!(
        out.stdout,
        "patching file a.txt\nrc=0\nsame\npatching file a.txt\nReversed (or previously applied) patch detected!  Assume -R? [n] \nApply anyway? [n] \nSkipping patch.\n1 out of 1 hunk ignored -- saving rejects to file a.txt.rej\nrc=1\npatching file a.txt\nReversed (or previously applied) patch detected!  Skipping patch.\n1 out of 1 hunk ignored -- saving rejects to file a.txt.rej\nrc=1\npatching file a.txt\nrc=0\nback\nrc=0\nLINE3\nchecking file a.txt\nHunk #1 FAILED at 1.\n1 out of 1 hunk FAILED\nrc=1\na.txt\na.txt.orig\na.txt.rej\npatching file a.txt\nHunk #1 FAILED at 1.\n1 out of 1 hunk FAILED -- saving rejects to file a.txt.rej\nrc=1\na.txt\na.txt.orig\na.txt.rej\n--- a.txt\n+++ a.txt\npatching file sub/new.txt\nhello\nworld\npatching file sub/new.txt\nls: cannot access 'sub': No such file or directory\n0000000   X  \\n   y\n",
        "{out:?}"
    );
}

/// `cat`, `dd`, `df` and the system and user applets, against GNU coreutils' documented
/// behaviour (the sandbox is Linux on wasm32, host `wasbox`, user `root`).
const SYSTEM: &[(&str, &str, i32)] = &[
    ("printf 'a\\n\\n\\n\\nb\\n' | cat -s", "a\n\nb\n", 0),
    (
        "printf 'a\\nb\\n' > f; cat -n f f",
        "     1\ta\n     2\tb\n     3\ta\n     4\tb\n",
        0,
    ),
    (
        "printf 'a\\n\\nb\\n' | cat -b",
        "     1\ta\n\n     2\tb\n",
        0,
    ),
    ("printf 'x\\ty\\n' | cat -T", "x^Iy\n", 0),
    ("printf 'a\\r\\n' | cat -A", "a^M$\n", 0),
    ("printf '\\200\\377\\n' | cat -v", "M-^@M-^?\n", 0),
    ("printf 'a\\tb' | cat -e", "a\tb", 0),
    ("printf x > a; echo y | cat a - a", "xy\nx", 0),
    ("cat -z 2>/dev/null", "", 1),
    (
        "cat missing 2>&1; echo $?",
        "cat: missing: No such file or directory\n1\n",
        0,
    ),
    ("mkdir d; cat d 2>&1", "cat: d: Is a directory\n", 1),
    ("cat /dev/null", "", 0),
    ("head -c 100000 /dev/zero | cat | wc -c", "100000\n", 0),
    (
        "printf 'hello world' | dd bs=1 skip=6 status=none",
        "world",
        0,
    ),
    (
        "printf abc > f; printf XY | dd of=f bs=1 seek=1 conv=notrunc status=none; cat f",
        "aXY",
        0,
    ),
    (
        "printf abcdef > f; printf X | dd of=f bs=1 seek=2 status=none; cat f",
        "abX",
        0,
    ),
    ("printf abc | dd conv=ucase status=none", "ABC", 0),
    ("printf ABC | dd conv=lcase status=none", "abc", 0),
    (
        "printf abcdefgh | dd ibs=3 count=2 status=none",
        "abcdef",
        0,
    ),
    (
        "printf abcdefgh | dd iflag=count_bytes count=5 status=none",
        "abcde",
        0,
    ),
    (
        "dd if=/dev/zero bs=1K count=2 status=none | wc -c",
        "2048\n",
        0,
    ),
    (
        "dd if=/dev/zero bs=2x512 count=1 status=none | wc -c",
        "1024\n",
        0,
    ),
    (
        "printf ab | dd bs=4 conv=sync status=none | od -An -c",
        "   a   b  \\0  \\0\n",
        0,
    ),
    (
        "printf abc | dd bs=2 2>&1 >/dev/null | head -2",
        "1+1 records in\n1+1 records out\n",
        0,
    ),
    (
        "printf abc | dd bs=1 count=2 status=noxfer 2>&1 >/dev/null",
        "2+0 records in\n2+0 records out\n",
        0,
    ),
    (
        "dd if=/dev/zero of=z bs=1M count=1 2>&1 | tail -1 | cut -d, -f1-2",
        "1048576 bytes (1.0 MB, 1.0 MiB) copied\n",
        0,
    ),
    (
        "dd if=missing status=none 2>&1",
        "dd: failed to open 'missing': No such file or directory\n",
        1,
    ),
    ("dd bs=x 2>&1", "dd: invalid number: 'x'\n", 1),
    ("dd foo 2>/dev/null", "", 1),
    ("dd conv=bogus 2>/dev/null", "", 1),
    (
        "df -h | awk 'NR == 1 { print $2, $3, $4, $5 }'",
        "Size Used Avail Use%\n",
        0,
    ),
    (
        "df -i | awk 'NR == 1 { print $2, $3, $4, $5 }'",
        "Inodes IUsed IFree IUse%\n",
        0,
    ),
    ("df -B1 | awk 'NR == 1 { print $2 }'", "1B-blocks\n", 0),
    (
        "head -c 4096 /dev/zero > f; df -B1 | awk 'NR == 2 { print $3, $2 == $3 + $4 }'",
        "4096 1\n",
        0,
    ),
    (
        "touch a b; df -T a b | awk '{ print $2 }'",
        "Type\nwasbox\nwasbox\n",
        0,
    ),
    (
        "df missing 2>&1",
        "df: missing: No such file or directory\n",
        1,
    ),
    ("uname -sn", "Linux wasbox\n", 0),
    (
        "uname -a | awk '{ print $1, $2, $NF }'",
        "Linux wasbox GNU/Linux\n",
        0,
    ),
    ("uname -p; uname -o", "unknown\nGNU/Linux\n", 0),
    ("uname -x 2>/dev/null", "", 1),
    ("uname extra 2>/dev/null", "", 1),
    (
        "id -u; id -un; id -g; id -gn; id -G",
        "0\nroot\n0\nroot\n0\n",
        0,
    ),
    (
        "id user",
        "uid=1000(user) gid=1000(user) groups=1000(user)\n",
        0,
    ),
    ("USER=user id -un; USER=user whoami", "user\nuser\n", 0),
    ("USER=nobody whoami", "root\n", 0),
    ("id -n 2>/dev/null", "", 1),
    ("id -ug 2>/dev/null", "", 1),
    ("id nosuch 2>&1", "id: 'nosuch': no such user\n", 1),
    ("groups root user", "root : root\nuser : user\n", 0),
    ("hostname -s; hostname -i", "wasbox\n127.0.1.1\n", 0),
    (
        "hostname other 2>&1",
        "hostname: you must be root to change the host name\n",
        1,
    ),
    ("tty -s", "", 1),
    ("nproc --all; nproc --ignore=3", "1\n1\n", 0),
    ("nohup false", "", 1),
    ("nohup 2>/dev/null", "", 125),
    ("nohup nosuchcmd 2>/dev/null", "", 127),
    ("nice -5 echo x; nice -n -5 echo y", "x\ny\n", 0),
    (
        "touch f; chown 1000:1000 f && chown user f && chgrp 0 f && echo ok",
        "ok\n",
        0,
    ),
    (
        "touch f; chown nobody f 2>&1",
        "chown: invalid user: 'nobody'\n",
        1,
    ),
    (
        "chown root missing 2>&1",
        "chown: cannot access 'missing': No such file or directory\n",
        1,
    ),
    (
        "getconf PAGESIZE; getconf _NPROCESSORS_ONLN",
        "65536\n1\n",
        0,
    ),
    ("getconf NOPE 2>/dev/null", "", 1),
    ("seq 3 | more -d", "1\n2\n3\n", 0),
    // Files are the sandbox user's: root, or `user` in an E2B sandbox.
    (
        "touch f; ls -l f | awk '{ print $3, $4 }'; ls -ln f | awk '{ print $3, $4 }'",
        "root root\n0 0\n",
        0,
    ),
    (
        "touch f; export USER=user; ls -l f | awk '{ print $3, $4 }'; stat -c '%U %G %u %g' f; \
         find f -printf '%u %g %U %G\\n'; find f -ls | awk '{ print $5, $6 }'",
        "user user\nuser user 1000 1000\nuser user 1000 1000\nuser user\n",
        0,
    ),
    ("less -R -S /etc/hostname", "wasbox\n", 0),
];

#[tokio::test]
async fn system_applets_like_gnu() {
    check_table(SYSTEM).await;
}

/// `ps` and `top` show each process's CPU time as the host counts it: a busy process has
/// more of it than a sleeping one.
#[tokio::test]
async fn ps_and_top_show_cpu_time() {
    let out = sh(
        "python3 -c 'while True: pass' & b=$!; sleep 10 & s=$!; sleep 1; \
         ps -o pcpu= -p $b,$s | awk 'NR == 1 { b = $1 } NR == 2 { s = $1 } END { print (b > s) }'; \
         ps -o time= -p $s; ps --sort=-pcpu -o comm= | head -1; \
         top -b -n 1 | awk '$NF == \"sleep\" { print ($7 ~ /^[0-9]+:[0-9][0-9][.][0-9][0-9]$/) }'; \
         kill $b $s",
    )
    .await;
    assert_eq!(out.stdout, "1\n00:00:00\npython3\n1\n", "{out:?}");
}

/// `ps`, `pgrep`, `free` and `top` see the sandbox's processes with the pids `$!` gives,
/// and its memory.
#[tokio::test]
async fn process_applets_see_the_sandbox() {
    let out = sh(
        "sleep 300 & p=$!; ps -o pid=,ppid=,comm= > t; ps > d; ps aux > a; ps -ef > f; \
         awk '{ print $1, $2, $3 }' t; echo \"bg $p\"; head -1 d; head -1 a; head -1 f; \
         grep -c 'sleep 300$' a; pgrep -l sleep; pgrep -x -f 'sleep 300'; pgrep nothing-like-this; \
         echo \"none $?\"; ps -p 999; echo \"missing $?\"; kill $p; wait $p; \
         ps -o comm= > e; cat e",
    )
    .await;
    // `sleep` is pid 2, as `$!` says; the shell's own command line mentions `sleep` too. It
    // sleeps far longer than the script takes on a loaded machine (the clean CI of b921ffe
    // lost a 3-second one), and is killed at the end.
    assert_eq!(
        out.stdout,
        "1 0 sh\n2 1 sleep\n3 1 ps\nbg 2\n    PID TTY          TIME CMD\n\
         USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START     TIME COMMAND\n\
         UID          PID    PPID  C STIME TTY          TIME CMD\n\
         1\n2 sleep\n2\nnone 1\n    PID TTY          TIME CMD\nmissing 1\nsh\nps\n",
        "{out:?}"
    );
    // The sandbox's memory limit is free's total; what its processes hold is used.
    let out = sh("free -m | head -2; top -b -n 1 | head -3 | awk '{ print $1 }'").await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].trim_start().starts_with("total        used"),
        "{out:?}"
    );
    assert!(lines[1].starts_with("Mem:"), "{out:?}");
    assert_eq!(&lines[2..], ["top", "Tasks:", "MiB"], "{out:?}");
}

/// `kill PID` and `pkill` reach every process of the sandbox, of any job (as `ps` lists
/// them): another job's first process (its job ends with 128 + the signal), a child
/// another job's shell waits for (that shell goes on), and no process at all.
#[tokio::test]
async fn kill_and_pkill_reach_processes_of_other_jobs() {
    let sandbox = crate::support::runtime::runtime()
        .sandbox(Default::default())
        .unwrap();
    let start = |script: &'static str| {
        let sandbox = sandbox.clone();
        tokio::spawn(async move { sandbox.run(JobSpec::shell(script)).await.unwrap() })
    };
    let run = |script: String| {
        let sandbox = sandbox.clone();
        async move { sandbox.run(JobSpec::shell(script)).await.unwrap() }
    };
    // Waits until `pgrep` (of the given pattern) sees the process.
    let seen = |pattern: &'static str| {
        let sandbox = sandbox.clone();
        async move {
            for _ in 0..500 {
                let out = sandbox
                    .run(JobSpec::shell(format!("pgrep -f -x '{pattern}'")))
                    .await
                    .unwrap();
                if out.exit_code == 0 {
                    return out.stdout.trim().to_string();
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("{pattern} never ran");
        }
    };
    // Another job's first process: its job ends as the signal would.
    let first = tokio::spawn({
        let sandbox = sandbox.clone();
        async move { sandbox.run(JobSpec::new(["sleep", "30"])).await.unwrap() }
    });
    let pid = seen("sleep 30").await;
    let out = run(format!("kill {pid}; echo $?")).await;
    assert_eq!(out.stdout, "0\n", "{out:?}");
    assert_eq!(first.await.unwrap().exit_code, 143);
    // A child another shell waits for: that shell sees 137 and goes on.
    let waiting = start("sleep 31; echo \"after $?\"");
    seen("sleep 31").await;
    let out = run("pkill -9 -x sleep; echo $?; pkill -x sleep; echo $?".into()).await;
    assert_eq!(out.stdout, "0\n1\n", "{out:?}");
    assert_eq!(waiting.await.unwrap().stdout, "after 137\n");
    // Nobody there.
    let out = run("kill 99999; echo $?; kill -0 99999 2>/dev/null; echo $?".into()).await;
    assert_eq!(out.stdout, "1\n1\n", "{out:?}");
    assert!(out.stderr.contains("(99999) - No such process"), "{out:?}");
}
