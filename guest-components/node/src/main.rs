//! `node`: JavaScript on the QuickJS engine (quickjs-ng, through rquickjs), with what
//! scripts reach for in Node: `console` (Node's formatting), `process`, `require('fs' |
//! 'path' | 'util' | 'os' | 'child_process' | ...)`, CommonJS and ES modules, timers and
//! promises. The Node-facing parts are JavaScript (`prelude.js`) over a few native functions
//! defined here.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::rc::Rc;

use rquickjs::function::Rest;
use rquickjs::{
    Coerced, Context, Ctx, Exception, Function, Object, Persistent, Runtime, TypedArray, Value,
};

const PRELUDE: &str = include_str!("prelude.js");
const VERSION: &str = "v22.0.0-quickjs";

type R<T> = rquickjs::Result<T>;
type Args<'js> = Rest<Value<'js>>;

/// Argument `i` as JavaScript's `String(v)` makes it (`undefined` when missing).
fn string(args: &Args, i: usize) -> R<String> {
    match args.0.get(i) {
        Some(v) => Ok(v.get::<Coerced<String>>()?.0),
        None => Ok("undefined".into()),
    }
}

fn number(args: &Args, i: usize) -> R<f64> {
    match args.0.get(i) {
        Some(v) => Ok(v.get::<Coerced<f64>>()?.0),
        None => Ok(f64::NAN),
    }
}

fn truthy(args: &Args, i: usize) -> bool {
    args.0
        .get(i)
        .and_then(|v| v.get::<Coerced<bool>>().ok())
        .is_some_and(|b| b.0)
}

/// Argument `i` unless it is missing, `undefined` or `null`.
fn given<'a, 'js>(args: &'a Args<'js>, i: usize) -> Option<&'a Value<'js>> {
    args.0.get(i).filter(|v| !v.is_undefined() && !v.is_null())
}

/// Argument `i` as bytes: a `Uint8Array`'s (a `Buffer`'s) or an `ArrayBuffer`'s own, else
/// `String(v)` in UTF-8.
fn bytes(args: &Args, i: usize) -> R<Vec<u8>> {
    if let Some(o) = args.0.get(i).and_then(Value::as_object) {
        // SAFETY: the bytes are copied before anything else runs on this context (nothing
        // can detach or resize the buffer meanwhile).
        if let Some(a) = o.as_typed_array::<u8>() {
            return Ok(unsafe { a.as_bytes() }
                .map(<[u8]>::to_vec)
                .unwrap_or_default());
        }
        if let Some(b) = o.as_array_buffer() {
            return Ok(unsafe { b.as_bytes() }
                .map(<[u8]>::to_vec)
                .unwrap_or_default());
        }
    }
    Ok(string(args, i)?.into_bytes())
}

/// A `Uint8Array` of `data` (the prelude makes it a `Buffer`).
fn uint8_array<'js>(ctx: &Ctx<'js>, data: Vec<u8>) -> R<Value<'js>> {
    Ok(TypedArray::<u8>::new(ctx.clone(), data)?.into_value())
}

/// `decode(bytes)`: UTF-8 to a string, each maximal invalid sequence a U+FFFD (as the
/// WHATWG decoder, which Node's `TextDecoder` and `buf.toString()` follow).
fn decode(_: &Ctx, args: &Args) -> R<String> {
    Ok(String::from_utf8_lossy(&bytes(args, 0)?).into_owned())
}

/// `encode(string)`: its UTF-8 bytes.
fn encode<'js>(ctx: &Ctx<'js>, args: &Args<'js>) -> R<Value<'js>> {
    uint8_array(ctx, string(args, 0)?.into_bytes())
}

/// An `Error` the prelude turns into a Node-style one: `CODE|message`.
fn error(ctx: &Ctx, code: &str, msg: &str) -> rquickjs::Error {
    Exception::throw_message(ctx, &format!("{code}|{msg}"))
}

/// The same as a `TypeError` (what Node's network errors are).
fn type_error(ctx: &Ctx, code: &str, msg: &str) -> rquickjs::Error {
    Exception::throw_type(ctx, &format!("{code}|{msg}"))
}

