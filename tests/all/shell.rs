//! The shell: the constructs agents send, with bash's output and exit codes.

use wasbox_runtime::{JobSpec, SandboxConfig};

use crate::support::runtime::{runtime, sh};

/// (script, expected stdout, expected exit code)
const CASES: &[(&str, &str, i32)] = &[
    ("echo hello", "hello\n", 0),
    // LINENO: the line of the script the command starts on (bash).
    ("echo $LINENO", "1\n", 0),
    ("true\n\necho $LINENO; echo $LINENO", "3\n3\n", 0),
    (
        "f() {\n  echo in $LINENO\n}\nf; echo at $LINENO",
        "in 2\nat 4\n",
        0,
    ),
    (
        "printf 'echo $LINENO\\n\\necho $LINENO\\n' > s.sh; bash s.sh; echo $LINENO",
        "1\n3\n1\n",
        0,
    ),
    ("LINENO=7; echo $LINENO", "1\n", 0),
    // An interactive shell counts every line entered, from one command to the next.
    (
        "printf 'echo $LINENO\\necho $LINENO\\nfor i in 1; do\\n  echo $LINENO\\ndone\\necho $LINENO\\n' | sh -i 2>/dev/null",
        "1\n2\n4\n6\n",
        0,
    ),
    ("echo a; echo b", "a\nb\n", 0),
    ("true && echo yes || echo no", "yes\n", 0),
    ("false && echo yes || echo no", "no\n", 0),
    ("false; echo $?", "1\n", 0),
    ("exit 42", "", 42),
    ("exit 300", "", 44),
    ("false", "", 1),
    (
        "echo 'single $HOME' \"double $NOPE-x\" plain\\ space",
        "single $HOME double -x plain space\n",
        0,
    ),
    ("X=1; export Y=2; echo $X$Y", "12\n", 0),
    ("export Z=zed; sh -c 'echo $Z'", "zed\n", 0),
    ("X=local sh -c 'echo $X'; echo \"[$X]\"", "local\n[]\n", 0),
    (
        "cd /workspace && mkdir -p d/e && cd d/e && pwd && cd .. && pwd",
        "/workspace/d/e\n/workspace/d\n",
        0,
    ),
    ("echo one > f; echo two >> f; cat f", "one\ntwo\n", 0),
    ("echo data > f; wc -c < f", "5\n", 0),
    ("ls nope 2> err; cat err | wc -l", "1\n", 0),
    ("ls nope 2>&1 | head -c 3", "ls:", 0),
    ("echo to-err >&2 2>/dev/null; echo ok", "ok\n", 0),
    ("{ echo a; echo b; } > g; cat g", "a\nb\n", 0),
    ("nosuch; echo $?", "127\n", 0),
    ("mkdir d; ./d; echo $?", "126\n", 0),
    (
        "echo 'echo from script $1' > s.sh; sh s.sh arg",
        "from script arg\n",
        0,
    ),
    (
        "echo 'echo via shebang' > t.sh; ./t.sh; echo $?; chmod +x t.sh; ./t.sh",
        "126\nvia shebang\n",
        0,
    ),
    // Symlinks to programs of the image (as a venv's `bin/python`) and to scripts.
    (
        "mkdir -p v/bin && ln -s /usr/bin/python3 v/bin/python && v/bin/python -c 'print(6*7)'; \
         cd v && ln -s ../../bin/sh s && ./s -c 'echo via-link'; cd ..; \
         printf 'echo script-link\\n' > r.sh && chmod +x r.sh && ln -s r.sh r && ./r",
        "42\nvia-link\nscript-link\n",
        0,
    ),
    (
        "if [ -f nope ]; then echo y; elif [ 1 -lt 2 ]; then echo elif; else echo n; fi",
        "elif\n",
        0,
    ),
    ("for i in a b c; do echo $i; done", "a\nb\nc\n", 0),
    (
        "i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i",
        "3\n",
        0,
    ),
    (
        "case foo.txt in *.md) echo md;; *.txt) echo txt;; esac",
        "txt\n",
        0,
    ),
    (
        "f() { echo \"f:$1\"; return 3; }; f x; echo $?",
        "f:x\n3\n",
        0,
    ),
    ("echo $(echo inner) `echo back`", "inner back\n", 0),
    (
        "v=abc.tar.gz; echo ${v%.gz} ${v%%.*} ${v#*.} ${#v} ${u:-dflt}",
        "abc.tar abc tar.gz 10 dflt\n",
        0,
    ),
    ("echo {a,b}{1,2} {1..3}", "a1 a2 b1 b2 1 2 3\n", 0),
    ("touch b.txt a.txt; echo *.txt", "a.txt b.txt\n", 0),
    ("cat <<EOF\nline $((2*3))\nEOF", "line 6\n", 0),
    ("set -e; false; echo unreachable", "", 1),
    ("printf '%s-%03d\\n' x 7", "x-007\n", 0),
    ("echo syntax ( error", "", 2),
    // Assignments alone happen left to right: the array's words split at the new IFS.
    (
        "a=(b a c); IFS=$'\\n' s=($(sort <<<\"${a[*]}\")); unset IFS; echo \"${s[@]}\" ${#s[@]}",
        "a b c 3\n",
        0,
    ),
    ("x=1 y=$x; echo $y", "1\n", 0),
    // `--` ends printf's options.
    (
        "printf -- '--- %s\\n' a; printf -v v -- '-%s' b; echo $v",
        "--- a\n-b\n",
        0,
    ),
    // A shell that signals itself ends (128 + the signal) unless it traps the signal.
    (
        "sh -c 'kill -9 $$; echo no'; echo $?; sh -c 'kill $$; echo no'; echo $?; trap 'echo trapped' TERM; kill $$; trap '' USR1; kill -USR1 $$; echo on",
        "137\n143\ntrapped\non\n",
        0,
    ),
    // `${v:?}` ends a non-interactive shell with 127, as bash does.
    ("v=; echo ${v:?empty}; echo no", "", 127),
    (
        "bash --version | head -1 | cut -d' ' -f1-4",
        "GNU bash, version 5.2.0(1)-release\n",
        0,
    ),
    // `printf %q` quotes as bash does.
    (
        "printf '%q\\n' 'a b' '#a' 'a#b' 'x,y' '' $'t\\tab' '~u' 'a{b}'",
        "a\\ b\n\\#a\na#b\nx\\,y\n''\n$'t\\tab'\n\\~u\na\\{b\\}\n",
        0,
    ),
    // Field splitting: a non-blank IFS character ends a field, so two make an empty one;
    // blanks around it belong to it; none is made at the end.
    (
        "IFS=,; x='a,,b,'; set -- $x; echo $#; IFS=' ,'; y=' a , b  c,'; set -- $y; echo $# \"$@\"",
        "3\n3 a b c\n",
        0,
    ),
    (
        "IFS=, read -ra p <<< 'a,b,,c'; echo ${#p[@]}; printf '[%s]' \"${p[@]}\"; echo",
        "4\n[a][b][][c]\n",
        0,
    ),
    // bash's own variables (bash 5.2 on Linux, as root, per `uname` and `id`).
    (
        "echo ${BASH_VERSION%%.*} ${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]} $BASH $OSTYPE $UID $EUID",
        "5 5 2 /bin/bash linux-gnu 0 0\n",
        0,
    ),
    (
        "echo $SHLVL; bash -c 'echo $SHLVL'; [ $$ = $BASHPID ] && echo same; [ \"$(bash -c 'echo $PPID')\" = $$ ] && echo parent",
        "1\n2\nsame\nparent\n",
        0,
    ),
];

