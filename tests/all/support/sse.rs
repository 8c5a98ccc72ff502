//! A server-sent events client over a raw TCP connection: sends the GET, then decodes the
//! chunked body as it comes and yields events (`event:`, `id:`, `data:`), skipping comments
//! (keep-alives), which it counts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::support::http::read_head;

#[derive(Clone, Debug, PartialEq)]
pub struct SseEvent {
    pub name: String,
    pub id: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

pub struct SseStream {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    chunked: bool,
    /// Decoded body bytes not yet split into lines.
    pending: Vec<u8>,
    done: bool,
    /// Comment lines seen (keep-alives).
    pub comments: usize,
}

impl SseStream {
    /// `GET path` with these headers; reads the status line and headers.
    pub fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> SseStream {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut head =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).unwrap();
        let mut reader = BufReader::new(s);
        let (status, mut headers) = read_head(&mut reader);
        for (k, _) in &mut headers {
            k.make_ascii_lowercase();
        }
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        SseStream {
            reader,
            status,
            headers,
            chunked,
            pending: Vec::new(),
            done: false,
            comments: 0,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// More body bytes; false at the end of the body.
    fn fill(&mut self) -> bool {
        if self.done {
            return false;
        }
        if !self.chunked {
            let mut buf = [0u8; 4096];
            let n = self.reader.read(&mut buf).unwrap_or(0);
            self.pending.extend_from_slice(&buf[..n]);
            if n == 0 {
                self.done = true;
            }
            return n > 0;
        }
        let mut size = String::new();
        if self.reader.read_line(&mut size).unwrap_or(0) == 0 {
            self.done = true;
            return false;
        }
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            self.done = true;
            return false;
        }
        let mut chunk = vec![0; n + 2];
        self.reader.read_exact(&mut chunk).unwrap();
        self.pending.extend_from_slice(&chunk[..n]);
        true
    }

    fn line(&mut self) -> Option<String> {
        loop {
            if let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=i).collect();
                return Some(
                    String::from_utf8_lossy(&line)
                        .trim_end_matches(['\r', '\n'])
                        .to_string(),
                );
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// The next event, or `None` when the stream ended.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        let (mut name, mut id, mut data) = (String::from("message"), None, Vec::new());
        let mut any = false;
        loop {
            let line = self.line()?;
            if line.is_empty() {
                if any {
                    return Some(SseEvent {
                        name,
                        id,
                        data: data.join("\n"),
                    });
                }
                continue;
            }
            if line.starts_with(':') {
                self.comments += 1;
                continue;
            }
            any = true;
            let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
            let value = value.strip_prefix(' ').unwrap_or(value).to_string();
            match field {
                "event" => name = value,
                "id" => id = Some(value),
                "data" => data.push(value),
                _ => {}
            }
        }
    }

    /// Every event until the stream ends.
    pub fn all(&mut self) -> Vec<SseEvent> {
        std::iter::from_fn(|| self.next_event()).collect()
    }
}