fn io_error(ctx: &Ctx, e: &std::io::Error) -> rquickjs::Error {
    use std::io::ErrorKind::*;
    let (code, msg) = match e.kind() {
        NotFound => ("ENOENT", "no such file or directory"),
        AlreadyExists => ("EEXIST", "file already exists"),
        PermissionDenied => ("EACCES", "permission denied"),
        IsADirectory => ("EISDIR", "illegal operation on a directory"),
        NotADirectory => ("ENOTDIR", "not a directory"),
        DirectoryNotEmpty => ("ENOTEMPTY", "directory not empty"),
        InvalidInput => ("EINVAL", "invalid argument"),
        _ => ("EIO", "i/o error"),
    };
    error(ctx, code, msg)
}

fn write(_: &Ctx, args: &Args) -> R<()> {
    let fd = number(args, 0)? as i32;
    let s = bytes(args, 1)?;
    let ok = if fd == 2 {
        let _ = std::io::stdout().flush();
        std::io::stderr().write_all(&s).is_ok()
    } else {
        std::io::stdout().write_all(&s).is_ok()
    };
    if !ok {
        // The reader went away (`node x.js | head -1`): end like Node on EPIPE.
        let _ = std::io::stderr().flush();
        guest_support::exit(if fd == 2 { 1 } else { 0 });
    }
    Ok(())
}

/// `read(path, binary)`: a file's contents (`0` or `/dev/stdin`: all of stdin), as a
/// `Uint8Array` when `binary`, else as text (UTF-8, invalid sequences replaced).
fn read<'js>(ctx: &Ctx<'js>, args: &Args<'js>) -> R<Value<'js>> {
    let p = string(args, 0)?;
    let mut data = Vec::new();
    if p == "0" || p == "/dev/stdin" {
        std::io::stdin()
            .read_to_end(&mut data)
            .map_err(|e| io_error(ctx, &e))?;
    } else {
        if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
            return Err(error(ctx, "EISDIR", "illegal operation on a directory"));
        }
        data = std::fs::read(&p).map_err(|e| io_error(ctx, &e))?;
    }
    if truthy(args, 1) {
        return uint8_array(ctx, data);
    }
    let text = String::from_utf8_lossy(&data).into_owned();
    rquickjs::String::from_str(ctx.clone(), &text).map(|s| s.into_value())
}

fn write_file(ctx: &Ctx, args: &Args) -> R<()> {
    let p = string(args, 0)?;
    let data = bytes(args, 1)?;
    let mut o = std::fs::OpenOptions::new();
    if truthy(args, 2) {
        o.append(true).create(true);
    } else {
        o.write(true).create(true).truncate(true);
    }
    o.open(&p)
        .and_then(|mut f| f.write_all(&data))
        .map_err(|e| io_error(ctx, &e))
}

fn exists(_: &Ctx, args: &Args) -> R<bool> {
    Ok(std::fs::metadata(string(args, 0)?).is_ok())
}

