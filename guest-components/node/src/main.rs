//! `node`: JavaScript on the Boa engine, with what scripts reach for in Node: `console`
//! (Node's formatting), `process`, `require('fs' | 'path' | 'util' | 'os' |
//! 'child_process')`, CommonJS modules, timers and promises. The Node-facing parts are
//! JavaScript (`prelude.js`) over a few native functions defined here.

use std::io::{Read, Write};

use boa_engine::{
    Context, JsArgs, JsError, JsNativeError, JsResult, JsString, JsValue, Source,
    native_function::NativeFunction,
};

const PRELUDE: &str = include_str!("prelude.js");
const VERSION: &str = "v22.0.0-boa";

fn arg_string(args: &[JsValue], i: usize, ctx: &mut Context) -> JsResult<String> {
    Ok(args
        .get_or_undefined(i)
        .to_string(ctx)?
        .to_std_string_escaped())
}

fn text(s: &str) -> JsValue {
    JsValue::from(JsString::from(s))
}

/// An error the prelude turns into a Node-style one: `CODE|message`.
fn io_error(e: &std::io::Error) -> JsError {
    use std::io::ErrorKind::*;
    let (code, msg) = match e.kind() {
        NotFound => ("ENOENT", "no such file or directory"),
        AlreadyExists => ("EEXIST", "file already exists"),
        PermissionDenied => ("EACCES", "permission denied"),
        IsADirectory => ("EISDIR", "illegal operation on a directory"),
        NotADirectory => ("ENOTDIR", "not a directory"),
        DirectoryNotEmpty => ("ENOTEMPTY", "directory not empty"),
        _ => ("EIO", "i/o error"),
    };
    JsNativeError::error()
        .with_message(format!("{code}|{msg}"))
        .into()
}

fn path_arg(args: &[JsValue], ctx: &mut Context) -> JsResult<String> {
    arg_string(args, 0, ctx)
}

fn write(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fd = args.get_or_undefined(0).to_number(ctx)? as i32;
    let s = arg_string(args, 1, ctx)?;
    let ok = if fd == 2 {
        let _ = std::io::stdout().flush();
        std::io::stderr().write_all(s.as_bytes()).is_ok()
    } else {
        std::io::stdout().write_all(s.as_bytes()).is_ok()
    };
    if !ok {
        // The reader went away (`node x.js | head -1`): end like Node on EPIPE.
        let _ = std::io::stderr().flush();
        guest_support::exit(if fd == 2 { 1 } else { 0 });
    }
    Ok(JsValue::undefined())
}

fn read(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    let mut data = Vec::new();
    if p == "0" || p == "/dev/stdin" {
        std::io::stdin()
            .read_to_end(&mut data)
            .map_err(|e| io_error(&e))?;
    } else {
        if std::fs::metadata(&p).is_ok_and(|m| m.is_dir()) {
            return Err(JsNativeError::error()
                .with_message("EISDIR|illegal operation on a directory")
                .into());
        }
        data = std::fs::read(&p).map_err(|e| io_error(&e))?;
    }
    Ok(text(&String::from_utf8_lossy(&data)))
}

fn write_file(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    let data = arg_string(args, 1, ctx)?;
    let append = args.get_or_undefined(2).to_boolean();
    let mut o = std::fs::OpenOptions::new();
    if append {
        o.append(true).create(true);
    } else {
        o.write(true).create(true).truncate(true);
    }
    o.open(&p)
        .and_then(|mut f| f.write_all(data.as_bytes()))
        .map_err(|e| io_error(&e))?;
    Ok(JsValue::undefined())
}

fn exists(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    Ok(JsValue::from(std::fs::metadata(&p).is_ok()))
}

fn readdir(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    let mut names: Vec<String> = std::fs::read_dir(&p)
        .map_err(|e| io_error(&e))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(text(&names.join("\n")))
}

