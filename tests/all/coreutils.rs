//! Every applet of the multi-call coreutils program answers, under each name it has.

use crate::harness::sh;

/// (command, expected stdout). Every applet of guest-components/coreutils/applets.txt
/// must appear here (checked below).
const APPLETS: &[(&str, &str, &str)] = &[
    ("cat", "printf 'a\\nb\\n' > f; cat f", "a\nb\n"),
    ("cp", "echo x > f; cp f g; cat g", "x\n"),
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
];

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
