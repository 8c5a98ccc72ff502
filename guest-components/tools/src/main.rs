//! The multi-call program of the base image's larger tools, kept apart from `coreutils` so
//! that a plain `ls` never loads a jq interpreter or a deflate codec: `jq`, `gzip`,
//! `gunzip`, `zcat`, `bzip2`, `bunzip2`, `bzcat`, `xz`, `unxz`, `xzcat`, `lzma`, `unlzma`,
//! `lzcat`, `tar`, `zip`, `unzip`, `bc`, `git`, `make`, and
//! `curl` and `wget` (HTTP through the host's egress policy). `argv[0]` names the applet; `tools APPLET
//! ARGS...` works too.

mod archive;
mod bc;
mod codec;
mod git;
mod jq;
mod jq_assign;
mod make;
mod net;

use archive::GzipMode;
use codec::Codec;

fn main() {
    guest_support::start();
    let mut args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut name = base_name(args.first());
    if name == "tools" {
        args.remove(0);
        name = base_name(args.first());
    }
    let code = match name.as_str() {
        "jq" => jq::main(args),
        "git" => git::main(args),
        "bc" => bc::main(args),
        "make" | "gmake" => make::main(args),
        "curl" => net::curl::main(args),
        "wget" => net::wget::main(args),
        "gzip" => archive::compressor(args, Codec::Gzip, GzipMode::Compress),
        "gunzip" => archive::compressor(args, Codec::Gzip, GzipMode::Decompress),
        "zcat" => archive::compressor(args, Codec::Gzip, GzipMode::Cat),
        "bzip2" => archive::compressor(args, Codec::Bzip2, GzipMode::Compress),
        "bunzip2" => archive::compressor(args, Codec::Bzip2, GzipMode::Decompress),
        "bzcat" => archive::compressor(args, Codec::Bzip2, GzipMode::Cat),
        "xz" => archive::compressor(args, Codec::Xz, GzipMode::Compress),
        "unxz" => archive::compressor(args, Codec::Xz, GzipMode::Decompress),
        "xzcat" => archive::compressor(args, Codec::Xz, GzipMode::Cat),
        "lzma" => archive::compressor(args, Codec::Lzma, GzipMode::Compress),
        "unlzma" => archive::compressor(args, Codec::Lzma, GzipMode::Decompress),
        "lzcat" => archive::compressor(args, Codec::Lzma, GzipMode::Cat),
        "tar" => archive::tar(args),
        "zip" => archive::zip(args),
        "unzip" => archive::unzip(args),
        _ => {
            eprintln!("tools: {name}: no such applet");
            127
        }
    };
    guest_support::exit(code);
}

fn base_name(arg: Option<&String>) -> String {
    arg.map(|a| a.rsplit('/').next().unwrap_or_default().to_string())
        .unwrap_or_default()
}
