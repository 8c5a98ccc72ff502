//! `curl`: the options agents use, with curl's messages and exit codes. A destination the
//! sandbox's network policy refuses is exit 7, "blocked by the sandbox network policy".

use std::fs;
use std::io::{Read, Write};
use std::time::Duration;

use super::{Failure, Request, Response, Target, Url, base64, now, percent_encode, reason, send};
use wasip2::http::types::ErrorCode;

const USER_AGENT: &str = "curl/8.11.1";
const TRY: &str = "curl: try 'curl --help' or 'curl --manual' for more information";

#[derive(Default)]
struct Options {
    urls: Vec<String>,
    outputs: Vec<Output>,
    method: Option<String>,
    headers: Vec<String>,
    data: Vec<Vec<u8>>,
    form: Vec<String>,
    json: bool,
    get: bool,
    head: bool,
    include: bool,
    silent: bool,
    show_error: bool,
    fail: bool,
    fail_with_body: bool,
    location: bool,
    location_trusted: bool,
    max_redirs: Option<u32>,
    user: Option<String>,
    write_out: Option<String>,
    max_time: Option<f64>,
    connect_timeout: Option<f64>,
    user_agent: Option<String>,
    referer: Option<String>,
    cookie: Option<String>,
    dump_header: Option<String>,
    upload: Option<String>,
    range: Option<String>,
    compressed: bool,
    verbose: bool,
    create_dirs: bool,
    output_dir: Option<String>,
}

enum Output {
    File(String),
    Remote,
}

/// What went wrong: curl's exit code and message.
struct Fail(i32, String);

pub fn main(args: Vec<String>) -> i32 {
    let opts = match parse(&args[1..]) {
        Ok(o) => o,
        Err(Fail(code, msg)) => {
            eprintln!("curl: {msg}");
            eprintln!("{TRY}");
            return code;
        }
    };
    if opts.urls.is_empty() {
        eprintln!("curl: no URL specified");
        eprintln!("{TRY}");
        return 2;
    }
    let mut code = 0;
    for (i, url) in opts.urls.iter().enumerate() {
        let output = opts.outputs.get(i);
        match transfer(&opts, url, output) {
            Ok(c) => {
                if c != 0 {
                    code = c;
                }
            }
            Err(Fail(c, msg)) => {
                if !opts.silent || opts.show_error {
                    eprintln!("curl: ({c}) {msg}");
                }
                code = c;
            }
        }
    }
    let _ = std::io::stdout().flush();
    code
}

fn parse(args: &[String]) -> Result<Options, Fail> {
    let mut o = Options::default();
    let mut i = 0;
    let mut rest_are_urls = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if rest_are_urls || !arg.starts_with('-') || arg == "-" {
            o.urls.push(arg.clone());
            continue;
        }
        if arg == "--" {
            rest_are_urls = true;
            continue;
        }
        // Short options may be bundled (`-fsSL`); one that takes a value ends the bundle,
        // its value attached (`-oFILE`) or the next argument.
        let names: Vec<String> = if let Some(long) = arg.strip_prefix("--") {
            vec![long.to_string()]
        } else {
            let chars: Vec<char> = arg[1..].chars().collect();
            let mut names = Vec::new();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                let name = short_name(c).ok_or_else(|| {
                    Fail(
                        2,
                        format!(
                            "option -{}: is unknown",
                            chars[j..].iter().collect::<String>()
                        ),
                    )
                })?;
                j += 1;
                if takes_value(name) && j < chars.len() {
                    let value: String = chars[j..].iter().collect();
                    apply(&mut o, name, Some(value))?;
                    j = chars.len();
                    names.push(String::new());
                } else {
                    names.push(name.to_string());
                }
            }
            names
        };
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            let value = if takes_value(&name) {
                let v = args.get(i).cloned().ok_or_else(|| {
                    Fail(2, format!("option {}: requires parameter", display(&name)))
                })?;
                i += 1;
                Some(v)
            } else {
                None
            };
            apply(&mut o, &name, value)?;
        }
    }
    Ok(o)
}

fn display(name: &str) -> String {
    format!("--{name}")
}