fn mkdir(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    let r = if args.get_or_undefined(1).to_boolean() {
        std::fs::create_dir_all(&p)
    } else {
        std::fs::create_dir(&p)
    };
    r.map_err(|e| io_error(&e))?;
    Ok(JsValue::undefined())
}

fn millis(t: std::io::Result<std::time::SystemTime>) -> f64 {
    t.ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// `size kind mtimeMs atimeMs birthtimeMs mode`, space-separated.
fn stat(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    let m = if args.get_or_undefined(1).to_boolean() {
        std::fs::symlink_metadata(&p)
    } else {
        std::fs::metadata(&p)
    }
    .map_err(|e| io_error(&e))?;
    let kind = if m.file_type().is_symlink() {
        "link"
    } else if m.is_dir() {
        "dir"
    } else {
        "file"
    };
    let mode = guest_support::file_mode(&p).unwrap_or(0o644);
    Ok(text(&format!(
        "{} {kind} {} {} {} {mode}",
        m.len(),
        millis(m.modified()),
        millis(m.accessed()),
        millis(m.created())
    )))
}

fn remove(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    let how = arg_string(args, 1, ctx)?;
    let r = match how.as_str() {
        "file" => std::fs::remove_file(&p),
        "dir" => std::fs::remove_dir(&p),
        _ => match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
            Ok(_) => std::fs::remove_file(&p),
            Err(e) => Err(e),
        },
    };
    r.map_err(|e| io_error(&e))?;
    Ok(JsValue::undefined())
}

fn rename(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let a = arg_string(args, 0, ctx)?;
    let b = arg_string(args, 1, ctx)?;
    if args.get_or_undefined(2).to_boolean() {
        std::fs::copy(&a, &b).map_err(|e| io_error(&e))?;
    } else {
        std::fs::rename(&a, &b).map_err(|e| io_error(&e))?;
    }
    Ok(JsValue::undefined())
}

fn cwd(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(text(&guest_support::cwd()))
}

fn chdir(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let p = path_arg(args, ctx)?;
    std::env::set_current_dir(&p).map_err(|e| io_error(&e))?;
    Ok(JsValue::undefined())
}

fn exit(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let code = args.get_or_undefined(0).to_number(ctx)? as i32;
    guest_support::exit(code & 0xff)
}

/// The environment as `NAME=value` records separated by NUL.
fn env(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let s: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(text(&s.join("\0")))
}

fn sleep(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let ms = args.get_or_undefined(0).to_number(ctx)?;
    if ms > 0.0 {
        let _ = std::io::stdout().flush();
        std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1000.0));
    }
    Ok(JsValue::undefined())
}

fn now(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(JsValue::from(millis(Ok(std::time::SystemTime::now()))))
}

/// Runs `sh -c CMD` with `input` on stdin; returns `status\0stdout\0stderr`.
fn run(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    use guest_support::process::{self, Error, Stdio};
    let cmd = arg_string(args, 0, ctx)?;
    let input = arg_string(args, 1, ctx)?;
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
            return Ok(text(&format!("127\0\0{m}\n")));
        }
        Err(Error::BadHandle) => return Ok(text("127\0\0")),
    };
    let _ = process::write(in_w, input.as_bytes());
    process::close(in_w);
    let drain = |h: u32| String::from_utf8_lossy(&guest_support::read_to_end(h)).into_owned();
    let out = drain(out_r);
    let err = drain(err_r);
    let status = process::wait(pid);
    Ok(text(&format!("{status}\0{out}\0{err}")))
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

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
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

/// `__wasbox_hash(alg, hexData)`: the digest, in hex (for `crypto.createHash`).
fn hash(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let alg = arg_string(args, 0, ctx)?
        .to_ascii_lowercase()
        .replace('-', "");
    let data = unhex(&arg_string(args, 1, ctx)?);
    match digest_of(&alg, &data) {
        Some(d) => Ok(text(&hex(&d))),
        None => Err(JsNativeError::error()
            .with_message("ERR_OSSL_EVP_UNSUPPORTED|Digest method not supported")
            .into()),
    }
}

