//! envd's `/files`: download a file (`GET`, gzip when asked) and upload one or several
//! (`POST`, `multipart/form-data` or `application/octet-stream`, optionally gzip-encoded).
//! Paths are sandbox paths, relative ones from the home directory.

use std::io::Read as _;

use axum::extract::{FromRequest as _, Multipart, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use wasbox_runtime::{FileError, Sandbox};

use super::envd::{Target, gone, target};
use super::{SharedE2b, error};

/// Largest file one request uploads or downloads with gzip (a plain download streams, and
/// is bounded by the sandbox's disk quota alone).
pub const MAX_FILE_BYTES: usize = 64 << 20;

#[derive(Deserialize)]
pub struct FileQuery {
    path: Option<String>,
    username: Option<String>,
    /// A signed URL's signature (`v1_...`, from the sandbox's access token) and its end.
    signature: Option<String>,
    signature_expiration: Option<String>,
}

fn file_error(e: FileError) -> Response {
    let status = match &e {
        FileError::NotFound(_) => StatusCode::NOT_FOUND,
        FileError::NoSpace(_) => StatusCode::INSUFFICIENT_STORAGE,
        FileError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        FileError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    };
    error(status, e.to_string())
}

fn check_user(q: &FileQuery) -> Result<(), Response> {
    match q.username.as_deref() {
        None | Some("" | "user" | "root") => Ok(()),
        Some(u) => Err(error(
            StatusCode::UNAUTHORIZED,
            format!("invalid user '{u}': this sandbox has the users 'user' and 'root'"),
        )),
    }
}

/// The sandbox a `/files` request is for: by its header and access token, or by a signed
/// URL's signature (which names the sandbox without a header: a signed URL is fetched by
/// plain HTTP clients).
fn sandbox_of(
    e2b: &SharedE2b,
    headers: &HeaderMap,
    q: &FileQuery,
    operation: &str,
) -> Result<Sandbox, Response> {
    if let Some(sig) = &q.signature {
        let expiration = match q.signature_expiration.as_deref() {
            None | Some("") => None,
            Some(e) => match e.parse::<i64>() {
                Ok(e) => Some(e),
                Err(_) => {
                    return Err(error(
                        StatusCode::BAD_REQUEST,
                        "signature_expiration is not a number",
                    ));
                }
            },
        };
        if let Some(e) = expiration {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs() as i64;
            if e < now {
                return Err(error(
                    StatusCode::UNAUTHORIZED,
                    "signature is already expired",
                ));
            }
        }
        let path = q.path.as_deref().unwrap_or("");
        let user = q.username.as_deref().unwrap_or("");
        let named = headers.get("e2b-sandbox-id").and_then(|v| v.to_str().ok());
        let candidates = match named {
            Some(id) => e2b.get(id).into_iter().collect(),
            None => e2b.live(),
        };
        return candidates
            .into_iter()
            .find(|s| {
                let want = signature(path, operation, user, &s.token, expiration);
                crate::auth::constant_time_eq(want.as_bytes(), sig.as_bytes())
            })
            .map(|s| s.session.sandbox().clone())
            .ok_or_else(|| error(StatusCode::UNAUTHORIZED, "invalid signature"));
    }
    match target(e2b, headers) {
        Target::Found(s) => Ok(s.session.sandbox().clone()),
        Target::Gone(id) => Err(error(StatusCode::BAD_GATEWAY, gone(&id))),
        Target::Unauthorized => Err(error(StatusCode::UNAUTHORIZED, "invalid access token")),
    }
}

/// envd's v1 URL signature: `v1_` and the unpadded base64 of SHA-256 over
/// `path:operation:user:token[:expiration]`.
pub(crate) fn signature(
    path: &str,
    operation: &str,
    user: &str,
    token: &str,
    expiration: Option<i64>,
) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let raw = match expiration {
        None => format!("{path}:{operation}:{user}:{token}"),
        Some(e) => format!("{path}:{operation}:{user}:{token}:{e}"),
    };
    let digest = sha2::Sha256::digest(raw.as_bytes());
    format!(
        "v1_{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// `GET /files?path=`: the file's bytes.
pub async fn download(
    State(e2b): State<SharedE2b>,
    Query(q): Query<FileQuery>,
    headers: HeaderMap,
) -> Response {
    let sandbox = match sandbox_of(&e2b, &headers, &q, "read") {
        Ok(s) => s,
        Err(r) => return r,
    };
    if let Err(r) = check_user(&q) {
        return r;
    }
    let Some(path) = q.path.filter(|p| !p.is_empty()) else {
        return error(StatusCode::BAD_REQUEST, "path is required");
    };
    let path = sandbox.absolute_path(&path);
    let gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    if gzip {
        let data = match sandbox.read_file_async(&path, MAX_FILE_BYTES as u64).await {
            Ok(d) => d,
            Err(e) => return file_error(e),
        };
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = std::io::Write::write_all(&mut z, &data);
        let body = z.finish().unwrap_or_default();
        return (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (header::CONTENT_ENCODING, "gzip"),
            ],
            body,
        )
            .into_response();
    }
    let file = match sandbox.open_read(&path) {
        Ok(f) => f,
        Err(e) => return file_error(e),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let file = tokio::fs::File::from_std(file);
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
        ],
        crate::http::file_body(file),
    )
        .into_response()
}