fn short_name(c: char) -> Option<&'static str> {
    Some(match c {
        'o' => "output",
        'O' => "remote-name",
        'X' => "request",
        'H' => "header",
        'd' => "data",
        'F' => "form",
        'u' => "user",
        'w' => "write-out",
        'm' => "max-time",
        'A' => "user-agent",
        'e' => "referer",
        'b' => "cookie",
        'D' => "dump-header",
        'T' => "upload-file",
        'r' => "range",
        's' => "silent",
        'S' => "show-error",
        'f' => "fail",
        'L' => "location",
        'I' => "head",
        'i' => "include",
        'v' => "verbose",
        'k' => "insecure",
        'G' => "get",
        'N' => "no-buffer",
        'g' => "globoff",
        '#' => "progress-bar",
        'q' => "disable",
        '4' => "ipv4",
        '6' => "ipv6",
        'V' => "version",
        'h' => "help",
        'n' => "netrc",
        'Z' => "parallel",
        'C' => "continue-at",
        'x' => "proxy",
        'E' => "cert",
        _ => return None,
    })
}

fn takes_value(name: &str) -> bool {
    matches!(
        name,
        "output"
            | "request"
            | "header"
            | "data"
            | "data-ascii"
            | "data-raw"
            | "data-binary"
            | "data-urlencode"
            | "json"
            | "form"
            | "form-string"
            | "user"
            | "write-out"
            | "max-time"
            | "connect-timeout"
            | "user-agent"
            | "referer"
            | "cookie"
            | "dump-header"
            | "upload-file"
            | "range"
            | "max-redirs"
            | "retry"
            | "retry-delay"
            | "retry-max-time"
            | "url"
            | "output-dir"
            | "cacert"
            | "capath"
            | "continue-at"
            | "proxy"
            | "cert"
            | "key"
            | "resolve"
            | "limit-rate"
            | "max-filesize"
            | "oauth2-bearer"
    )
}

fn read_source(spec: &str, strip_newlines: bool) -> Result<Vec<u8>, Fail> {
    let Some(path) = spec.strip_prefix('@') else {
        return Ok(spec.as_bytes().to_vec());
    };
    let mut data = Vec::new();
    let read = if path == "-" {
        std::io::stdin().read_to_end(&mut data).map(|_| ())
    } else {
        fs::read(path).map(|d| data = d)
    };
    if read.is_err() {
        eprintln!("Warning: Couldn't read data from file \"{path}\", this makes an empty POST.");
        data.clear();
    }
    if strip_newlines {
        data.retain(|&b| b != b'\n' && b != b'\r');
    }
    Ok(data)
}