/// `__wasbox_hmac(alg, hexKey, hexData)`: the HMAC, in hex (for `crypto.createHmac`).
fn hmac(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    use hmac::{Hmac, Mac};
    let alg = arg_string(args, 0, ctx)?
        .to_ascii_lowercase()
        .replace('-', "");
    let key = unhex(&arg_string(args, 1, ctx)?);
    let data = unhex(&arg_string(args, 2, ctx)?);
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
        _ => {
            return Err(JsNativeError::error()
                .with_message("ERR_OSSL_EVP_UNSUPPORTED|Invalid digest")
                .into());
        }
    };
    Ok(text(&hex(&out)))
}

/// `__wasbox_random(n)`: n random bytes from the host, in hex.
fn random(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let n = args
        .first()
        .map(|v| v.to_number(ctx))
        .transpose()?
        .unwrap_or(0.0)
        .clamp(0.0, 65536.0) as u64;
    Ok(text(&hex(&wasip2::random::random::get_random_bytes(n))))
}

/// Promises rejected with no handler, as Node tracks them: a rejection still unhandled when
/// the promise jobs have run ends the program like an uncaught exception.
#[derive(Default)]
struct RejectionTracker {
    unhandled:
        std::cell::RefCell<Vec<boa_engine::JsObject<boa_engine::builtins::promise::Promise>>>,
}

impl boa_engine::context::HostHooks for RejectionTracker {
    fn promise_rejection_tracker(
        &self,
        promise: &boa_engine::JsObject<boa_engine::builtins::promise::Promise>,
        operation: boa_engine::builtins::promise::OperationType,
        _: &mut Context,
    ) {
        use boa_engine::builtins::promise::OperationType;
        let mut list = self.unhandled.borrow_mut();
        match operation {
            OperationType::Reject => list.push(promise.clone()),
            OperationType::Handle => {
                let handled = promise.clone().upcast();
                list.retain(|p| !boa_engine::JsObject::equals(&p.clone().upcast(), &handled));
            }
        }
    }
}

impl RejectionTracker {
    /// The reason of the first rejection nobody handled, if any.
    fn take_unhandled(&self) -> Option<JsValue> {
        let first = self.unhandled.borrow_mut().drain(..).next()?;
        let promise = boa_engine::object::builtins::JsPromise::from_object(first.upcast()).ok()?;
        match promise.state() {
            boa_engine::builtins::promise::PromiseState::Rejected(v) => Some(v),
            _ => None,
        }
    }
}

