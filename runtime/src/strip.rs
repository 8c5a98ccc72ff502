//! Dropping the `name` custom sections of a component's core modules before it is compiled.
//!
//! wasmtime keeps every function name of a module in the compiled component's metadata, and
//! loading the component deserialises them all: for `sh` (2,700 functions) that was 0.6-1 ms
//! of a whole `wasbox run`. The names serve only wasm backtraces and profilers, and the
//! runtime prints no wasm backtrace (see `engine::config`), so they are left out.

/// The preamble's layer and version of a component (a core module has `01 00 00 00`).
const COMPONENT: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];
/// How deep components may nest before the input is compiled as it is.
const MAX_DEPTH: u32 = 16;

/// `wasm` without the `name` sections of its core modules, or `None` when it has none or is
/// not well formed enough to walk (then it is compiled as it is, and any error is wasmtime's).
pub(crate) fn without_names(wasm: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(wasm.len());
    match strip(wasm, &mut out, 0) {
        Some(true) => Some(out),
        _ => None,
    }
}

/// Copies the binary `bin` (a component or a core module) to `out` without the core modules'
/// `name` sections; whether it dropped any. `None` for anything it cannot walk.
fn strip(bin: &[u8], out: &mut Vec<u8>, depth: u32) -> Option<bool> {
    if depth > MAX_DEPTH || bin.get(..4)? != b"\0asm" {
        return None;
    }
    let component = *bin.get(4..8)? == COMPONENT;
    out.extend_from_slice(&bin[..8]);
    let mut rest = &bin[8..];
    let mut dropped = false;
    while let Some((&id, tail)) = rest.split_first() {
        let (size, tail) = read_u32(tail)?;
        let body = tail.get(..size as usize)?;
        rest = &tail[size as usize..];
        if !component && id == 0 && custom_name(body)? == b"name" {
            dropped = true;
            continue;
        }
        out.push(id);
        // Section 1 of a component is a core module, section 4 a nested component.
        if component && (id == 1 || id == 4) {
            let mut inner = Vec::with_capacity(body.len());
            dropped |= strip(body, &mut inner, depth + 1)?;
            write_u32(out, inner.len() as u32);
            out.extend_from_slice(&inner);
        } else {
            write_u32(out, size);
            out.extend_from_slice(body);
        }
    }
    Some(dropped)
}

fn custom_name(body: &[u8]) -> Option<&[u8]> {
    let (len, rest) = read_u32(body)?;
    rest.get(..len as usize)
}

/// An unsigned LEB128 of at most 32 bits and what follows it.
fn read_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let mut value: u32 = 0;
    for (i, &b) in bytes.iter().enumerate().take(5) {
        if i == 4 && b > 0x0f {
            return None;
        }
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

fn write_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(id: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![id];
        write_u32(&mut v, body.len() as u32);
        v.extend_from_slice(body);
        v
    }

    fn custom(name: &str, data: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        write_u32(&mut body, name.len() as u32);
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(data);
        section(0, &body)
    }

    fn module(sections: &[Vec<u8>]) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        sections.iter().for_each(|s| m.extend_from_slice(s));
        m
    }

    fn component(sections: &[Vec<u8>]) -> Vec<u8> {
        let mut c = b"\0asm".to_vec();
        c.extend_from_slice(&COMPONENT);
        sections.iter().for_each(|s| c.extend_from_slice(s));
        c
    }

    #[test]
    fn names_of_nested_modules_go_and_everything_else_stays() {
        // A name section long enough that the module's size needs a longer LEB128.
        let names = custom("name", &[7; 200]);
        let types = section(1, &[0x01, 0x60, 0x00, 0x00]);
        let producers = custom("producers", b"kept");
        let inner = module(&[types.clone(), names.clone(), producers.clone()]);
        let nested = component(&[section(1, &inner)]);
        let c = component(&[
            section(1, &inner),
            section(4, &nested),
            custom("component-name", b"kept too"),
        ]);
        let stripped_inner = module(&[types, producers]);
        let expected = component(&[
            section(1, &stripped_inner),
            section(4, &component(&[section(1, &stripped_inner)])),
            custom("component-name", b"kept too"),
        ]);
        assert_eq!(without_names(&c).unwrap(), expected);
        // A bare module loses its names too; one without any is left alone.
        assert_eq!(without_names(&module(&[names])).unwrap(), module(&[]));
        assert_eq!(without_names(&expected), None);
    }

    #[test]
    fn what_cannot_be_walked_is_left_alone() {
        let inner = module(&[custom("name", b"x")]);
        let good = component(&[section(1, &inner)]);
        // Truncated anywhere, a section size past the end, an overlong LEB128, not wasm.
        for cut in 1..good.len() {
            assert_eq!(without_names(&good[..cut]), None, "cut at {cut}");
        }
        let mut oversized = good.clone();
        oversized[9] = 0x7f;
        assert_eq!(without_names(&oversized), None);
        let overlong = [
            b"\0asm\x01\0\0\0".as_slice(),
            &[0, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ]
        .concat();
        assert_eq!(without_names(&overlong), None);
        assert_eq!(without_names(b"not wasm at all"), None);
        // Nesting past the bound is compiled as it is rather than walked.
        let mut deep = good;
        for _ in 0..=MAX_DEPTH {
            deep = component(&[section(4, &deep)]);
        }
        assert_eq!(without_names(&deep), None);
    }
}
