//! `wget`: download to a file (named from the URL, or `-O FILE`, `-O -` for stdout), with
//! GNU wget's exit codes: 4 a network failure (a destination the sandbox's policy refuses
//! included), 5 a certificate problem, 8 an error answer from the server.

use std::fs;
use std::io::Write;

use super::{Failure, Request, Target, Url, base64, now, reason, send};
use wasip2::http::types::ErrorCode;

struct Options {
    urls: Vec<String>,
    output: Option<String>,
    quiet: bool,
    headers: Vec<String>,
    post_data: Option<String>,
    method: Option<String>,
    prefix: Option<String>,
    user: Option<String>,
    password: Option<String>,
    timeout: Option<f64>,
    server_response: bool,
    user_agent: Option<String>,
}

pub fn main(args: Vec<String>) -> i32 {
    let mut o = Options {
        urls: Vec::new(),
        output: None,
        quiet: false,
        headers: Vec::new(),
        post_data: None,
        method: None,
        prefix: None,
        user: None,
        password: None,
        timeout: None,
        server_response: false,
        user_agent: None,
    };
    let mut i = 1;
    while i < args.len() {
        let a = args[i].clone();
        i += 1;
        let value = |i: &mut usize, inline: Option<&str>| -> Option<String> {
            if let Some(v) = inline {
                return Some(v.to_string());
            }
            let v = args.get(*i).cloned();
            *i += 1;
            v
        };
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match name {
                "quiet" => o.quiet = true,
                "output-document" => o.output = value(&mut i, inline),
                "header" => o.headers.extend(value(&mut i, inline)),
                "post-data" => o.post_data = value(&mut i, inline),
                "post-file" => {
                    o.post_data = value(&mut i, inline)
                        .and_then(|f| fs::read_to_string(f).ok())
                        .or(Some(String::new()))
                }
                "method" => o.method = value(&mut i, inline),
                "directory-prefix" => o.prefix = value(&mut i, inline),
                "user" | "http-user" => o.user = value(&mut i, inline),
                "password" | "http-password" => o.password = value(&mut i, inline),
                "timeout" | "read-timeout" | "connect-timeout" => {
                    o.timeout = value(&mut i, inline).and_then(|v| v.parse().ok())
                }
                "tries" | "wait" | "waitretry" => {
                    value(&mut i, inline);
                }
                "user-agent" => o.user_agent = value(&mut i, inline),
                "server-response" => o.server_response = true,
                "no-check-certificate"
                | "no-verbose"
                | "continue"
                | "no-clobber"
                | "progress"
                | "show-progress"
                | "no-cache"
                | "retry-connrefused" => {}
                "help" => {
                    println!("GNU Wget 1.21 (wasbox), a non-interactive network retriever.");
                    println!("Usage: wget [OPTION]... [URL]...");
                    return 0;
                }
                "version" => {
                    println!("GNU Wget 1.21 built for wasbox.");
                    return 0;
                }
                _ => {
                    eprintln!("wget: unrecognized option '--{name}'");
                    eprintln!("Usage: wget [OPTION]... [URL]...");
                    eprintln!();
                    eprintln!("Try `wget --help' for more options.");
                    return 2;
                }
            }
        } else if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                j += 1;
                let rest: String = chars[j..].iter().collect();
                let inline = (!rest.is_empty()).then_some(rest.as_str());
                match c {
                    'q' => o.quiet = true,
                    'S' => o.server_response = true,
                    'c' | 'N' | 'v' | 'n' | 'k' => {}
                    'O' | 'P' | 'T' | 't' | 'U' => {
                        let v = value(&mut i, inline);
                        match c {
                            'O' => o.output = v,
                            'P' => o.prefix = v,
                            'T' => o.timeout = v.and_then(|v| v.parse().ok()),
                            'U' => o.user_agent = v,
                            _ => {}
                        }
                        j = chars.len();
                    }
                    _ => {
                        eprintln!("wget: invalid option -- '{c}'");
                        eprintln!("Usage: wget [OPTION]... [URL]...");
                        eprintln!();
                        eprintln!("Try `wget --help' for more options.");
                        return 2;
                    }
                }
            }
        } else {
            o.urls.push(a);
        }
    }
    if o.urls.is_empty() {
        eprintln!("wget: missing URL");
        eprintln!("Usage: wget [OPTION]... [URL]...");
        eprintln!();
        eprintln!("Try `wget --help' for more options.");
        return 1;
    }
    let mut code = 0;
    let mut sink: Option<Box<dyn Write>> = None;
    for u in o.urls.clone() {
        let c = fetch(&o, &u, &mut sink);
        if c != 0 {
            code = c;
        }
    }
    if let Some(mut s) = sink {
        let _ = s.flush();
    }
    code
}

