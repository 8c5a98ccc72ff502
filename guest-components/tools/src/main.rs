//! The multi-call program of the base image's larger tools, kept apart from `coreutils` so
//! that a plain `ls` never loads a jq interpreter or a deflate codec: `jq`, `gzip`,
//! `gunzip`, `zcat`, `tar`, `zip`, `unzip` and `bc`. `argv[0]` names the applet; `tools APPLET
//! ARGS...` works too.

mod archive;
mod bc;
mod jq;

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
        "bc" => bc::main(args),
        "gzip" => archive::gzip(args, archive::GzipMode::Compress),
        "gunzip" => archive::gzip(args, archive::GzipMode::Decompress),
        "zcat" => archive::gzip(args, archive::GzipMode::Cat),
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