/// `POST /files?path=`: writes the uploaded file(s), making missing parent directories, and
/// answers what it wrote.
pub async fn upload(
    State(e2b): State<SharedE2b>,
    Query(q): Query<FileQuery>,
    req: Request,
) -> Response {
    let sandbox = match sandbox_of(&e2b, req.headers(), &q, "write") {
        Ok(s) => s,
        Err(r) => return r,
    };
    if let Err(r) = check_user(&q) {
        return r;
    }
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let gzip = req
        .headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    let metadata = match upload_metadata(req.headers()) {
        Ok(m) => m,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if content_type.starts_with("multipart/form-data") {
        let mut form = match Multipart::from_request(req, &()).await {
            Ok(m) => m,
            Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
        };
        let mut total = 0usize;
        loop {
            let field = match form.next_field().await {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
            };
            let name = field.file_name().map(str::to_string);
            let path = match (&q.path, name) {
                (Some(p), _) if !p.is_empty() => p.clone(),
                (_, Some(n)) if !n.is_empty() => n,
                _ => return error(StatusCode::BAD_REQUEST, "each file needs a path"),
            };
            let mut field = field;
            let mut data = Vec::new();
            loop {
                match field.chunk().await {
                    Ok(Some(c)) => {
                        total += c.len();
                        if total > MAX_FILE_BYTES {
                            return too_large();
                        }
                        data.extend_from_slice(&c);
                    }
                    Ok(None) => break,
                    Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
                }
            }
            files.push((path, data));
        }
    } else if content_type.starts_with("application/octet-stream") || content_type.is_empty() {
        let Some(path) = q.path.clone().filter(|p| !p.is_empty()) else {
            return error(StatusCode::BAD_REQUEST, "path is required");
        };
        let body = match axum::body::to_bytes(req.into_body(), MAX_FILE_BYTES).await {
            Ok(b) => b,
            Err(_) => return too_large(),
        };
        let data = match gzip.as_deref() {
            None | Some("identity") => body.to_vec(),
            Some("gzip") => {
                let mut out = Vec::new();
                let read = flate2::read::GzDecoder::new(&body[..])
                    .take(MAX_FILE_BYTES as u64 + 1)
                    .read_to_end(&mut out);
                match read {
                    Ok(n) if n > MAX_FILE_BYTES => return too_large(),
                    Ok(_) => out,
                    Err(e) => {
                        return error(
                            StatusCode::BAD_REQUEST,
                            format!("the gzip body is not valid: {e}"),
                        );
                    }
                }
            }
            Some(other) => {
                return error(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    format!("Content-Encoding {other:?} is not supported: send gzip or none"),
                );
            }
        };
        files.push((path, data));
    } else {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {content_type:?}: send multipart/form-data or application/octet-stream"
            ),
        );
    }
    if files.is_empty() {
        return error(StatusCode::BAD_REQUEST, "no file in the request");
    }
    let mut written = Vec::new();
    for (path, data) in files {
        let abs = sandbox.absolute_path(&path);
        let new = sandbox.stat(&abs).is_err();
        if let Err(e) = sandbox.write_file_async(&abs, data.into()).await {
            return file_error(e);
        }
        if new {
            // A new file gets envd's mode for uploads (its watchers see the change, as
            // they see envd's chown of the file to the sandbox's user).
            let _ = sandbox.set_permissions(&abs, 0o644);
        }
        // The upload's metadata, the same for every file; an upload without any clears
        // what an earlier one left.
        if let Err(e) = sandbox.set_user_xattrs(&abs, super::fs::METADATA_PREFIX, &metadata) {
            return file_error(e);
        }
        let name = abs.rsplit('/').next().unwrap_or("").to_string();
        let mut info = serde_json::json!({ "name": name, "type": "file", "path": abs });
        if !metadata.is_empty() {
            info["metadata"] = metadata
                .iter()
                .map(|(k, v)| {
                    let key = &k[super::fs::METADATA_PREFIX.len()..];
                    (key.to_string(), String::from_utf8_lossy(v).into())
                })
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        written.push(info);
    }
    axum::Json(written).into_response()
}

/// The `X-Metadata-KEY: VALUE` headers of an upload, as the attributes they become
/// (`e2b.key`, the key lowercased as envd does): keys of HTTP token characters, values of
/// printable ASCII, within the runtime's limits.
fn upload_metadata(
    headers: &axum::http::HeaderMap,
) -> Result<std::collections::BTreeMap<String, Vec<u8>>, String> {
    use wasbox_runtime::{MAX_XATTR_NAME, MAX_XATTR_VALUE, MAX_XATTRS};
    let mut out = std::collections::BTreeMap::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix("x-metadata-") else {
            continue;
        };
        if key.is_empty() {
            return Err("a metadata key must not be empty".into());
        }
        let value = value
            .to_str()
            .ok()
            .filter(|v| v.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .ok_or_else(|| format!("metadata {key:?}: the value must be printable ASCII"))?;
        let attr = format!("{}{key}", super::fs::METADATA_PREFIX);
        if attr.len() > MAX_XATTR_NAME || value.len() > MAX_XATTR_VALUE {
            return Err(format!(
                "metadata {key:?}: keys are at most {} bytes, values {MAX_XATTR_VALUE}",
                MAX_XATTR_NAME - super::fs::METADATA_PREFIX.len()
            ));
        }
        out.insert(attr, value.as_bytes().to_vec());
    }
    if out.len() > MAX_XATTRS {
        return Err(format!("at most {MAX_XATTRS} metadata keys"));
    }
    Ok(out)
}

fn too_large() -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("a file of more than {MAX_FILE_BYTES} bytes"),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn signatures_match_envds() {
        // sha256("a.txt:read:user:tok") in unpadded base64, as the SDKs compute it.
        let s = super::signature("a.txt", "read", "user", "tok", None);
        assert_eq!(s, "v1_wPjHOh/p+K3FbqiyGd5vwPNc/g4IPd8sigMxb1gqu9I");
        assert_ne!(s, super::signature("a.txt", "write", "user", "tok", None));
        assert_ne!(s, super::signature("a.txt", "read", "user", "tok", Some(1)));
    }
}