fn readdir(ctx: &Ctx, args: &Args) -> R<String> {
    let p = string(args, 0)?;
    let mut names: Vec<String> = std::fs::read_dir(&p)
        .map_err(|e| io_error(ctx, &e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names.join("\n"))
}

fn mkdir(ctx: &Ctx, args: &Args) -> R<()> {
    let p = string(args, 0)?;
    if truthy(args, 1) {
        std::fs::create_dir_all(&p)
    } else {
        std::fs::create_dir(&p)
    }
    .map_err(|e| io_error(ctx, &e))
}

fn millis(t: std::io::Result<std::time::SystemTime>) -> f64 {
    t.ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// `size kind mtimeMs atimeMs birthtimeMs mode`, space-separated.
fn stat(ctx: &Ctx, args: &Args) -> R<String> {
    let p = string(args, 0)?;
    let m = if truthy(args, 1) {
        std::fs::symlink_metadata(&p)
    } else {
        std::fs::metadata(&p)
    }
    .map_err(|e| io_error(ctx, &e))?;
    let kind = if m.file_type().is_symlink() {
        "link"
    } else if m.is_dir() {
        "dir"
    } else {
        "file"
    };
    let mode = guest_support::file_mode(&p).unwrap_or(0o644);
    Ok(format!(
        "{} {kind} {} {} {} {mode}",
        m.len(),
        millis(m.modified()),
        millis(m.accessed()),
        millis(m.created())
    ))
}

fn remove(ctx: &Ctx, args: &Args) -> R<()> {
    let p = string(args, 0)?;
    match string(args, 1)?.as_str() {
        "file" => std::fs::remove_file(&p),
        "dir" => std::fs::remove_dir(&p),
        _ => match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
            Ok(_) => std::fs::remove_file(&p),
            Err(e) => Err(e),
        },
    }
    .map_err(|e| io_error(ctx, &e))
}

fn rename(ctx: &Ctx, args: &Args) -> R<()> {
    let a = string(args, 0)?;
    let b = string(args, 1)?;
    if truthy(args, 2) {
        std::fs::copy(&a, &b).map(drop)
    } else {
        std::fs::rename(&a, &b)
    }
    .map_err(|e| io_error(ctx, &e))
}

/// `symlink(target, path)`: the target as given (the host keeps an absolute one as written).
fn symlink(ctx: &Ctx, args: &Args) -> R<()> {
    rustix::fs::symlink(string(args, 0)?, string(args, 1)?)
        .map_err(|e| io_error(ctx, &std::io::Error::from(e)))
}

fn readlink(ctx: &Ctx, args: &Args) -> R<String> {
    std::fs::read_link(string(args, 0)?)
        .map(|t| t.to_string_lossy().into_owned())
        .map_err(|e| io_error(ctx, &e))
}

fn cwd(_: &Ctx, _: &Args) -> R<String> {
    Ok(guest_support::cwd())
}

fn chdir(ctx: &Ctx, args: &Args) -> R<()> {
    std::env::set_current_dir(string(args, 0)?).map_err(|e| io_error(ctx, &e))
}

fn exit(_: &Ctx, args: &Args) -> R<()> {
    let code = number(args, 0)? as i32;
    let _ = std::io::stdout().flush();
    guest_support::exit(code & 0xff)
}

/// The environment as `NAME=value` records separated by NUL.
fn env(_: &Ctx, _: &Args) -> R<String> {
    let s: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(s.join("\0"))
}

fn sleep(_: &Ctx, args: &Args) -> R<()> {
    let ms = number(args, 0)?;
    if ms > 0.0 {
        let _ = std::io::stdout().flush();
        std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1000.0));
    }
    Ok(())
}

fn now(_: &Ctx, _: &Args) -> R<f64> {
    Ok(millis(Ok(std::time::SystemTime::now())))
}

/// Runs `sh -c CMD` with `input` on stdin; returns `status\0stdout\0stderr`.
fn run(_: &Ctx, args: &Args) -> R<String> {
    use guest_support::process::{self, Error, Stdio};
    let cmd = string(args, 0)?;
    let input = string(args, 1)?;
    let (in_r, in_w) = process::pipe();
    let (out_r, out_w) = process::pipe();
    let (err_r, err_w) = process::pipe();
    let spawned = guest_support::spawn_sh(
        &cmd,
        Stdio::Handle(in_r),
        Stdio::Handle(out_w),
        Stdio::Handle(err_w),
    );
    for h in [in_r, out_w, err_w] {
        process::close(h);
    }
    let pid = match spawned {
        Ok(pid) => pid,
        Err(Error::NotFound(m) | Error::Limit(m) | Error::Io(m)) => {
            for h in [in_w, out_r, err_r] {
                process::close(h);
            }
            return Ok(format!("127\0\0{m}\n"));
        }
        Err(Error::BadHandle) => return Ok("127\0\0".into()),
    };
    let _ = process::write(in_w, input.as_bytes());
    process::close(in_w);
    let drain = |h: u32| String::from_utf8_lossy(&guest_support::read_to_end(h)).into_owned();
    let out = drain(out_r);
    let err = drain(err_r);
    let status = process::wait(pid);
    Ok(format!("{status}\0{out}\0{err}"))
}

