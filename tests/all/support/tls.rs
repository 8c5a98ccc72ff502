//! Certificates of a test's own for TLS on loopback: a certificate authority and a
//! certificate it signed for `127.0.0.1` (made by the `openssl` command), and a rustls server
//! configuration that serves them.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub struct Certificates {
    /// The directory that holds them (and room for a test's other files).
    pub dir: tempfile::TempDir,
    /// The authority's certificate: what a client must trust.
    pub ca: PathBuf,
    /// The server's certificate, for `127.0.0.1`.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl Certificates {
    /// Makes them, or skips the test (see [`super::skip`]) when openssl cannot.
    pub fn make() -> Option<Certificates> {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| dir.path().join(name);
        std::fs::write(
            file("leaf.ext"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        let path = |name: &str| file(name).display().to_string();
        let new_key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
        let steps = [
            format!(
                "req -x509 -days 2 -subj /CN=wasbox-test-ca {new_key} -keyout {} -out {}",
                path("ca.key"),
                path("ca.pem")
            ),
            format!(
                "req -subj /CN=127.0.0.1 {new_key} -keyout {} -out {}",
                path("key.pem"),
                path("leaf.csr")
            ),
            format!(
                "x509 -req -days 2 -CAcreateserial -in {} -CA {} -CAkey {} -extfile {} -out {}",
                path("leaf.csr"),
                path("ca.pem"),
                path("ca.key"),
                path("leaf.ext"),
                path("cert.pem")
            ),
        ];
        for args in steps {
            let made = std::process::Command::new("openssl")
                .args(args.split(' '))
                .output();
            if !made.as_ref().is_ok_and(|o| o.status.success()) {
                super::skip(&format!("openssl {args} failed: {made:?}"));
                return None;
            }
        }
        Some(Certificates {
            ca: file("ca.pem"),
            cert: file("cert.pem"),
            key: file("key.pem"),
            dir,
        })
    }

    /// A TLS server's configuration with the server's certificate and key.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&self.key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        Arc::new(config)
    }
}