/// `fetch(method, url, headers, body[, file[, integrity]])`: one HTTP request through the
/// host (no redirects followed here: the prelude follows them, each a request checked
/// again). `headers` is `name: value` lines. The answer is
/// `STATUS\nname: value\n...\n\nBODY` (the body as UTF-8 text), or with `file` the body's
/// bytes go to that file, checked against `integrity` when given (`sha512-BASE64`, npm's
/// form, or `sha1:HEX`), and the answer has no body. A failure throws `CODE|message` as
/// Node's errors carry them.
fn fetch(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    use guest_support::http::{Failure, Request, Target, Url, send};
    use wasip2::http::types::ErrorCode;
    let method = arg_string(args, 0, ctx)?;
    let url = arg_string(args, 1, ctx)?;
    let header_text = arg_string(args, 2, ctx)?;
    let body = if args.get_or_undefined(3).is_undefined() || args.get_or_undefined(3).is_null() {
        None
    } else {
        Some(arg_string(args, 3, ctx)?)
    };
    let bad = |msg: &str| -> JsError {
        JsNativeError::typ()
            .with_message(format!("ERR_INVALID_URL|{msg}"))
            .into()
    };
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
        body: body.as_deref().map(str::as_bytes),
        deadline: None,
        connect_timeout: None,
    };
    let fail = |code: &str, msg: String| -> JsError {
        JsNativeError::typ()
            .with_message(format!("{code}|{msg}"))
            .into()
    };
    let host = parsed.host.as_str();
    let why = |f: Failure| -> JsError {
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
    let file = args.get_or_undefined(4);
    if file.is_undefined() || file.is_null() || !(200..300).contains(&response.status) {
        out.push_str(&String::from_utf8_lossy(&data));
        return Ok(text(&out));
    }
    let integrity = args.get_or_undefined(5);
    if !integrity.is_undefined() && !integrity.is_null() {
        let want = arg_string(args, 5, ctx)?;
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
    let path = arg_string(args, 4, ctx)?;
    std::fs::write(&path, &data).map_err(|e| io_error(&e))?;
    Ok(text(&out))
}

/// `npm`: a script of the image run by this same engine (see npm.js).
const NPM: &str = include_str!("npm.js");

fn run_script(mode: &str, filename: &str, source: &str, rest: &[String]) -> i32 {
    let tracker = std::rc::Rc::new(RejectionTracker::default());
    let Ok(mut ctx) = Context::builder().host_hooks(tracker.clone()).build() else {
        return 70;
    };
    let natives: &[(
        &str,
        usize,
        boa_engine::native_function::NativeFunctionPointer,
    )] = &[
        ("write", 2, write),
        ("read", 1, read),
        ("writeFile", 3, write_file),
        ("exists", 1, exists),
        ("readdir", 1, readdir),
        ("mkdir", 2, mkdir),
        ("stat", 2, stat),
        ("remove", 2, remove),
        ("rename", 3, rename),
        ("cwd", 0, cwd),
        ("chdir", 1, chdir),
        ("exit", 1, exit),
        ("env", 0, env),
        ("sleep", 1, sleep),
        ("now", 0, now),
        ("run", 2, run),
        ("hash", 2, hash),
        ("hmac", 3, hmac),
        ("random", 1, random),
        ("fetch", 6, fetch),
    ];
    for (name, len, f) in natives {
        let name = JsString::from(format!("__wasbox_{name}").as_str());
        if ctx
            .register_global_builtin_callable(name, *len, NativeFunction::from_fn_ptr(*f))
            .is_err()
        {
            return 70;
        }
    }
    let host = match ctx.eval(Source::from_bytes(PRELUDE)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("node: prelude failed: {e}");
            return 70;
        }
    };
    let Some(host) = host.as_object() else {
        return 70;
    };
    let call = |ctx: &mut Context, name: &str, args: &[JsValue]| -> JsResult<JsValue> {
        let f = host.get(JsString::from(name), ctx)?;
        match f.as_callable() {
            Some(f) => f.call(&JsValue::undefined(), args, ctx),
            None => Err(JsNativeError::typ().with_message("no such hook").into()),
        }
    };
    let argv: Vec<String> = std::iter::once("/usr/bin/node".to_string())
        .chain((mode == "file").then(|| filename.to_string()))
        .chain(rest.iter().cloned())
        .collect();
    let argv = argv.join("\0");
    let started = call(
        &mut ctx,
        "main",
        &[
            text(mode),
            text(filename),
            text(source),
            text(&argv),
            text(VERSION),
        ],
    );
    let mut failed = started.err();
    // The event loop: promise jobs, then timers, until no work is left.
    while failed.is_none() {
        if let Err(e) = ctx.run_jobs() {
            failed = Some(e);
            break;
        }
        if let Some(reason) = tracker.take_unhandled() {
            failed = Some(JsError::from_opaque(reason));
            break;
        }
        match call(&mut ctx, "tick", &[]) {
            Ok(v) if v.as_boolean() == Some(true) => continue,
            Ok(_) => break,
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        let v = e
            .clone()
            .into_opaque(&mut ctx)
            .unwrap_or_else(|_| JsValue::undefined());
        if call(&mut ctx, "uncaught", &[v]).is_err() {
            eprintln!("Uncaught {e}");
        }
        return 1;
    }
    match call(&mut ctx, "exitCode", &[]) {
        Ok(v) => v.to_number(&mut ctx).map_or(0, |n| n as i32),
        Err(_) => 0,
    }
}