fn usage() -> ! {
    eprintln!("Usage: node [options] [ -e script | script.js | - ] [arguments]");
    guest_support::exit(9)
}

fn main() {
    guest_support::start();
    let args: Vec<String> = std::env::args().collect();
    if args
        .first()
        .is_some_and(|a| a.rsplit('/').next() == Some("npm"))
    {
        let code = run_script(
            "file",
            "/usr/lib/node_modules/npm/bin/npm-cli.js",
            NPM,
            &args[1..],
        );
        guest_support::exit(code);
    }
    let mut i = 1;
    let mut mode = "file";
    let mut code: Option<String> = None;
    while i < args.len() {
        match args[i].as_str() {
            "-e" | "--eval" | "-p" | "--print" => {
                mode = if args[i].starts_with("-p") || args[i] == "--print" {
                    "print"
                } else {
                    "eval"
                };
                i += 1;
                match args.get(i) {
                    Some(c) => code = Some(c.clone()),
                    None => {
                        eprintln!("node: {} requires an argument", args[i - 1]);
                        guest_support::exit(9);
                    }
                }
                i += 1;
                break;
            }
            "-v" | "--version" => {
                println!("{VERSION}");
                guest_support::exit(0);
            }
            "-h" | "--help" => usage(),
            "-" => {
                mode = "stdin";
                i += 1;
                break;
            }
            "--" => {
                i += 1;
                break;
            }
            a if a.starts_with("--") => i += 1,
            _ => break,
        }
    }
    let (filename, source, rest) = match (mode, code) {
        ("eval" | "print", Some(c)) => ("[eval]".to_string(), c, args[i..].to_vec()),
        ("stdin", _) => {
            let mut s = String::new();
            let _ = std::io::stdin().read_to_string(&mut s);
            ("[stdin]".to_string(), s, args[i..].to_vec())
        }
        _ => match args.get(i) {
            Some(f) => {
                let abs = guest_support::absolute(f);
                match std::fs::read_to_string(&abs) {
                    Ok(s) => (abs, s, args[i + 1..].to_vec()),
                    Err(_) => {
                        eprintln!(
                            "node:internal/modules/cjs/loader\n\nError: Cannot find module '{abs}'\n  code: 'MODULE_NOT_FOUND'"
                        );
                        guest_support::exit(1);
                    }
                }
            }
            None => {
                let mut s = String::new();
                let _ = std::io::stdin().read_to_string(&mut s);
                ("[stdin]".to_string(), s, Vec::new())
            }
        },
    };
    let code = run_script(mode, &filename, &source, &rest);
    let _ = std::io::stdout().flush();
    guest_support::exit(code);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest_of(alg: &str, data: &[u8]) -> Option<Vec<u8>> {
    use sha2::Digest;
    Some(match alg {
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha224" => sha2::Sha224::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "md5" => md5::Md5::digest(data).to_vec(),
        _ => return None,
    })
}

/// `hash(alg, data)`: the digest of `data` (bytes, or a string's UTF-8), as bytes (for
/// `crypto.createHash`).
fn hash<'js>(ctx: &Ctx<'js>, args: &Args<'js>) -> R<Value<'js>> {
    let alg = string(args, 0)?.to_ascii_lowercase().replace('-', "");
    let data = bytes(args, 1)?;
    match digest_of(&alg, &data) {
        Some(d) => uint8_array(ctx, d),
        None => Err(error(
            ctx,
            "ERR_OSSL_EVP_UNSUPPORTED",
            "Digest method not supported",
        )),
    }
}

/// `hmac(alg, key, data)`: the HMAC, as bytes (for `crypto.createHmac`).
fn hmac<'js>(ctx: &Ctx<'js>, args: &Args<'js>) -> R<Value<'js>> {
    use hmac::{Hmac, Mac};
    let alg = string(args, 0)?.to_ascii_lowercase().replace('-', "");
    let key = bytes(args, 1)?;
    let data = bytes(args, 2)?;
    macro_rules! mac {
        ($t:ty) => {{
            let mut m = <Hmac<$t>>::new_from_slice(&key).expect("HMAC takes any key length");
            m.update(&data);
            m.finalize().into_bytes().to_vec()
        }};
    }
    let out = match alg.as_str() {
        "sha256" => mac!(sha2::Sha256),
        "sha512" => mac!(sha2::Sha512),
        "sha384" => mac!(sha2::Sha384),
        "sha1" => mac!(sha1::Sha1),
        "md5" => mac!(md5::Md5),
        _ => return Err(error(ctx, "ERR_OSSL_EVP_UNSUPPORTED", "Invalid digest")),
    };
    uint8_array(ctx, out)
}

/// `__wasbox_random(n)`: n random bytes from the host, in hex.
fn random(_: &Ctx, args: &Args) -> R<String> {
    let n = match given(args, 0) {
        Some(_) => number(args, 0)?,
        None => 0.0,
    };
    let n = if n.is_nan() {
        0.0
    } else {
        n.clamp(0.0, 65536.0)
    } as u64;
    Ok(hex(&wasip2::random::random::get_random_bytes(n)))
}

/// `fetch(method, url, headers, body[, file[, integrity]])`: one HTTP request through the
/// host (no redirects followed here: the prelude follows them, each a request checked
/// again). `headers` is `name: value` lines; `body` a string or bytes. The answer is
/// `[head, body]`: `STATUS\nname: value\n...\n\n` and the body's bytes (a `Uint8Array`), or
/// with `file` the body's bytes go to that file, checked against `integrity` when given
/// (`sha512-BASE64`, npm's form, or `sha1:HEX`), and the answer's body is empty. A failure
/// throws `CODE|message` as Node's errors carry them.
fn fetch<'js>(ctx: &Ctx<'js>, args: &Args<'js>) -> R<Value<'js>> {
    use guest_support::http::{Failure, Request, Target, Url, send};
    use wasip2::http::types::ErrorCode;
    let method = string(args, 0)?;
    let url = string(args, 1)?;
    let header_text = string(args, 2)?;
    let body = match given(args, 3) {
        Some(_) => Some(bytes(args, 3)?),
        None => None,
    };
    let bad = |msg: &str| type_error(ctx, "ERR_INVALID_URL", msg);
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(bad("only http: and https: URLs can be fetched"));
    }
    let parsed = Url::parse(&url).map_err(|(_, m)| bad(&m))?;
    let authority = parsed.authority();
    let authority = authority.as_str();
    let headers: Vec<(String, String)> = header_text
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let req = Request {
        method: &method,
        target: Target {
            https: parsed.https,
            authority,
            path: &parsed.path,
        },
        headers: &headers,
        body: body.as_deref(),
        deadline: None,
        connect_timeout: None,
    };
    let fail = |code: &str, msg: String| type_error(ctx, code, &msg);
    let host = parsed.host.as_str();
    let why = |f: Failure| -> rquickjs::Error {
        match f {
            Failure::Http(ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited) => {
                fail(
                    "ECONNREFUSED",
                    format!(
                        "connect ECONNREFUSED {authority}: blocked by the sandbox network policy"
                    ),
                )
            }
            Failure::Http(
                ErrorCode::DnsError(_) | ErrorCode::DnsTimeout | ErrorCode::DestinationNotFound,
            ) => fail("ENOTFOUND", format!("getaddrinfo ENOTFOUND {host}")),
            Failure::Http(ErrorCode::ConnectionRefused | ErrorCode::DestinationUnavailable) => {
                fail("ECONNREFUSED", format!("connect ECONNREFUSED {authority}"))
            }
            Failure::Http(ErrorCode::TlsCertificateError) => fail(
                "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
                "unable to get local issuer certificate".into(),
            ),
            Failure::Http(ErrorCode::ConnectionTimeout | ErrorCode::ConnectionReadTimeout)
            | Failure::Timeout => fail("ETIMEDOUT", format!("connect ETIMEDOUT {authority}")),
            Failure::Http(code) => fail("ECONNRESET", format!("{code:?}")),
            Failure::Other(m) => fail("ECONNRESET", m),
        }
    };
    let mut response = send(&req).map_err(why)?;
    let mut out = format!("{}\n", response.status);
    for (k, v) in &response.headers {
        out.push_str(&format!("{k}: {}\n", String::from_utf8_lossy(v)));
    }
    out.push('\n');
    let mut data = Vec::new();
    while let Some(piece) = response.chunk().map_err(why)? {
        data.extend_from_slice(&piece);
    }
    let answer = |head: String, body: Vec<u8>| -> R<Value<'js>> {
        let both = rquickjs::Array::new(ctx.clone())?;
        both.set(0, head)?;
        both.set(1, uint8_array(ctx, body)?)?;
        Ok(both.into_value())
    };
    if given(args, 4).is_none() || !(200..300).contains(&response.status) {
        return answer(out, data);
    }
    if given(args, 5).is_some() {
        let want = string(args, 5)?;
        let ok = match want.split_once('-') {
            Some((alg, b64)) if !want.starts_with("sha1:") => {
                digest_of(alg, &data).is_some_and(|d| guest_support::http::base64(&d) == b64)
            }
            _ => match want.strip_prefix("sha1:") {
                Some(h) => {
                    digest_of("sha1", &data).is_some_and(|d| hex(&d) == h.to_ascii_lowercase())
                }
                None => false,
            },
        };
        if !ok {
            return Err(fail(
                "EINTEGRITY",
                format!("{url}: integrity checksum failed (wanted {want})"),
            ));
        }
    }
    let path = string(args, 4)?;
    std::fs::write(&path, &data).map_err(|e| io_error(ctx, &e))?;
    answer(out, Vec::new())
}