fn apply(o: &mut Options, name: &str, value: Option<String>) -> Result<(), Fail> {
    let v = value.unwrap_or_default();
    match name {
        "output" => o.outputs.push(Output::File(v)),
        "remote-name" => o.outputs.push(Output::Remote),
        "request" => o.method = Some(v),
        "header" => o.headers.push(v),
        "data" | "data-ascii" => o.data.push(read_source(&v, true)?),
        "data-raw" => o.data.push(v.into_bytes()),
        "data-binary" => o.data.push(read_source(&v, false)?),
        "data-urlencode" => o.data.push(urlencode_arg(&v)?),
        "json" => {
            o.json = true;
            o.data.push(read_source(&v, false)?);
        }
        "form" => o.form.push(v),
        "form-string" => o.form.push(v.replace('@', "\u{0}@").replace('<', "\u{0}<")),
        "user" => o.user = Some(v),
        "oauth2-bearer" => o.headers.push(format!("Authorization: Bearer {v}")),
        "write-out" => o.write_out = Some(v),
        "max-time" => o.max_time = Some(seconds(&v, name)?),
        "connect-timeout" => o.connect_timeout = Some(seconds(&v, name)?),
        "user-agent" => o.user_agent = Some(v),
        "referer" => o.referer = Some(v),
        "cookie" => o.cookie = Some(v),
        "dump-header" => o.dump_header = Some(v),
        "upload-file" => o.upload = Some(v),
        "range" => o.range = Some(v),
        "max-redirs" => {
            o.max_redirs = Some(v.parse().map_err(|_| {
                Fail(
                    2,
                    "option --max-redirs: expected a proper numerical parameter".into(),
                )
            })?)
        }
        "url" => o.urls.push(v),
        "output-dir" => o.output_dir = Some(v),
        "silent" => o.silent = true,
        "show-error" => o.show_error = true,
        "fail" => o.fail = true,
        "fail-with-body" => o.fail_with_body = true,
        "location" => o.location = true,
        "location-trusted" => {
            o.location = true;
            o.location_trusted = true;
        }
        "head" => o.head = true,
        "include" => o.include = true,
        "verbose" => o.verbose = true,
        "get" => o.get = true,
        "compressed" => o.compressed = true,
        "create-dirs" => o.create_dirs = true,
        "no-progress-meter" => {}
        // Accepted and without effect here: TLS, retries, transport choices and output
        // buffering are the host's or make no difference in a sandbox.
        "insecure" | "no-buffer" | "globoff" | "progress-bar" | "disable" | "ipv4" | "ipv6"
        | "netrc" | "parallel" | "http1.1" | "http1.0" | "http2" | "tlsv1.2" | "tlsv1.3"
        | "retry" | "retry-delay" | "retry-max-time" | "retry-connrefused" | "retry-all-errors"
        | "cacert" | "capath" | "ssl-reqd" | "limit-rate" | "max-filesize" | "no-keepalive"
        | "tcp-nodelay" | "path-as-is" | "raw" | "styled-output" | "no-styled-output" => {}
        "version" => {
            println!("{USER_AGENT} (wasm32-wasip2) wasbox");
            println!("Protocols: http https");
            println!("Features: HTTPS-proxy IPv6 Largefile libz SSL");
            std::process::exit(0);
        }
        "help" => {
            println!("Usage: curl [options...] <url>");
            println!(" -d, --data <data>          HTTP POST data");
            println!(" -f, --fail                 Fail fast with no output on HTTP errors");
            println!(" -H, --header <header>      Pass custom header(s) to server");
            println!(" -i, --include              Include response headers in output");
            println!(" -L, --location             Follow redirects");
            println!(" -o, --output <file>        Write to file instead of stdout");
            println!(" -O, --remote-name          Write output to file named as remote file");
            println!(" -s, --silent               Silent mode");
            println!(" -u, --user <user:password> Server user and password");
            println!(" -w, --write-out <format>   Output FORMAT after completion");
            println!(" -X, --request <method>     Specify request method to use");
            std::process::exit(0);
        }
        "continue-at" | "proxy" | "cert" | "key" | "resolve" => {
            return Err(Fail(
                2,
                format!("option --{name}: is not supported in this sandbox"),
            ));
        }
        other => return Err(Fail(2, format!("option --{other}: is unknown"))),
    }
    Ok(())
}

fn seconds(v: &str, name: &str) -> Result<f64, Fail> {
    v.parse::<f64>().ok().filter(|s| *s >= 0.0).ok_or_else(|| {
        Fail(
            2,
            format!("option --{name}: expected a proper numerical parameter"),
        )
    })
}

/// `--data-urlencode`: `content`, `=content`, `name=content`, `@file`, `name@file`.
fn urlencode_arg(v: &str) -> Result<Vec<u8>, Fail> {
    let (name, content) = if let Some(rest) = v.strip_prefix('=') {
        (None, rest.as_bytes().to_vec())
    } else if let Some((n, c)) = v.split_once('=') {
        (Some(n), c.as_bytes().to_vec())
    } else if let Some((n, file)) = v.split_once('@') {
        let data = read_source(&format!("@{file}"), false)?;
        (if n.is_empty() { None } else { Some(n) }, data)
    } else {
        (None, v.as_bytes().to_vec())
    };
    let encoded = percent_encode(&content);
    Ok(match name {
        Some(n) => format!("{n}={encoded}").into_bytes(),
        None => encoded.into_bytes(),
    })
}

