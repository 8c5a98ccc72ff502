//! The `tools` program of the base image: jq, tar, gzip/gunzip/zcat, bzip2, xz/lzma,
//! zip/unzip, git, make. Expected outputs are what jq 1.6, GNU tar 1.34, gzip 1.12, bzip2 1.0.8,
//! xz 5.4 and Info-ZIP 3.0/6.0 print for the same
//! scripts; hostile archives are refused member by member and leave nothing outside.

use crate::support::runtime::{sh, sh_in};

/// (script, stdout, exit code).
const CASES: &[(&str, &str, i32)] = &[
    // jq: filters, paths, -r, -c, --arg, select, map (the jq manual's examples).
    (
        r#"echo '{"a":1,"b":[1,2,{"c":null}]}' | jq ."#,
        "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2,\n    {\n      \"c\": null\n    }\n  ]\n}\n",
        0,
    ),
    (
        r#"echo '{"items":[{"id":1,"ok":true},{"id":2,"ok":false}]}' | jq -r '.items[] | select(.ok) | .id'"#,
        "1\n",
        0,
    ),
    (r#"echo '[1,2,3]' | jq -c 'map(. * 2)'"#, "[2,4,6]\n", 0),
    // GNU tar keeps `./` in names archived from `.`; `unzip -Z1` lists names only.
    (
        "mkdir -p d/s; echo x > d/f; echo y > d/s/g; tar -C d -cf a.tar . && tar -tf a.tar | sort",
        "./\n./f\n./s/\n./s/g\n",
        0,
    ),
    (
        "echo x > f; mkdir s; echo y > s/g; zip -qr z.zip f s; unzip -Z1 z.zip",
        "f\ns/\ns/g\n",
        0,
    ),
    // from_entries takes key/k/name/Name/K/Key and value/v/Value/V (the jq 1.7 manual).
    (
        r#"echo '[{"k":"a","v":1},{"name":"b","value":2},{"Key":"c","V":3},{"key":1,"value":4}]' | jq -c from_entries"#,
        "{\"a\":1,\"b\":2,\"c\":3,\"1\":4}\n",
        0,
    ),
    (
        "jq -n --arg x hi --argjson n 5 '{greeting: $x, n: ($n + 1)}' -c",
        "{\"greeting\":\"hi\",\"n\":6}\n",
        0,
    ),
    (
        r#"echo '{"k1":1,"k2":2}' | jq -r 'to_entries[] | "\(.key)=\(.value)"'"#,
        "k1=1\nk2=2\n",
        0,
    ),
    ("printf '1\\n2\\n3\\n' | jq -s add", "6\n", 0),
    (
        "printf 'a\\nb\\n' | jq -R . | jq -s -c .",
        "[\"a\",\"b\"]\n",
        0,
    ),
    (
        "jq -n '1e17, 1e-5, 0.0001, 3.0, 12345678901234567890, 1/3'",
        "1e+17\n1e-05\n0.0001\n3\n12345678901234567000\n0.3333333333333333\n",
        0,
    ),
    (
        r#"echo '{"b":2,"a":{"d":1,"c":2}}' | jq -S -c ."#,
        "{\"a\":{\"c\":2,\"d\":1},\"b\":2}\n",
        0,
    ),
    (
        r#"echo '{"a":"x\ty\u0001é"}' | jq -a -c ."#,
        "{\"a\":\"x\\ty\\u0001\\u00e9\"}\n",
        0,
    ),
    (
        r#"echo '[1,"a\"b",null,true]' | jq -r '@csv, @tsv'"#,
        "1,\"a\"\"b\",,true\n1\ta\"b\t\ttrue\n",
        0,
    ),
    (r#"echo '{"a":1}' | jq -e .b; echo $?"#, "null\n1\n", 0),
    (
        r#"printf '{"a":1}\n{"a":2}\n' | jq -n '[inputs.a] | add'"#,
        "3\n",
        0,
    ),
    (r#"echo '{}' | jq 'error("boom")'; echo $?"#, "5\n", 0),
    // jq 1.6 ends with status 4 at input it cannot parse (main.c: `ret = 4` on a parse
    // error), 2 only for a file it cannot open.
    ("echo 'not json' | jq .; echo $?", "4\n", 0),
    ("jq . missing.json; echo $?", "2\n", 0),
    // Assignment makes the objects and arrays along its path, padding arrays with null
    // (the jq manual: "Assignment"; `setpath`), whatever the operator; programs that did
    // not need it are unchanged, and errors jq gives stay errors.
    (
        r#"jq -c '.a.b.c = 5, (.x[2] |= 7), (.n += 1), (.l //= [1]), (.s.t |= length)' <<< '{}'"#,
        "{\"a\":{\"b\":{\"c\":5}}}\n{\"x\":[null,null,7]}\n{\"n\":1}\n{\"l\":[1]}\n{\"s\":{\"t\":0}}\n",
        0,
    ),
    (
        r#"jq -c '[.[] | .n.m = 1], (null | .a[1].b = 2), ([1] | .[3] = 4), setpath(["p",0]; 1)' <<< '[{}, {"n": {}}]'"#,
        "[{\"n\":{\"m\":1}},{\"n\":{\"m\":1}}]\n{\"a\":[null,{\"b\":2}]}\n[1,null,null,4]\n",
        5,
    ),
    (
        r#"jq -c 'reduce range(3) as $i (.; .list[$i] = $i * 2) | .cfg.name = $v' --arg v x <<< '{}'; jq -c '.a.b = 1' <<< '{"a":5}'; echo $?"#,
        "{\"list\":[0,2,4],\"cfg\":{\"name\":\"x\"}}\n5\n",
        0,
    ),
    // A program with an assignment that never ends still streams its outputs.
    (
        r#"jq -nc 'repeat(.a = 1)' | head -2; jq -nc '[limit(2; repeat(1))] | .[3] = 2'"#,
        "{\"a\":1}\n{\"a\":1}\n[1,1,null,2]\n",
        0,
    ),
    // del and delpaths of several paths, from the last; the streaming forms.
    (
        r#"jq -c 'del(.[0,2]), del(.[] | select(. > 1)), delpaths([[0],[1]])' <<< '[1,2,3,1]'"#,
        "[2,1]\n[1,1]\n[3,1]\n",
        0,
    ),
    (
        r#"jq -c '[tostream], fromstream(tostream), [1 | truncate_stream([[0],1],[[1,0],2],[[1,0]],[[1]])]' <<< '{"a":[1,{"b":null}],"c":{}}'"#,
        "[[[\"a\",0],1],[[\"a\",1,\"b\"],null],[[\"a\",1,\"b\"]],[[\"a\",1]],[[\"c\"],{}],[[\"c\"]]]\n{\"a\":[1,{\"b\":null}],\"c\":{}}\n[[[0],2],[[0]]]\n",
        0,
    ),
    ("jq 'bad syntax ((' <<< '{}'; echo $?", "3\n", 0),
    ("jq . missing.json; echo $?", "2\n", 0),
    (
        "jq -n --args -c '$ARGS.positional' a b",
        "[\"a\",\"b\"]\n",
        0,
    ),
    ("echo 1 | jq --indent 4 -c '{a:[.]}'", "{\"a\":[1]}\n", 0),
    // tar: create, list, extract, gzip, -C, --strip-components, --exclude, -O, errors.
    (
        "mkdir d && echo hi > d/a.txt && echo hello > b.txt && tar czf x.tgz d b.txt && tar tzf x.tgz && mkdir o && tar xzf x.tgz -C o && cat o/d/a.txt o/b.txt",
        "d/\nd/a.txt\nb.txt\nhi\nhello\n",
        0,
    ),
    (
        "mkdir d && echo hi > d/a.txt && chmod 750 d && tar cvf x.tar d && tar tvf x.tar | awk '{print $1, $2, $3, $6}'",
        "d/\nd/a.txt\ndrwxr-x--- root/root 0 d/\n-rw-r--r-- root/root 3 d/a.txt\n",
        0,
    ),
    (
        "mkdir -p a/b/c && echo x > a/b/c/f && tar cf t.tar a && mkdir out && tar xf t.tar -C out --strip-components=2 && find out | sort",
        "out\nout/c\nout/c/f\n",
        0,
    ),
    (
        "mkdir d && echo 1 > d/keep && echo 2 > d/skip.log && tar czf t.tgz --exclude='*.log' d && tar tzf t.tgz",
        "d/\nd/keep\n",
        0,
    ),
    (
        "echo hi > f && tar cf - f | tar tf - && tar cf t.tar f && tar xOf t.tar f",
        "f\nhi\n",
        0,
    ),
    (
        "echo hi > run.sh && chmod 755 run.sh && tar cf t.tar run.sh && rm run.sh && tar xf t.tar && stat -c %a run.sh",
        "755\n",
        0,
    ),
    ("tar xf missing.tar; echo $?", "2\n", 0),
    ("echo notatar > b.txt; tar tf b.txt; echo $?", "2\n", 0),
    (
        "echo hi > f && tar cf t.tar f && tar tf t.tar nothere; echo $?",
        "2\n",
        0,
    ),
    ("tar cjf x.tbz f; echo $?", "2\n", 0),
    // bzip2, bunzip2, bzcat (the bzip2 1.0.8 manual): `.bz2` added and removed, `-k`,
    // `-t`, concatenated streams, a name without the suffix decompressed to NAME.out, a
    // file that already has the suffix refused with status 1, anything else status 2.
    (
        "seq 1000 > big && bzip2 big && ls && bunzip2 big.bz2 && wc -l big",
        "big.bz2\n1000 big\n",
        0,
    ),
    (
        "seq 3 | bzip2 > s.bz2 && seq 4 5 | bzip2 >> s.bz2 && bzcat s.bz2 && bzip2 -t s.bz2 && echo ok",
        "1\n2\n3\n4\n5\nok\n",
        0,
    ),
    (
        "seq 5 | bzip2 -c > data && bunzip2 data 2>/dev/null && cat data.out | wc -l",
        "5\n",
        0,
    ),
    (
        "echo x > x && bzip2 -k x && bzip2 x.bz2; echo $?; echo plain > p.bz2; bunzip2 p.bz2; echo $?",
        "1\n2\n",
        0,
    ),
    // xz, unxz, xzcat, lzma (the xz 5.4 manual): the same, `--format=lzma`, `-l`
    // refused on standard input, a corrupt or foreign file status 1.
    (
        "seq 2000 > n && xz -k n && ls n* && xz -d -c n.xz | tail -1 && xz -t n.xz && echo ok",
        "n\nn.xz\n2000\nok\n",
        0,
    ),
    (
        "seq 3 | xz > s.xz && seq 4 5 | xz -9e -T0 >> s.xz && xzcat s.xz | paste -sd,",
        "1,2,3,4,5\n",
        0,
    ),
    (
        "seq 10 | xz --format=lzma | lzcat | wc -l && seq 10 | lzma | unlzma | tail -1",
        "10\n10\n",
        0,
    ),
    (
        "echo plain > p.xz; unxz p.xz; echo $?; echo hi | xz -l; echo $?",
        "1\n1\n",
        0,
    ),
    // tar -j, -J, --lzma, -a by the archive's name, and reading any of them by its magic.
    (
        "mkdir d && seq 3 > d/x && tar -cjf d.tar.bz2 d && tar -tjf d.tar.bz2 && rm -r d && tar -xf d.tar.bz2 && cat d/x | wc -l",
        "d/\nd/x\n3\n",
        0,
    ),
    (
        "mkdir d && echo hi > d/x && tar -caf a.txz d && tar -caf a.tbz2 d && tar --lzma -cf a.lz d && for a in a.txz a.tbz2 a.lz; do tar -xOf $a d/x; done; xz -t a.txz && bzip2 -t a.tbz2 && echo ok",
        "hi\nhi\nhi\nok\n",
        0,
    ),
    // gzip, gunzip, zcat.
    (
        "seq 1000 > big && gzip big && ls && gunzip big.gz && wc -l big",
        "big.gz\n1000 big\n",
        0,
    ),
    (
        "seq 1000 > big && gzip -k big && ls && zcat big.gz | tail -1",
        "big\nbig.gz\n1000\n",
        0,
    ),
    ("seq 100 | gzip -9 | gunzip -c | wc -l", "100\n", 0),
    (
        "echo x > f && gzip -c f > f.gz && gzip -t f.gz && echo ok",
        "ok\n",
        0,
    ),
    ("echo x > f.gz; gzip -d f.gz; echo $?", "1\n", 0),
    ("gzip missing; echo $?", "1\n", 0),
    (
        "echo x > f && gzip f && echo y > f && gzip f; echo $?; zcat f.gz",
        "2\nx\n",
        0,
    ),
    // zip and unzip.
    (
        "mkdir d && echo hi > d/a.txt && echo hello > b.txt && zip -r z.zip d b.txt && mkdir u && cd u && unzip ../z.zip && cat d/a.txt b.txt",
        "  adding: d/ (stored 0%)\n  adding: d/a.txt (stored 0%)\n  adding: b.txt (stored 0%)\nArchive:  ../z.zip\n   creating: d/\n extracting: d/a.txt                 \n extracting: b.txt                   \nhi\nhello\n",
        0,
    ),
    (
        "seq 1000 > big && zip z.zip big && unzip -l z.zip | awk 'NR>3 && NR<5 {print $1, $4}' && mkdir u && unzip -q z.zip -d u && cmp big u/big && echo same",
        "  adding: big (deflated 53%)\n3893 big\nsame\n",
        0,
    ),
    (
        "echo hello > b.txt && zip -q z.zip b.txt && unzip -p z.zip b.txt && unzip -o -q z.zip && echo done",
        "hello\ndone\n",
        0,
    ),
    (
        "echo a > a && echo b > b && zip -q z.zip a b && zip -d z.zip a && unzip -l z.zip | tail -1",
        "deleting: a\n        2                     1 file\n",
        0,
    ),
    (
        "echo a > a && zip -q z.zip a && echo a2 > a && zip z.zip a",
        "updating: a (stored 0%)\n",
        0,
    ),
    ("unzip missing.zip; echo $?", "9\n", 0),
    (
        "echo a > a && echo b > b && echo c > c && zip -q z.zip a b c && mkdir o && unzip -q z.zip -x a b -d o && ls o",
        "c\n",
        0,
    ),
    (
        "echo hello > b.txt && zip -q z.zip b.txt && unzip z.zip < /dev/null; echo $?",
        "Archive:  z.zip\n1\n",
        0,
    ),
];

#[tokio::test]
async fn tools_match_their_reference_outputs() {
    let mut failures = Vec::new();
    for (script, want, code) in CASES {
        let out = sh(script).await;
        if out.stdout != *want || out.exit_code != *code {
            failures.push(format!(
                "{script:?}\n  want {want:?} ({code})\n  got  {out:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A ustar header block for one member.
fn tar_header(name: &str, mode: u32, size: usize, kind: u8, link: &str) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(format!("{mode:07o}").as_bytes());
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

fn tar_of(members: &[(&str, u32, &[u8], u8, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, mode, data, kind, link) in members {
        out.extend_from_slice(&tar_header(name, *mode, data.len(), *kind, link));
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A zip of stored members.
fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in members {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let fields = |sig: &[u8], out: &mut Vec<u8>, central: bool| {
            out.extend_from_slice(sig);
            if central {
                out.extend_from_slice(&20u16.to_le_bytes());
            }
            out.extend_from_slice(&10u16.to_le_bytes());
            out.extend_from_slice(&[0, 0, 0, 0]);
            out.extend_from_slice(&[0, 0, 0x21, 0]);
            out.extend_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
        };
        fields(b"PK\x03\x04", &mut out, false);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        fields(b"PK\x01\x02", &mut central, true);
        // Comment length, disk, internal and external attributes.
        central.extend_from_slice(&[0u8; 10]);
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
    out.extend_from_slice(&(members.len() as u16).to_le_bytes());
    out.extend_from_slice(&(members.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[tokio::test]
async fn hostile_archives_stay_inside_and_lose_special_bits() {
    let root = tempfile_dir("wasbox-hostile");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("evil.tar"),
        tar_of(&[
            ("../outside.txt", 0o644, b"escaped\n", b'0', ""),
            ("a/../../up.txt", 0o644, b"escaped\n", b'0', ""),
            ("/abs.txt", 0o644, b"absolute\n", b'0', ""),
            ("suid", 0o4755, b"#!/bin/sh\n", b'0', ""),
            ("dev", 0o644, b"", b'3', ""),
            ("ok.txt", 0o644, b"fine\n", b'0', ""),
        ]),
    )
    .unwrap();
    std::fs::write(
        ws.join("evil.zip"),
        zip_of(&[("../zipslip.txt", b"escaped\n"), ("good.txt", b"good\n")]),
    )
    .unwrap();
    let out = sh_in(
        &ws,
        "tar xf evil.tar; echo tar=$?; ls; stat -c %a suid; unzip -q evil.zip; echo unzip=$?; cat good.txt",
    )
    .await;
    assert_eq!(
        out.stdout, "tar=2\nabs.txt\nevil.tar\nevil.zip\nok.txt\nsuid\n755\nunzip=1\ngood\n",
        "{out:?}"
    );
    assert!(out.stderr.contains("Member name contains '..'"), "{out:?}");
    assert!(out.stderr.contains("skipped \"../\""), "{out:?}");
    for escaped in ["outside.txt", "up.txt", "zipslip.txt"] {
        assert!(
            !root.join(escaped).exists(),
            "{escaped} escaped the workspace"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

fn tempfile_dir(prefix: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copies `tests/fixtures/git-packed` (a repository git 2.47 made, committed, tagged and
/// packed with `git gc --aggressive`: packed refs, a delta, an index with extensions; then
/// given an `origin` remote whose `main` is one commit behind, as a clone would have) into a
/// fresh workspace, its `dotgit` back to `.git`.
fn packed_repo() -> (std::path::PathBuf, std::path::PathBuf) {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            let name = if name == "dotgit" {
                ".git".into()
            } else {
                name
            };
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(name));
            } else {
                std::fs::copy(e.path(), to.join(name)).unwrap();
            }
        }
    }
    let root = tempfile_dir("wasbox-git");
    let ws = root.join("ws");
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/git-packed");
    copy(&fixture, &ws);
    (root, ws)
}

const GIT_ENV: &str = "export GIT_AUTHOR_DATE='@1700000000 +0000' GIT_COMMITTER_DATE='@1700000000 +0000' GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com; ";

/// A repository cloned or made elsewhere reads as git reads it: the expected output is what
/// git 2.47.3 printed for the same script on the same repository, down to the commit id of
/// the new commit (so its objects are byte for byte git's).
#[tokio::test]
async fn git_reads_and_extends_a_repository_packed_by_git() {
    let (root, ws) = packed_repo();
    let script = format!(
        "{GIT_ENV}git log --stat --decorate; git status; git show v1:lib/util.py; git diff HEAD~2 HEAD -- app.py; git rev-parse v1 main; git branch -v; echo extra >> app.py; git diff --stat; git commit -qam fourth; git log --oneline"
    );
    let out = sh_in(&ws, &script).await;
    let graph = "+".repeat(62);
    let want = format!(
        "commit b46e6ccba1f6b974cd83ff1194be25647ad8e67f (HEAD -> main)
Author: Dev <dev@example.com>
Date:   Tue Nov 14 22:13:20 2023 +0000

    third

 README.md | 1 -
 1 file changed, 1 deletion(-)

commit 7aa53add36b6be775bd20abdc3569cdb4608a135 (tag: v1, origin/main)
Author: Dev <dev@example.com>
Date:   Tue Nov 14 22:13:20 2023 +0000

    second

 app.py      | 2 +-
 lib/util.py | 3 +++
 2 files changed, 4 insertions(+), 1 deletion(-)

commit 60512515788857781a98df288c37f27bc4fc19c4
Author: Dev <dev@example.com>
Date:   Tue Nov 14 22:13:20 2023 +0000

    first

 README.md |   1 +
 app.py    | 160 {graph}
 2 files changed, 161 insertions(+)
On branch main
Your branch is ahead of 'origin/main' by 1 commit.
  (use \"git push\" to publish your local commits)

nothing to commit, working tree clean
import os

VALUE = 1
diff --git a/app.py b/app.py
index 63a4d44..09b38e5 100644
--- a/app.py
+++ b/app.py
@@ -77,7 +77,7 @@ def f38(x):
 def f39(x):
     return x * 39
 def f40(x):
-    return x * 40
+    return x * 4000
 def f41(x):
     return x * 41
 def f42(x):
7aa53add36b6be775bd20abdc3569cdb4608a135
b46e6ccba1f6b974cd83ff1194be25647ad8e67f
* main b46e6cc [ahead 1] third
 app.py | 1 +
 1 file changed, 1 insertion(+)
6d96514 fourth
b46e6cc third
7aa53ad second
6051251 first
"
    );
    assert_eq!(out.stdout, want, "{}", out.stderr);
    assert_eq!(out.exit_code, 0, "{out:?}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Damaged or hostile repository files end the one git command with git's `fatal:` and
/// status 128, never a trap: a truncated pack, an index that is not one, a loose object
/// that is not zlib, a pack entry claiming a 4 GiB object, a tree or a patch naming a path
/// outside the working tree.
#[tokio::test]
async fn git_refuses_damaged_repositories_cleanly() {
    let (root, ws) = packed_repo();
    let pack_dir = ws.join(".git/objects/pack");
    let pack = std::fs::read_dir(&pack_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .unwrap();
    let data = std::fs::read(&pack).unwrap();
    // The first entry's size header claims 2^32 bytes (a blob, type 3).
    let mut huge = data.clone();
    huge.splice(12..13, [0xb0u8 | 0x80, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    std::fs::write(&pack, &data[..data.len() / 2]).unwrap();
    let out = sh_in(&ws, "git log --oneline > /dev/null; echo log=$?; git show v1:lib/util.py > /dev/null; echo show=$?").await;
    assert!(out.stdout.contains("=128"), "{out:?}");
    assert!(
        !out.stderr.contains("trap") && !out.stderr.contains("panicked"),
        "{out:?}"
    );

    std::fs::write(&pack, &huge).unwrap();
    let out = sh_in(&ws, "git log --oneline > /dev/null; echo log=$?").await;
    assert!(
        !out.stderr.contains("trap") && !out.stderr.contains("panicked"),
        "{out:?}"
    );

    let out = sh_in(
        &ws,
        "git init -q nested && cd nested && echo garbage > .git/index; git status; echo status=$?; echo x > f; git add f; head -c 73 .git/index > short; mv short .git/index; git status; echo short=$?; rm .git/index; mkdir -p .git/objects/ab && echo junk > .git/objects/ab/cdef0123456789abcdef0123456789abcdef01 && git cat-file -p abcdef0123456789abcdef0123456789abcdef01; echo cat=$?",
    )
    .await;
    assert_eq!(out.stdout, "status=128\nshort=128\ncat=128\n", "{out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");
    assert!(out.stderr.contains("fatal: index file corrupt"), "{out:?}");
    assert!(out.stderr.contains("is corrupt"), "{out:?}");

    // A tree naming `../escaped` (written by hand, as a hostile repository would hold it)
    // and a patch to `../patched` are refused; nothing lands outside the working tree.
    let hostile = r#"git init -q evil && cd evil && python3 -c '
import hashlib, os, zlib
def put(kind, data):
    raw = kind.encode() + b" " + str(len(data)).encode() + b"\0" + data
    h = hashlib.sha1(raw).hexdigest()
    os.makedirs(".git/objects/" + h[:2], exist_ok=True)
    open(".git/objects/" + h[:2] + "/" + h[2:], "wb").write(zlib.compress(raw))
    return h
blob = put("blob", b"owned\n")
tree = put("tree", b"100644 ../escaped\0" + bytes.fromhex(blob))
commit = put("commit", ("tree " + tree + "\nauthor a <a> 0 +0000\ncommitter a <a> 0 +0000\n\nx\n").encode())
print(commit)
' > id; git reset --hard $(cat id); echo reset=$?; git checkout $(cat id) -- . ; echo checkout=$?
printf 'diff --git a/../patched b/../patched\nnew file mode 100644\n--- /dev/null\n+++ b/../patched\n@@ -0,0 +1 @@\n+owned\n' > p.diff; git apply p.diff; echo apply=$?; ls .. "#;
    let out = sh_in(&ws, hostile).await;
    assert!(out.stdout.contains("reset=128\n"), "{out:?}");
    assert!(out.stdout.contains("apply=128\n"), "{out:?}");
    assert!(out.stderr.contains("invalid path '../escaped'"), "{out:?}");
    assert!(
        !out.stdout.contains("escaped\n") && !out.stdout.contains("patched\n"),
        "{out:?}"
    );
    assert!(!ws.join("escaped").exists() && !ws.join("patched").exists());
    let _ = std::fs::remove_dir_all(&root);
}

/// Makefiles that never end in GNU make (a `$(call)` or `$(eval)` that reaches itself, two
/// variables that name each other, a recipe that runs the same make again) or that would
/// run the guest's stack out (a chain of 20,000 prerequisites) end with make's error and
/// status 2, never a trap and never a hang: expansion and prerequisite depth are bounded,
/// and recursion meets the sandbox's process limit.
#[tokio::test]
async fn make_ends_runaway_makefiles_with_its_error() {
    let ws = tempfile_dir("make-runaway");
    for (name, text) in [
        ("call.mk", "f = x$(call f)\nall:\n\t@echo $(call f)\n"),
        (
            "eval.mk",
            "define r\n$$(eval $$(r))\nendef\n$(eval $(r))\nall: ; @echo hi\n",
        ),
        ("loop.mk", "A = $(B)\nB = $(A)\nall: ; @echo $(A)\n"),
        ("again.mk", "all:\n\t@$(MAKE) -s -f again.mk\n"),
    ] {
        std::fs::write(ws.join(name), text).unwrap();
    }
    // A chain of 20,000 prerequisites, deeper than the guest's stack would go.
    let mut chain = String::from("t0: t1\n\t@echo top\n");
    for i in 1..20_000 {
        chain.push_str(&format!("t{i}: t{}\n", i + 1));
    }
    chain.push_str("t20000:\n\t@echo bottom\n");
    std::fs::write(ws.join("chain.mk"), chain).unwrap();
    let out = sh_in(
        &ws,
        "for m in call eval loop again chain; do make -f $m.mk > /dev/null 2> $m.err; echo $m=$?; done; cat call.err eval.err loop.err chain.err; grep -c 'process limit of' again.err",
    )
    .await;
    assert_eq!(
        out.stdout,
        "call=2\neval=2\nloop=2\nagain=2\nchain=2\n\
         call.mk:3: *** expansion nested more than 200 deep (a $(call) or $(eval) that reaches itself?).  Stop.\n\
         eval.mk:1: *** expansion nested more than 200 deep (a $(call) or $(eval) that reaches itself?).  Stop.\n\
         loop.mk:3: *** Recursive variable 'A' references itself (eventually).  Stop.\n\
         make: *** prerequisites of 't2000' nested more than 2000 deep.  Stop.\n\
         1\n",
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&ws);
}