/// `npm`: a script of the image run by this same engine (see npm.js).
const NPM: &str = include_str!("npm.js");

/// Promises rejected with no handler, as Node tracks them: a rejection still unhandled when
/// the promise jobs have run ends the program like an uncaught exception.
type Rejections = Rc<RefCell<Vec<(Persistent<Value<'static>>, Persistent<Value<'static>>)>>>;

/// The reason of the first rejection nobody handled, if any.
fn take_unhandled<'js>(ctx: &Ctx<'js>, rejections: &Rejections) -> Option<Value<'js>> {
    let (_, reason) = rejections.borrow_mut().drain(..).next()?;
    reason.restore(ctx).ok()
}

/// What an error thrown out of a call threw, as a value.
fn thrown<'js>(ctx: &Ctx<'js>, e: rquickjs::Error) -> Value<'js> {
    if e.is_exception() {
        ctx.catch()
    } else {
        Exception::from_message(ctx.clone(), &e.to_string())
            .map(|x| x.into_value())
            .unwrap_or_else(|_| Value::new_undefined(ctx.clone()))
    }
}

macro_rules! natives {
    ($ctx:expr, $globals:expr, $($name:literal => $f:ident),* $(,)?) => {
        $(
            $globals.set(
                concat!("__wasbox_", $name),
                Function::new($ctx.clone(), |ctx: Ctx<'js>, args: Args<'js>| $f(&ctx, &args))?,
            )?;
        )*
    };
}