/// A `-F` field as multipart parts.
fn multipart(form: &[String], boundary: &str) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::new();
    for field in form {
        let (name, value) = field
            .split_once('=')
            .ok_or_else(|| Fail(26, format!("Illegally formatted input field: '{field}'")))?;
        let mut parts = value.split(';');
        let value = parts.next().unwrap_or_default();
        let mut content_type = None;
        let mut filename = None;
        for p in parts {
            if let Some(t) = p.trim().strip_prefix("type=") {
                content_type = Some(t.to_string());
            } else if let Some(f) = p.trim().strip_prefix("filename=") {
                filename = Some(f.to_string());
            }
        }
        out.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        if let Some(path) = value.strip_prefix('@') {
            let data = fs::read(path).map_err(|_| {
                Fail(
                    26,
                    "Failed to open/read local data from file/application".to_string(),
                )
            })?;
            let shown =
                filename.unwrap_or_else(|| path.rsplit('/').next().unwrap_or(path).to_string());
            out.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{shown}\"\r\n"
                )
                .as_bytes(),
            );
            let t = content_type.unwrap_or_else(|| guess_type(path).to_string());
            out.extend_from_slice(format!("Content-Type: {t}\r\n\r\n").as_bytes());
            out.extend_from_slice(&data);
        } else {
            let data = match value.strip_prefix('<') {
                Some(path) => fs::read(path).map_err(|_| {
                    Fail(
                        26,
                        "Failed to open/read local data from file/application".into(),
                    )
                })?,
                None => value.replace('\u{0}', "").into_bytes(),
            };
            out.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
            );
            if let Some(t) = content_type {
                out.extend_from_slice(format!("Content-Type: {t}\r\n").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&data);
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok(out)
}

fn guess_type(path: &str) -> &'static str {
    let ext = path
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "xml" => "application/xml",
        _ => "application/octet-stream",
    }
}

/// curl's exit code and message for a transfer the host could not make.
fn failure(f: Failure, url: &Url, elapsed_ms: u64, received: u64) -> Fail {
    let host = url
        .host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = url.port_or_default();
    match f {
        Failure::Timeout => Fail(
            28,
            format!(
                "Operation timed out after {elapsed_ms} milliseconds with {received} bytes received"
            ),
        ),
        Failure::Other(m) => Fail(7, m),
        Failure::Http(code) => match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => Fail(
                7,
                format!(
                    "Failed to connect to {host} port {port}: blocked by the sandbox network policy"
                ),
            ),
            ErrorCode::DnsError(_) | ErrorCode::DnsTimeout | ErrorCode::DestinationNotFound => {
                Fail(6, format!("Could not resolve host: {host}"))
            }
            ErrorCode::ConnectionRefused
            | ErrorCode::DestinationUnavailable
            | ErrorCode::DestinationIpUnroutable => Fail(
                7,
                format!(
                    "Failed to connect to {host} port {port} after {elapsed_ms} ms: Couldn't connect to server"
                ),
            ),
            ErrorCode::ConnectionLimitReached => Fail(
                7,
                format!(
                    "Failed to connect to {host} port {port}: the sandbox's connection or byte limit is reached"
                ),
            ),
            ErrorCode::ConnectionTimeout => Fail(
                28,
                format!(
                    "Failed to connect to {host} port {port} after {elapsed_ms} ms: Timeout was reached"
                ),
            ),
            ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout => Fail(
                28,
                format!(
                    "Operation timed out after {elapsed_ms} milliseconds with {received} bytes received"
                ),
            ),
            ErrorCode::TlsCertificateError => Fail(
                60,
                "SSL certificate problem: unable to get local issuer certificate".into(),
            ),
            ErrorCode::TlsProtocolError | ErrorCode::TlsAlertReceived(_) => Fail(
                35,
                format!("TLS connect error: could not connect to {host}:{port}"),
            ),
            ErrorCode::ConnectionTerminated => Fail(52, "Empty reply from server".into()),
            ErrorCode::HttpResponseIncomplete => Fail(
                18,
                "transfer closed with outstanding read data remaining".into(),
            ),
            ErrorCode::HttpRequestUriInvalid => {
                Fail(3, "URL rejected: Malformed input to a URL function".into())
            }
            ErrorCode::InternalError(Some(m)) => Fail(
                56,
                format!("Failure when receiving data from the peer: {m}"),
            ),
            other => Fail(
                56,
                format!("Failure when receiving data from the peer ({other:?})"),
            ),
        },
    }
}

