//! The compute kernels of `wasbox bench`, in portable Rust only (no intrinsics, no
//! platform-specific crates), so that native and wasm builds run the same code:
//!
//! - `sha256 MIB`: SHA-256 (FIPS 180-4, written out here) over MIB MiB of pseudo-random bytes;
//! - `json RECORDS ROUNDS`: build RECORDS JSON records, serialise and parse them back ROUNDS
//!   times;
//! - `files COUNT BYTES`: write COUNT files of BYTES bytes under `bench-files/` in the
//!   working directory, read them back, remove them.
//!
//! Each prints one line that depends on all of its work (so none of it can be skipped).

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let bit_len = (data.len() as u64).wrapping_mul(8);
    let mut tail = Vec::with_capacity(128);
    let full = data.len() - data.len() % 64;
    tail.extend_from_slice(&data[full..]);
    tail.push(0x80);
    while tail.len() % 64 != 56 {
        tail.push(0);
    }
    tail.extend_from_slice(&bit_len.to_be_bytes());
    for block in data[..full].chunks_exact(64).chain(tail.chunks_exact(64)) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// `n` pseudo-random bytes (xorshift64*), the same everywhere.
fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(n);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn json(records: usize, rounds: usize) -> String {
    use serde_json::{Value, json};
    let data: Vec<Value> = (0..records)
        .map(|i| {
            json!({
                "id": i,
                "name": format!("record-{i}"),
                "score": (i as f64) * 1.5,
                "tags": ["alpha", "beta", i.to_string()],
                "nested": {"ok": i % 3 == 0, "path": [i, i + 1, i + 2]},
            })
        })
        .collect();
    let mut doc = Value::Array(data);
    let mut total = 0usize;
    for _ in 0..rounds {
        let text = serde_json::to_string(&doc).unwrap_or_default();
        total += text.len();
        doc = serde_json::from_str(&text).unwrap_or(Value::Null);
    }
    format!("{total}")
}

fn files(count: usize, size: usize) -> Result<String, String> {
    let dir = std::path::Path::new("bench-files");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("bench-files: {e}"))?;
    let data = noise(size);
    for i in 0..count {
        std::fs::write(dir.join(format!("f{i}")), &data).map_err(|e| format!("f{i}: {e}"))?;
    }
    let mut total = 0usize;
    for i in 0..count {
        total += std::fs::read(dir.join(format!("f{i}")))
            .map_err(|e| format!("f{i}: {e}"))?
            .len();
    }
    std::fs::remove_dir_all(dir).map_err(|e| format!("bench-files: {e}"))?;
    Ok(format!("{total}"))
}

fn number(args: &[String], i: usize, name: &str) -> Result<usize, String> {
    args.get(i)
        .ok_or_else(|| format!("missing {name}"))?
        .parse()
        .map_err(|_| format!("{name} must be a number"))
}

/// Runs the kernel the arguments name; its output line or an error.
pub fn run(args: &[String]) -> Result<String, String> {
    match args.first().map(String::as_str) {
        Some("sha256") => Ok(hex(&sha256(&noise(number(args, 1, "MIB")? << 20)))),
        Some("json") => Ok(json(
            number(args, 1, "RECORDS")?,
            number(args, 2, "ROUNDS")?,
        )),
        Some("files") => files(number(args, 1, "COUNT")?, number(args, 2, "BYTES")?),
        _ => Err("usage: sha256 MIB | json RECORDS ROUNDS | files COUNT BYTES".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_known_digests() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        assert_eq!(
            hex(&sha256(long)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }
}