fn install<'js>(ctx: &Ctx<'js>) -> R<Object<'js>> {
    let g = ctx.globals();
    natives!(ctx, g,
        "write" => write,
        "read" => read,
        "writeFile" => write_file,
        "exists" => exists,
        "readdir" => readdir,
        "mkdir" => mkdir,
        "stat" => stat,
        "remove" => remove,
        "rename" => rename,
        "symlink" => symlink,
        "readlink" => readlink,
        "cwd" => cwd,
        "chdir" => chdir,
        "exit" => exit,
        "env" => env,
        "sleep" => sleep,
        "now" => now,
        "run" => run,
        "hash" => hash,
        "hmac" => hmac,
        "random" => random,
        "fetch" => fetch,
        "decode" => decode,
        "encode" => encode,
    );
    prelude(ctx)
}

/// The prelude's bytecode (build.rs), for the build's QuickJS.
const PRELUDE_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude.qjsbc"));

/// Runs the prelude from its bytecode, or from its source if the bytecode cannot be read.
fn prelude<'js>(ctx: &Ctx<'js>) -> R<Object<'js>> {
    use rquickjs::qjs;
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `raw` is `ctx`'s live context; the function read from the bytecode is handed to
    // `JS_EvalFunction`, which frees it, and its result is owned by the `Value` made of it.
    let value = unsafe {
        let f = qjs::JS_ReadObject(
            raw,
            PRELUDE_BYTECODE.as_ptr(),
            PRELUDE_BYTECODE.len() as _,
            qjs::JS_READ_OBJ_BYTECODE as i32,
        );
        if qjs::JS_IsException(f) {
            ctx.catch();
            return ctx.eval(PRELUDE);
        }
        Value::from_raw(ctx.clone(), qjs::JS_EvalFunction(raw, f))
    };
    if value.is_exception() {
        return Err(rquickjs::Error::Exception);
    }
    value.get()
}

