//! Where the shell's commands read and write: its own streams, pipe handles of the process
//! host, workspace files, or memory (command substitution, here-documents).

use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::rc::Rc;

use guest_support::process::{self, Stdio};

/// An output of a command.
#[derive(Clone)]
pub enum Out {
    /// The shell's own stdout.
    Stdout,
    /// The shell's own stderr.
    Stderr,
    Null,
    /// The write end of a pipe the shell holds.
    Handle(u32),
    /// A workspace file (absolute sandbox path), already created or truncated: every write
    /// appends, so `{ a; b; } > f` keeps both.
    File(String),
    /// Memory (command substitution).
    Buffer(Rc<RefCell<Vec<u8>>>),
}

/// An input of a command.
#[derive(Clone)]
pub enum In {
    Stdin,
    Null,
    Handle(u32),
    File(String),
    /// Text to feed (here-documents, here-strings, a file read by in-shell commands, the
    /// output of an earlier in-shell stage), with a read position shared by every reader.
    Bytes(Rc<Feed>),
}

/// Bytes and how far in-shell readers have got through them.
pub struct Feed {
    pub data: Vec<u8>,
    pub pos: Cell<usize>,
}

impl In {
    pub fn bytes(data: Vec<u8>) -> In {
        In::Bytes(Rc::new(Feed {
            data,
            pos: Cell::new(0),
        }))
    }
}

impl Feed {
    /// Takes what is left.
    pub fn take_rest(&self) -> &[u8] {
        let pos = self.pos.replace(self.data.len()).min(self.data.len());
        &self.data[pos..]
    }
}

/// The three standard streams of a command.
#[derive(Clone)]
pub struct Io {
    pub stdin: In,
    pub stdout: Out,
    pub stderr: Out,
}

impl Io {
    pub fn standard() -> Self {
        Io {
            stdin: In::Stdin,
            stdout: Out::Stdout,
            stderr: Out::Stderr,
        }
    }
}

impl Out {
    /// Writes all of `data`; false when the output is gone (broken pipe, unwritable file).
    pub fn write(&self, data: &[u8]) -> bool {
        match self {
            Out::Stdout => {
                let mut o = std::io::stdout().lock();
                o.write_all(data).and_then(|()| o.flush()).is_ok()
            }
            Out::Stderr => std::io::stderr().write_all(data).is_ok(),
            Out::Null => true,
            Out::Handle(h) => process::write(*h, data).is_ok(),
            Out::File(path) => std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(data))
                .is_ok(),
            Out::Buffer(b) => {
                b.borrow_mut().extend_from_slice(data);
                true
            }
        }
    }

    pub fn write_str(&self, s: &str) -> bool {
        self.write(s.as_bytes())
    }

    /// How a child's stream maps onto this output, when it can without the shell copying.
    pub fn as_stdio(&self) -> Option<Stdio> {
        Some(match self {
            Out::Stdout => Stdio::InheritStdout,
            Out::Stderr => Stdio::InheritStderr,
            Out::Null => Stdio::Null,
            Out::Handle(h) => Stdio::Handle(*h),
            Out::File(p) => Stdio::AppendFile(p.clone()),
            Out::Buffer(_) => return None,
        })
    }
}

impl In {
    /// How a child's stdin maps onto this input, when it can without the shell copying.
    pub fn as_stdio(&self) -> Option<Stdio> {
        Some(match self {
            In::Stdin => Stdio::Inherit,
            In::Null => Stdio::Null,
            In::Handle(h) => Stdio::Handle(*h),
            In::File(p) => Stdio::ReadFile(p.clone()),
            In::Bytes(_) => return None,
        })
    }
}

/// Reads one line (without its newline) from an input, a byte at a time so that nothing
/// past the line is consumed; `None` at end of file.
pub fn read_line(input: &In) -> Option<String> {
    read_until(input, b'\n', None)
}

/// Reads up to `delim` (not kept) or `max` bytes; `None` at the end of input with nothing
/// read.
pub fn read_until(input: &In, delim: u8, max: Option<usize>) -> Option<String> {
    let mut line = Vec::new();
    let mut got_any = false;
    loop {
        let byte = match input {
            In::Stdin => {
                let mut b = [0u8; 1];
                match std::io::stdin().read(&mut b) {
                    Ok(1) => Some(b[0]),
                    _ => None,
                }
            }
            In::Handle(h) => match process::read(*h, 1) {
                Ok(c) if !c.is_empty() => Some(c[0]),
                _ => None,
            },
            In::Bytes(f) => {
                let pos = f.pos.get();
                f.pos.set(pos + 1);
                f.data.get(pos).copied()
            }
            In::File(_) | In::Null => None,
        };
        match byte {
            None => return got_any.then(|| String::from_utf8_lossy(&line).into_owned()),
            Some(b) if b == delim => return Some(String::from_utf8_lossy(&line).into_owned()),
            Some(b) => {
                got_any = true;
                line.push(b);
                if max.is_some_and(|m| line.len() >= m) {
                    return Some(String::from_utf8_lossy(&line).into_owned());
                }
            }
        }
    }
}