/// One URL: the request, redirects, the output. `Ok(code)` for a transfer that ran
/// (code 22 for `--fail` on an HTTP error).
fn transfer(o: &Options, url_text: &str, output: Option<&Output>) -> Result<i32, Fail> {
    let started = now();
    let deadline = o.max_time.map(|s| started + (s * 1e9) as u64);
    let mut url = Url::parse(url_text).map_err(|(c, m)| Fail(c, m))?;
    let mut method = if o.head {
        "HEAD".to_string()
    } else if o.upload.is_some() {
        "PUT".to_string()
    } else if (!o.data.is_empty() && !o.get) || !o.form.is_empty() {
        "POST".to_string()
    } else {
        "GET".to_string()
    };
    if let Some(m) = &o.method {
        method = m.clone();
    }
    let mut body: Option<Vec<u8>> = None;
    let mut content_type: Option<String> = None;
    if !o.data.is_empty() {
        let joined = o.data.join(&b'&');
        if o.get {
            let sep = if url.path.contains('?') { '&' } else { '?' };
            url.path = format!("{}{sep}{}", url.path, String::from_utf8_lossy(&joined));
        } else {
            body = Some(joined);
            content_type = Some(if o.json {
                "application/json".into()
            } else {
                "application/x-www-form-urlencoded".into()
            });
        }
    }
    if !o.form.is_empty() {
        let boundary = format!(
            "------------------------{:016x}",
            now() ^ 0x5bd1_e995_1234_5678
        );
        body = Some(multipart(&o.form, &boundary)?);
        content_type = Some(format!("multipart/form-data; boundary={boundary}"));
    }
    if let Some(file) = &o.upload {
        let data = if file == "-" || file == "." {
            let mut d = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut d);
            d
        } else {
            fs::read(file).map_err(|_| {
                Fail(
                    26,
                    "Failed to open/read local data from file/application".to_string(),
                )
            })?
        };
        if url.path.ends_with('/') {
            url.path.push_str(file.rsplit('/').next().unwrap_or(file));
        }
        body = Some(data);
    }

    let mut redirects = 0u32;
    let max_redirs = o.max_redirs.unwrap_or(50);
    let first_host = url.authority();
    let mut header_text = Vec::new();
    let mut response: Response;
    loop {
        let headers = request_headers(
            o,
            &url,
            content_type.as_deref(),
            &first_host,
            body.as_ref().map(Vec::len),
        );
        if o.verbose {
            eprintln!(
                "* Connecting to {} port {}",
                url.host,
                url.port_or_default()
            );
            eprintln!("> {method} {} HTTP/1.1", url.path);
            eprintln!("> Host: {}", url.authority());
            for (k, v) in &headers {
                eprintln!("> {k}: {v}");
            }
            eprintln!(">");
        }
        let authority = url.authority();
        let req = Request {
            method: &method,
            target: Target {
                https: url.https,
                authority: &authority,
                path: &url.path,
            },
            headers: &headers,
            body: body.as_deref(),
            deadline,
            connect_timeout: o.connect_timeout.map(Duration::from_secs_f64),
        };
        response = send(&req).map_err(|f| failure(f, &url, (now() - started) / 1_000_000, 0))?;
        let head = head_text(&response);
        if o.verbose {
            for line in String::from_utf8_lossy(&head).lines() {
                eprintln!("< {line}");
            }
        }
        header_text.extend_from_slice(&head);
        let location = response.header("location");
        if o.location && (300..400).contains(&response.status) && location.is_some() {
            if redirects >= max_redirs {
                return Err(Fail(
                    47,
                    format!("Maximum ({max_redirs}) redirects followed"),
                ));
            }
            redirects += 1;
            // Read the redirect's body away, then go on.
            while let Some(_chunk) = response.chunk().map_err(|f| failure(f, &url, 0, 0))? {}
            let next = url
                .join(&location.unwrap_or_default())
                .map_err(|(c, m)| Fail(c, m))?;
            if matches!(response.status, 301..=303) && method == "POST" && o.method.is_none() {
                method = "GET".into();
                body = None;
                content_type = None;
            }
            if response.status == 303 && method != "HEAD" {
                method = "GET".into();
                body = None;
                content_type = None;
            }
            url = next;
            continue;
        }
        break;
    }
    let status = response.status;
    let failed = status >= 400 && (o.fail || o.fail_with_body);

    if let Some(dump) = &o.dump_header {
        if dump == "-" {
            let _ = std::io::stdout().write_all(&header_text);
        } else {
            fs::write(dump, &header_text)
                .map_err(|e| Fail(23, format!("Failed writing header: {e}")))?;
        }
    }
    if failed && !o.fail_with_body {
        let msg = format!("The requested URL returned error: {status}");
        if !o.silent || o.show_error {
            eprintln!("curl: (22) {msg}");
        }
        write_out(
            o, &url, status, 0, started, redirects, &response, &method, 22,
        );
        return Ok(22);
    }

    // Where the body goes.
    let mut sink: Box<dyn Write> = match output {
        None => Box::new(std::io::stdout().lock()),
        Some(Output::File(f)) if f == "-" => Box::new(std::io::stdout().lock()),
        Some(out) => {
            let name = match out {
                Output::File(f) => f.clone(),
                Output::Remote => {
                    let n = url.file_name();
                    if n.is_empty() {
                        return Err(Fail(23, "Remote file name has no length".into()));
                    }
                    n
                }
            };
            let path = match &o.output_dir {
                Some(d) => format!("{}/{name}", d.trim_end_matches('/')),
                None => name,
            };
            if o.create_dirs
                && let Some(parent) = std::path::Path::new(&path).parent()
                && !parent.as_os_str().is_empty()
            {
                let _ = fs::create_dir_all(parent);
            }
            let file = fs::File::create(&path).map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::NotFound {
                    "No such file or directory".to_string()
                } else {
                    e.to_string()
                };
                Fail(
                    23,
                    format!(
                        "Failure writing output to destination, passed 0 returned 0 ({path}: {why})"
                    ),
                )
            })?;
            Box::new(std::io::BufWriter::new(file))
        }
    };
    if o.include || o.head {
        let shown = if o.include && o.location {
            &header_text
        } else {
            &head_text(&response)
        };
        sink.write_all(shown)
            .map_err(|_| Fail(23, "Failure writing output to destination".into()))?;
    }
    let mut received = 0u64;
    let encoding = response
        .header("content-encoding")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let decode =
        o.compressed && (encoding == "gzip" || encoding == "deflate" || encoding == "x-gzip");
    let mut compressed_body = Vec::new();
    loop {
        match response.chunk() {
            Ok(Some(data)) => {
                received += data.len() as u64;
                if decode {
                    compressed_body.extend_from_slice(&data);
                } else if sink.write_all(&data).is_err() {
                    return Err(Fail(23, "Failure writing output to destination".into()));
                }
            }
            Ok(None) => break,
            Err(f) => {
                let _ = sink.flush();
                return Err(failure(f, &url, (now() - started) / 1_000_000, received));
            }
        }
    }
    if decode {
        let mut plain = Vec::new();
        let ok = if encoding == "deflate" {
            flate2::read::ZlibDecoder::new(&compressed_body[..])
                .read_to_end(&mut plain)
                .is_ok()
                || {
                    plain.clear();
                    flate2::read::DeflateDecoder::new(&compressed_body[..])
                        .read_to_end(&mut plain)
                        .is_ok()
                }
        } else {
            flate2::read::MultiGzDecoder::new(&compressed_body[..])
                .read_to_end(&mut plain)
                .is_ok()
        };
        if !ok {
            return Err(Fail(
                61,
                "Error while processing content unencoding: invalid stored block lengths".into(),
            ));
        }
        sink.write_all(&plain)
            .map_err(|_| Fail(23, "Failure writing output to destination".into()))?;
    }
    sink.flush()
        .map_err(|_| Fail(23, "Failure writing output to destination".into()))?;
    drop(sink);
    let code = if failed { 22 } else { 0 };
    if failed && (!o.silent || o.show_error) {
        eprintln!("curl: (22) The requested URL returned error: {status}");
    }
    write_out(
        o, &url, status, received, started, redirects, &response, &method, code,
    );
    Ok(code)
}