fn run_script(mode: &str, filename: &str, source: &str, rest: &[String]) -> i32 {
    let Ok(rt) = Runtime::new() else {
        return 70;
    };
    let rejections = Rejections::default();
    let tracked = rejections.clone();
    rt.set_host_promise_rejection_tracker(Some(Box::new(
        move |ctx: Ctx<'_>, promise: Value<'_>, reason: Value<'_>, handled: bool| {
            let mut list = tracked.borrow_mut();
            if handled {
                list.retain(|(p, _)| p.clone().restore(&ctx).map_or(true, |p| p != promise));
            } else {
                list.push((
                    Persistent::save(&ctx, promise),
                    Persistent::save(&ctx, reason),
                ));
            }
        },
    )));
    let Ok(context) = Context::full(&rt) else {
        return 70;
    };
    let code = context.with(|ctx| {
        let host = match install(&ctx) {
            Ok(h) => h,
            Err(e) => {
                let v = thrown(&ctx, e);
                let text = v
                    .get::<Coerced<String>>()
                    .map_or_else(|_| "?".into(), |s| s.0);
                eprintln!("node: prelude failed: {text}");
                return 70;
            }
        };
        let hook = |name: &str| host.get::<_, Function>(name);
        let argv: Vec<String> = std::iter::once("/usr/bin/node".to_string())
            .chain((mode == "file").then(|| filename.to_string()))
            .chain(rest.iter().cloned())
            .collect();
        let argv = argv.join("\0");
        let started = hook("main")
            .and_then(|f| f.call::<_, ()>((mode, filename, source, argv.as_str(), VERSION)));
        let mut failed = started.err().map(|e| thrown(&ctx, e));
        // The event loop: promise jobs, then timers, until no work is left.
        while failed.is_none() {
            while ctx.execute_pending_job() {}
            if let Some(reason) = take_unhandled(&ctx, &rejections) {
                failed = Some(reason);
                break;
            }
            match hook("tick").and_then(|f| f.call::<_, Value>(())) {
                Ok(v) if v.as_bool() == Some(true) => continue,
                Ok(_) => break,
                Err(e) => failed = Some(thrown(&ctx, e)),
            }
        }
        if let Some(v) = failed {
            let told = hook("uncaught").and_then(|f| f.call::<_, ()>((v.clone(),)));
            if told.is_err() {
                let text = v
                    .get::<Coerced<String>>()
                    .map_or_else(|_| "?".into(), |s| s.0);
                eprintln!("Uncaught {text}");
            }
            return 1;
        }
        hook("exitCode")
            .and_then(|f| f.call::<_, Coerced<f64>>(()))
            .map_or(0, |n| n.0 as i32)
    });
    // The process ends now: tearing the heap down would only cost time.
    std::mem::forget(context);
    std::mem::forget(rt);
    code
}