#[tokio::test]
async fn shell_cases() {
    let mut failures = Vec::new();
    for (script, stdout, code) in CASES {
        let out = sh(script).await;
        if out.stdout != *stdout || out.exit_code != *code {
            failures.push(format!(
                "{script:?}\n  want {stdout:?} exit {code}\n  got  {:?} exit {} stderr {:?}",
                out.stdout, out.exit_code, out.stderr
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn dash_lc_script_file_and_stdin() {
    let rt = runtime();
    let out = rt
        .run(JobSpec::new(["bash", "-lc", "echo login $0"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, "login bash\n");
    let out = rt
        .run(JobSpec::new(["sh"]).stdin("echo from stdin\nexit 5\n"))
        .await
        .unwrap();
    assert_eq!((out.stdout.as_str(), out.exit_code), ("from stdin\n", 5));
    // As bash reads a script on stdin: a command at a time, so that what it runs reads the
    // lines after it; a syntax error ends it after what came before.
    let out = rt
        .run(JobSpec::new(["sh"]).stdin(
            "for i in 1 2; do\n  echo $i\ndone\nread line\nthis line is data\necho \"got $line\"\n",
        ))
        .await
        .unwrap();
    assert_eq!(out.stdout, "1\n2\ngot this line is data\n");
    let out = rt
        .run(JobSpec::new(["sh"]).stdin("echo before\nfi\necho after\n"))
        .await
        .unwrap();
    assert_eq!((out.stdout.as_str(), out.exit_code), ("before\n", 2));
    let sandbox = rt.sandbox(SandboxConfig::default()).unwrap();
    std::fs::write(sandbox.workspace().join("s.sh"), "echo \"$0 $# $@\"\n").unwrap();
    let out = sandbox
        .run(JobSpec::new(["sh", "s.sh", "a", "b"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, "s.sh 2 a b\n");
    let out = sandbox
        .run(JobSpec::new(["/bin/sh", "missing.sh"]))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 127);
    assert_eq!(out.stderr, "sh: missing.sh: No such file or directory\n");
}

#[tokio::test]
async fn messages_like_bash() {
    let out = sh("nosuch arg").await;
    assert_eq!(out.stderr, "sh: nosuch: command not found\n");
    let out = sh("cd nowhere").await;
    assert_eq!(out.stderr, "sh: cd: nowhere: No such file or directory\n");
    assert_eq!(out.exit_code, 1);
    let out = sh("cat < missing").await;
    assert_eq!(out.stderr, "sh: missing: No such file or directory\n");
    let out = sh("echo 'x' )").await;
    assert_eq!(out.exit_code, 2);
    assert!(out.stderr.contains("syntax error"), "{out:?}");
    // A script's messages name the script and the line, as bash 5.2's do.
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    std::fs::write(
        sandbox.workspace().join("s.sh"),
        "echo a\ncd /nope\nnosuch\n",
    )
    .unwrap();
    let out = sandbox.run(JobSpec::new(["bash", "s.sh"])).await.unwrap();
    assert_eq!(out.stdout, "a\n");
    assert_eq!(
        out.stderr,
        "s.sh: line 2: cd: /nope: No such file or directory\ns.sh: line 3: nosuch: command not found\n"
    );
    assert_eq!(out.exit_code, 127);
}

/// `alias`/`unalias` (kept and listed; a non-interactive bash expands none), `umask` in
/// octal and symbolic forms, and the integer attribute of `declare -i` (the bash
/// reference: "Bash Builtins", "Shell Parameters"); every answer is bash 5.2's.
#[tokio::test]
async fn alias_umask_and_integer_variables() {
    for (script, want) in [
        (
            "alias ll='ls -l' la='ls -A'; alias; alias ll; alias nope; echo $?",
            "alias la='ls -A'\nalias ll='ls -l'\nalias ll='ls -l'\n1\n",
        ),
        (
            "alias x=\"it's\"; alias x; unalias x; alias x; echo $?; unalias -a; alias | wc -l",
            "alias x='it'\\''s'\n1\n0\n",
        ),
        (
            "umask; umask 077; umask; umask -S; umask u=rwx,g=rx,o=; umask; umask 999; echo $?",
            "0022\n0077\nu=rwx,g=,o=\n0027\n1\n",
        ),
        (
            "declare -i n=5; n+=2; echo $n; n='3*4'; echo $n; declare -p n; x=1; x+=2; echo $x",
            "7\n12\ndeclare -i n=\"12\"\n12\n",
        ),
        ("declare -i z=10; unset z; z=1+1; echo $z", "1+1\n"),
    ] {
        let out = sh(script).await;
        assert_eq!(out.stdout, want, "{script}: {out:?}");
    }
}

#[tokio::test]
async fn a_sandbox_keeps_its_workspace_across_jobs() {
    let sandbox = runtime().sandbox(SandboxConfig::default()).unwrap();
    sandbox
        .run(JobSpec::shell("echo 42 > answer; mkdir sub"))
        .await
        .unwrap();
    let out = sandbox
        .run(JobSpec::shell("cat ../answer; ls").cwd("sub"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "42\n");
    let out = sandbox.run(JobSpec::shell("pwd").cwd("sub")).await.unwrap();
    assert_eq!(out.stdout, "/workspace/sub\n");
    let custom = runtime()
        .sandbox(SandboxConfig::default().mount("/app").env("ROLE", "agent"))
        .unwrap();
    let out = custom
        .run(JobSpec::shell(
            "pwd; echo $ROLE $HOME; echo x > f; cat /app/f",
        ))
        .await
        .unwrap();
    assert_eq!(out.stdout, "/app\nagent /app\nx\n");
}

#[tokio::test]
async fn bash_dynamic_variables() {
    // RANDOM: 0..32767, a new value at each use, different in each shell; SRANDOM: 32
    // bits; SECONDS counts from the shell's start; EPOCHSECONDS/EPOCHREALTIME are now;
    // an assignment makes one an ordinary variable.
    let script = "a=$RANDOM b=$RANDOM c=$RANDOM; echo $a $b $c; echo $((RANDOM < 32768)); \
                  echo $SRANDOM; echo $SECONDS; echo $EPOCHSECONDS; echo $EPOCHREALTIME; \
                  RANDOM=7; echo $RANDOM $RANDOM";
    let first = sh(script).await;
    let second = sh(script).await;
    let lines: Vec<&str> = first.stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{first:?}");
    let r: Vec<u32> = lines[0].split(' ').map(|v| v.parse().unwrap()).collect();
    assert!(r.iter().all(|v| *v < 32768), "{r:?}");
    assert!(r[0] != r[1] || r[1] != r[2], "RANDOM repeats: {r:?}");
    assert_eq!(lines[1], "1");
    lines[2].parse::<u32>().unwrap();
    assert_eq!(lines[3], "0");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let epoch: u64 = lines[4].parse().unwrap();
    assert!(epoch.abs_diff(now) < 60, "{epoch} vs {now}");
    let (secs, micros) = lines[5].split_once('.').unwrap();
    assert!(secs.parse::<u64>().unwrap().abs_diff(now) < 60 && micros.len() == 6);
    assert_eq!(lines[6], "7 7");
    assert_ne!(
        first.stdout.lines().next(),
        second.stdout.lines().next(),
        "two shells drew the same RANDOM values"
    );
}

#[tokio::test]
async fn compound_commands_run_in_the_background() {
    // Like bash's fork: a subshell, group, loop, pipeline, function or and-or list with `&`
    // runs beside the shell, with the shell's variables (exported or not), arrays,
    // functions, options and positional parameters; its redirections apply to it.
    let script = r#"
        x=local; export E=exp; arr=(a "b c"); declare -A m=([k]=v); set -- p1 p2
        f() { echo "f:$1:$x:$E:${arr[1]}:${m[k]}:$2"; }
        mkdir -p sub && cd sub
        (sleep 2; echo "late:$x:$(pwd)") &
        echo "now"
        { echo group; echo err >&2; } > out.txt 2>&1 &
        for i in 1 2; do echo "loop$i"; done > loop.txt &
        echo abc | tr a-c x-z > tr.txt &
        f arg "$1" > f.txt &
        false && echo no > ao.txt || echo yes > ao.txt &
        pid=$!
        wait "$pid"; echo "status=$?"
        wait
        cat out.txt loop.txt tr.txt f.txt ao.txt
        cat <<EOF &
heredoc $x
EOF
        wait
    "#;
    let out = sh(script).await;
    assert_eq!(
        out.stdout,
        "now\nstatus=0\nlate:local:/workspace/sub\ngroup\nerr\nloop1\nloop2\nxyz\n\
         f:arg:local:exp:b c:v:p1\nyes\nheredoc local\n",
        "{out:?}"
    );
    assert_eq!(out.exit_code, 0, "{out:?}");
    // The shell does not wait for them at its end (the job ends and stops them).
    let started = std::time::Instant::now();
    let out = sh("(sleep 5) > /dev/null 2>&1 & { sleep 5; } & echo gone").await;
    assert_eq!(out.stdout, "gone\n", "{out:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

#[tokio::test]
async fn wait_for_named_jobs_or_the_next_one() {
    let out = sh(r#"
        sleep 3 & slow=$!
        (exit 3) & quick=$!
        t=$SECONDS; wait "$quick"; echo "quick=$? after=$((SECONDS - t))"
        wait 99999; echo "stranger=$?"
        (sleep 0.2; exit 5) & wait -n -p who; echo "next=$? is_last=$([ "$who" = "$!" ] && echo y)"
        kill "$slow"; wait %1; echo "killed=$?"
        wait; echo "all=$?"
    "#)
    .await;
    assert_eq!(
        out.stdout, "quick=3 after=0\nstranger=127\nnext=5 is_last=y\nkilled=143\nall=0\n",
        "{out:?}"
    );
    assert!(out.stderr.contains("wait: 99999: no such job"), "{out:?}");
}

#[tokio::test]
async fn trap_exit_and_err_and_set_with_grouped_options() {
    // `set -euo pipefail` (an `o` inside a group takes the next word), an EXIT trap that
    // sees the status and runs on `set -e`, on `exit` and at the end, ERR on each failure.
    let out = sh(r#"set -euo pipefail
        cleanup() { echo "cleanup rc=$?"; }
        trap cleanup EXIT
        echo start; false | true; echo never"#)
    .await;
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("start\ncleanup rc=1\n", 1),
        "{out:?}"
    );
    let out = sh(r#"trap 'echo "err $?"' ERR
        trap 'echo "bye $?"' EXIT
        false; echo after; if false; then :; fi; false || true
        trap -p
        trap - ERR; false
        trap '' INT; trap x BOGUS; echo "bad=$?"
        exit 3"#)
    .await;
    assert_eq!(
        out.stdout,
        "err 1\nafter\ntrap -- 'echo \"err $?\"' ERR\ntrap -- 'echo \"bye $?\"' EXIT\n\
         bad=1\nbye 3\n",
        "{out:?}"
    );
    assert_eq!(out.exit_code, 3);
    assert!(
        out.stderr
            .contains("trap: BOGUS: invalid signal specification"),
        "{out:?}"
    );
    // An `exit` in the EXIT trap sets the status; `set -o a -o b` works too.
    let out = sh("set -o errexit -o pipefail; trap 'echo in-trap; exit 7' EXIT; echo x").await;
    assert_eq!(
        (out.stdout.as_str(), out.exit_code),
        ("x\nin-trap\n", 7),
        "{out:?}"
    );
}

#[tokio::test]
async fn shopt_glob_options() {
    let out = sh(r#"mkdir -p g/a/b g/.h && cd g
        touch x.txt a/y.txt a/b/z.txt .h/w.txt .dot A.TXT
        echo *.none
        shopt -s nullglob; echo "[" *.none "]"
        echo *
        shopt -s dotglob; echo *; shopt -u dotglob
        shopt -s globstar; echo **/*.txt; echo **
        shopt -s nocaseglob; echo *.txt; shopt -u nocaseglob
        shopt -q globstar && echo globstar-on
        shopt -p nullglob dotglob
        shopt -s extglob; echo "extglob=$?"
        shopt -u globstar; echo **/*.txt"#)
    .await;
    assert_eq!(
        out.stdout,
        "*.none\n[ ]\nA.TXT a x.txt\n.dot .h A.TXT a x.txt\na/b/z.txt a/y.txt x.txt\n\
         A.TXT a a/b a/b/z.txt a/y.txt x.txt\nA.TXT x.txt\nglobstar-on\n\
         shopt -s nullglob\nshopt -u dotglob\nextglob=1\na/y.txt\n",
        "{out:?}"
    );
    assert!(out.stderr.contains("shopt: extglob:"), "{out:?}");
}
