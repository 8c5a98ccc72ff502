//! The compression formats of `gzip`, `bzip2`, `xz` and `lzma` (and of `tar -z`, `-j`,
//! `-J`, `--lzma`): flate2, the pure-Rust libbzip2 port, and lzma-rust2. Whole buffers in
//! and out: the tools read their input before they write.

use std::io::{self, Read, Write};

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Codec {
    Gzip,
    Bzip2,
    Xz,
    /// The legacy `.lzma` ("LZMA alone") format.
    Lzma,
}

/// Memory an xz or lzma decoder may take for its dictionary (xz's own default limit for
/// decompression is unlimited; 1 GiB keeps a hostile header from taking the sandbox's).
const DICT_LIMIT_KIB: u32 = 1 << 20;

impl Codec {
    /// The format of `data` by its magic bytes.
    pub fn sniff(data: &[u8]) -> Option<Codec> {
        if data.starts_with(&[0x1f, 0x8b]) {
            Some(Codec::Gzip)
        } else if data.len() >= 4 && data.starts_with(b"BZh") && (b'1'..=b'9').contains(&data[3]) {
            Some(Codec::Bzip2)
        } else if data.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Codec::Xz)
        } else if data.len() >= 13 && data[..3] == [0x5d, 0, 0] {
            // The magic GNU tar and file(1) go by: the default properties (lc=3, lp=0,
            // pb=2) and a dictionary size's low bytes.
            Some(Codec::Lzma)
        } else {
            None
        }
    }

    /// The format an archive's name implies (`tar -a`).
    pub fn by_name(name: &str) -> Option<Codec> {
        let n = name.to_ascii_lowercase();
        let ends = |s: &[&str]| s.iter().any(|e| n.ends_with(e));
        if ends(&[".gz", ".tgz", ".taz"]) {
            Some(Codec::Gzip)
        } else if ends(&[".bz2", ".tbz", ".tbz2", ".tz2"]) {
            Some(Codec::Bzip2)
        } else if ends(&[".xz", ".txz"]) {
            Some(Codec::Xz)
        } else if ends(&[".lzma", ".tlz"]) {
            Some(Codec::Lzma)
        } else {
            None
        }
    }

    /// The suffix the tool adds and removes.
    pub fn suffix(self) -> &'static str {
        match self {
            Codec::Gzip => ".gz",
            Codec::Bzip2 => ".bz2",
            Codec::Xz => ".xz",
            Codec::Lzma => ".lzma",
        }
    }

    /// Decompresses every stream of `data` (concatenated streams, as the tools do).
    pub fn decode(self, data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Codec::Gzip => {
                flate2::read::MultiGzDecoder::new(data).read_to_end(&mut out)?;
            }
            Codec::Bzip2 => {
                bzip2::read::MultiBzDecoder::new(data).read_to_end(&mut out)?;
            }
            Codec::Xz => {
                if !data.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "File format not recognized",
                    ));
                }
                lzma_rust2::XzReader::new_mem_limit(data, true, DICT_LIMIT_KIB)
                    .read_to_end(&mut out)?;
            }
            Codec::Lzma => {
                lzma_rust2::LzmaReader::new_mem_limit(data, DICT_LIMIT_KIB, None)?
                    .read_to_end(&mut out)?;
            }
        }
        Ok(out)
    }

    /// Compresses `data` at `level` (1-9; 0 is xz's fastest). xz and lzma presets above 6
    /// are taken as 6: their dictionaries (up to 64 MiB, about 700 MiB for the encoder)
    /// would not fit a sandbox's memory, as xz itself lowers them under a memory limit; the
    /// output is the same format.
    pub fn encode(self, data: &[u8], level: u32) -> io::Result<Vec<u8>> {
        match self {
            Codec::Gzip => {
                let mut e = flate2::write::GzEncoder::new(
                    Vec::new(),
                    flate2::Compression::new(level.clamp(1, 9)),
                );
                e.write_all(data)?;
                e.finish()
            }
            Codec::Bzip2 => {
                let mut e = bzip2::write::BzEncoder::new(
                    Vec::new(),
                    bzip2::Compression::new(level.clamp(1, 9)),
                );
                e.write_all(data)?;
                e.finish()
            }
            Codec::Xz => encode_xz(data, level, lzma_rust2::CheckType::Crc64),
            Codec::Lzma => {
                let mut out = Vec::new();
                let options = lzma_rust2::LzmaOptions::with_preset(level.min(6));
                // Size unknown and an end marker, as xz writes it ("streamed").
                let mut w = lzma_rust2::LzmaWriter::new_use_header(&mut out, &options, None)?;
                w.write_all(data)?;
                w.finish()?;
                Ok(out)
            }
        }
    }
}

/// xz with the integrity check `check` (`xz --check`).
pub fn encode_xz(data: &[u8], level: u32, check: lzma_rust2::CheckType) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut options = lzma_rust2::XzOptions::with_preset(level.min(6));
    options.set_check_sum_type(check);
    let mut w = lzma_rust2::XzWriter::new(&mut out, options)?;
    w.write_all(data)?;
    w.finish()?;
    Ok(out)
}
