//! Fuzz tests of the parsers a client controls that are not an HTTP body: the PTY's input
//! stream (the host's line discipline) and SDK 1.x stdio request lines. The HTTP and
//! JSON-RPC front-ends are fuzzed beside their other tests (`routers::fuzz_*`,
//! `sidecar::fuzz_*`, `bouvet::fuzz_*`). Cases: see `support::fuzz`.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::select;
use wasbox_runtime::{PtyConfig, SessionConfig, Sessions};

use crate::support::fuzz;
use crate::support::runtime::runtime;

/// Typed input: any bytes but Ctrl-D (which would end the shell's input), weighted towards
/// the keys the line discipline handles (Ctrl-C, Ctrl-U, backspace, CR, LF, escape
/// sequences) and towards lines longer than a terminal line may be.
fn keystrokes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => any::<u8>().prop_filter("no Ctrl-D", |b| *b != 4),
        3 => select(vec![b'\r', b'\n', 0x03, 0x15, 0x7f, 0x08, 0x1b, b'[', b'A', 0x00]),
        4 => b' '..=b'~',
    ];
    prop_oneof![
        8 => proptest::collection::vec(byte, 0..300),
        1 => (4000usize..9000).prop_map(|n| vec![b'x'; n]),
        1 => Just("ééé€\u{1F600}".as_bytes().to_vec()),
    ]
}

#[test]
fn fuzz_pty_input() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sessions = Sessions::new(4);
    let session = sessions
        .create(SessionConfig::new("fuzz"), || {
            runtime().sandbox(Default::default())
        })
        .unwrap();
    let _guard = rt.enter();
    let pty = rt
        .block_on(session.open_pty("p".into(), PtyConfig::default()))
        .unwrap();
    fuzz::runner()
        .run(&proptest::collection::vec(keystrokes(), 1..6), |chunks| {
            rt.block_on(async {
                for chunk in &chunks {
                    pty.send(chunk).await;
                    let out = pty.recv(64 << 10, Duration::ZERO).await;
                    assert!(out.data.len() <= 64 << 10);
                    assert!(
                        !out.exited,
                        "the shell ended ({:?}) on {chunks:?}; last output {:?}",
                        out.exit_code,
                        String::from_utf8_lossy(&out.data[out.data.len().saturating_sub(600)..])
                    );
                }
            });
            Ok(())
        })
        .unwrap();
    // Whatever was typed, the terminal still works: interrupt, clear the line, run.
    rt.block_on(async {
        pty.send(b"\x03").await;
        pty.send(b"\x15echo fuzz-$((40+2))\r").await;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("fuzz-42") {
            assert!(
                Instant::now() < deadline,
                "the PTY stopped answering: {:?}",
                String::from_utf8_lossy(&seen[seen.len().saturating_sub(2000)..])
            );
            let out = pty.recv(64 << 10, Duration::from_millis(200)).await;
            assert!(!out.exited);
            seen.extend_from_slice(&out.data);
        }
    });
    sessions.end_all("test over");
}

#[test]
fn fuzz_sdk1_request_lines() {
    use wasbox::term::stdio::parse_request;
    const KEYS: &[&str] = &[
        "instruction",
        "step",
        "last_command",
        "output",
        "exit_code",
        "cwd",
    ];
    let template = serde_json::json!({
        "instruction": "do it", "step": 2, "last_command": "ls", "output": "a\n",
        "exit_code": 0, "cwd": "/app"
    });
    fuzz::runner()
        .run(&fuzz::body(template, KEYS), |bytes| {
            let line = String::from_utf8_lossy(&bytes);
            match parse_request(&line) {
                Ok(req) => {
                    // What it accepted is what the line said.
                    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                    assert_eq!(v["instruction"], req.instruction.as_str());
                    assert!(req.step >= 1 || v.get("step").is_some());
                }
                Err(e) => assert!(!e.is_empty()),
            }
            Ok(())
        })
        .unwrap();
}