fn fetch(o: &Options, text: &str, sink: &mut Option<Box<dyn Write>>) -> i32 {
    let mut url = match Url::parse(text) {
        Ok(u) => u,
        Err((_, m)) => {
            eprintln!("{text}: {m}.");
            return 1;
        }
    };
    let deadline = o
        .timeout
        .filter(|t| *t > 0.0)
        .map(|t| now() + (t * 1e9) as u64);
    let mut method = o.method.clone().unwrap_or_else(|| {
        if o.post_data.is_some() {
            "POST".into()
        } else {
            "GET".into()
        }
    });
    let mut redirects = 0;
    let mut response = loop {
        let mut headers: Vec<(String, String)> = vec![
            (
                "User-Agent".into(),
                o.user_agent.clone().unwrap_or_else(|| "Wget/1.21".into()),
            ),
            ("Accept".into(), "*/*".into()),
        ];
        let creds = match (&o.user, &url.userinfo) {
            (Some(u), _) => Some(format!("{u}:{}", o.password.clone().unwrap_or_default())),
            (None, Some((u, p))) => Some(format!("{u}:{p}")),
            _ => None,
        };
        if let Some(c) = creds {
            headers.push((
                "Authorization".into(),
                format!("Basic {}", base64(c.as_bytes())),
            ));
        }
        if o.post_data.is_some() && method == "POST" {
            headers.push((
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            ));
        }
        for h in &o.headers {
            if let Some((k, v)) = h.split_once(':') {
                if k.trim().eq_ignore_ascii_case("host") {
                    continue;
                }
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case(k.trim()));
                headers.push((k.trim().into(), v.trim().into()));
            }
        }
        let body = if method == "POST" {
            o.post_data.as_deref().map(str::as_bytes)
        } else {
            None
        };
        if !o.quiet {
            eprintln!("Connecting to {}... ", url.authority());
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
            body,
            deadline,
            connect_timeout: None,
        };
        let r = match send(&req) {
            Ok(r) => r,
            Err(f) => return failure(o, &url, f),
        };
        if o.server_response {
            eprintln!("  HTTP/1.1 {} {}", r.status, reason(r.status));
            for (k, v) in &r.headers {
                eprintln!("  {k}: {}", String::from_utf8_lossy(v));
            }
        }
        if (300..400).contains(&r.status)
            && let Some(loc) = r.header("location")
            && redirects < 20
        {
            redirects += 1;
            if !o.quiet {
                eprintln!(
                    "HTTP request sent, awaiting response... {} {}",
                    r.status,
                    reason(r.status)
                );
                eprintln!("Location: {loc} [following]");
            }
            url = match url.join(&loc) {
                Ok(u) => u,
                Err((_, m)) => {
                    eprintln!("{loc}: {m}.");
                    return 1;
                }
            };
            if r.status == 303 || (matches!(r.status, 301 | 302) && method == "POST") {
                method = "GET".into();
            }
            continue;
        }
        break r;
    };
    if !o.quiet {
        eprintln!(
            "HTTP request sent, awaiting response... {} {}",
            response.status,
            reason(response.status)
        );
    }
    if response.status >= 400 {
        eprintln!(
            "{}:\nERROR {}: {}.",
            url.to_text(),
            response.status,
            reason(response.status)
        );
        return 8;
    }
    let to_stdout = o.output.as_deref() == Some("-");
    if sink.is_none() {
        let name = match &o.output {
            Some(f) => f.clone(),
            None => {
                let n = url.file_name();
                let n = if n.is_empty() {
                    "index.html".to_string()
                } else {
                    n
                };
                // An existing file is not overwritten: the new one gets `.1`, `.2`, ...
                let mut candidate = n.clone();
                let mut k = 1;
                while fs::metadata(prefixed(o, &candidate)).is_ok() {
                    candidate = format!("{n}.{k}");
                    k += 1;
                }
                candidate
            }
        };
        let made: Box<dyn Write> = if to_stdout {
            Box::new(std::io::stdout())
        } else {
            let path = prefixed(o, &name);
            if let Some(p) = &o.prefix {
                let _ = fs::create_dir_all(p);
            }
            match fs::File::create(&path) {
                Ok(f) => {
                    if !o.quiet {
                        eprintln!("Saving to: '{path}'");
                    }
                    Box::new(std::io::BufWriter::new(f))
                }
                Err(e) => {
                    eprintln!("{path}: {}", describe(&e));
                    return 3;
                }
            }
        };
        *sink = Some(made);
    }
    let Some(out) = sink.as_mut() else { return 3 };
    let mut total = 0u64;
    loop {
        match response.chunk() {
            Ok(Some(data)) => {
                total += data.len() as u64;
                if out.write_all(&data).is_err() {
                    eprintln!("wget: write error");
                    return 3;
                }
            }
            Ok(None) => break,
            Err(f) => {
                let _ = out.flush();
                return failure(o, &url, f);
            }
        }
    }
    let _ = out.flush();
    if o.output.is_none() {
        *sink = None;
    }
    if !o.quiet {
        eprintln!("saved [{total}]");
    }
    0
}

fn prefixed(o: &Options, name: &str) -> String {
    match &o.prefix {
        Some(p) => format!("{}/{name}", p.trim_end_matches('/')),
        None => name.to_string(),
    }
}

fn describe(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}

fn failure(o: &Options, url: &Url, f: Failure) -> i32 {
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let (code, msg) = match f {
        Failure::Timeout => (4, "Read error (Connection timed out).".to_string()),
        Failure::Other(m) => (4, m),
        Failure::Http(code) => match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => (
                4,
                format!(
                    "Connecting to {}... failed: blocked by the sandbox network policy.",
                    url.authority()
                ),
            ),
            ErrorCode::DnsError(_) | ErrorCode::DnsTimeout | ErrorCode::DestinationNotFound => {
                (4, format!("wget: unable to resolve host address '{host}'"))
            }
            ErrorCode::TlsCertificateError => (
                5,
                format!(
                    "ERROR: cannot verify {host}'s certificate: Unable to locally verify the issuer's authority."
                ),
            ),
            ErrorCode::ConnectionRefused | ErrorCode::DestinationUnavailable => (
                4,
                format!(
                    "Connecting to {}... failed: Connection refused.",
                    url.authority()
                ),
            ),
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::HttpResponseTimeout => (
                4,
                format!(
                    "Connecting to {}... failed: Connection timed out.",
                    url.authority()
                ),
            ),
            other => (4, format!("Read error ({other:?}).")),
        },
    };
    let _ = o;
    eprintln!("{msg}");
    code
}