fn request_headers(
    o: &Options,
    url: &Url,
    content_type: Option<&str>,
    first_host: &str,
    body_len: Option<usize>,
) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = vec![
        (
            "User-Agent".into(),
            o.user_agent.clone().unwrap_or_else(|| USER_AGENT.into()),
        ),
        (
            "Accept".into(),
            if o.json {
                "application/json".into()
            } else {
                "*/*".into()
            },
        ),
    ];
    // Credentials go to the first host only, unless `--location-trusted`.
    let same_host = url.authority() == first_host || o.location_trusted;
    let creds = match (&o.user, &url.userinfo) {
        (Some(u), _) => Some(if u.contains(':') {
            u.clone()
        } else {
            format!("{u}:")
        }),
        (None, Some((u, p))) => Some(format!("{u}:{p}")),
        _ => None,
    };
    if let Some(c) = creds
        && same_host
    {
        h.push((
            "Authorization".into(),
            format!("Basic {}", base64(c.as_bytes())),
        ));
    }
    if let Some(r) = &o.referer {
        h.push(("Referer".into(), r.clone()));
    }
    if let Some(c) = &o.cookie
        && c.contains('=')
    {
        h.push(("Cookie".into(), c.clone()));
    }
    if let Some(r) = &o.range {
        h.push(("Range".into(), format!("bytes={r}")));
    }
    if o.compressed {
        h.push(("Accept-Encoding".into(), "deflate, gzip".into()));
    }
    if let Some(t) = content_type {
        h.push(("Content-Type".into(), t.to_string()));
    }
    if let Some(n) = body_len {
        h.push(("Content-Length".into(), n.to_string()));
    }
    for line in &o.headers {
        // `Name: value` sets, `Name:` removes, `Name;` sends it empty.
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim();
            if name.eq_ignore_ascii_case("host")
                || (!same_host && name.eq_ignore_ascii_case("authorization"))
            {
                continue;
            }
            h.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
            let value = value.trim();
            if !value.is_empty() {
                h.push((name.to_string(), value.to_string()));
            }
        } else if let Some(name) = line.strip_suffix(';') {
            h.retain(|(k, _)| !k.eq_ignore_ascii_case(name.trim()));
            h.push((name.trim().to_string(), String::new()));
        }
    }
    h
}

fn head_text(r: &Response) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status)).into_bytes();
    for (k, v) in &r.headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[allow(clippy::too_many_arguments)]
fn write_out(
    o: &Options,
    url: &Url,
    status: u16,
    size: u64,
    started: u64,
    redirects: u32,
    response: &Response,
    method: &str,
    exit: i32,
) {
    let Some(format) = &o.write_out else { return };
    let format = match format.strip_prefix('@') {
        Some(file) => fs::read_to_string(file).unwrap_or_default(),
        None => format.clone(),
    };
    let elapsed = (now() - started) as f64 / 1e9;
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            },
            '%' if chars.peek() == Some(&'{') => {
                chars.next();
                let var: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let value = match var.as_str() {
                    "http_code" | "response_code" => format!("{status:03}"),
                    "url_effective" | "url" => url.to_text(),
                    "size_download" => size.to_string(),
                    "content_type" => response.header("content-type").unwrap_or_default(),
                    "time_total" | "time_starttransfer" => format!("{elapsed:.6}"),
                    "time_connect" | "time_namelookup" | "time_appconnect" | "time_pretransfer" => {
                        "0.000000".into()
                    }
                    "num_redirects" => redirects.to_string(),
                    "redirect_url" => response
                        .header("location")
                        .map(|l| url.join(&l).map(|u| u.to_text()).unwrap_or(l))
                        .unwrap_or_default(),
                    "exitcode" => exit.to_string(),
                    "method" => method.to_string(),
                    "scheme" => {
                        if url.https {
                            "HTTPS".into()
                        } else {
                            "HTTP".into()
                        }
                    }
                    "http_version" => "1.1".into(),
                    "remote_port" => url.port_or_default().to_string(),
                    "speed_download" => format!("{:.0}", size as f64 / elapsed.max(1e-6)),
                    other if other.starts_with("header{") => String::new(),
                    _ => String::new(),
                };
                out.push_str(&value);
            }
            '%' if chars.peek() == Some(&'%') => {
                chars.next();
                out.push('%');
            }
            c => out.push(c),
        }
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
}
