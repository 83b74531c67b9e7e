//! TLS to the team store, chosen by `sslmode` as libpq reads it (the URL's parameter, else
//! PGSSLMODE, else `prefer`), over Debian's OpenSSL (`native-tls`):
//!
//! | sslmode | encrypted | server proven |
//! |---|---|---|
//! | `disable` | no | no |
//! | `prefer` (the default) | if the server offers it | no |
//! | `require` | yes | no |
//! | `verify-ca` | yes | its certificate is signed by `sslrootcert` |
//! | `verify-full` | yes | as `verify-ca`, and made out to the URL's host name |
//!
//! Only `verify-ca` and `verify-full` keep a password from a program that answers on the
//! server's address (another user's listener on a free port, a machine on the path): the
//! others encrypt at most. `sslrootcert` is the file of trusted root certificates (PEM),
//! else PGSSLROOTCERT, else `~/.postgresql/root.crt`; `sslrootcert=system` trusts the
//! system's roots. A Unix socket is never encrypted (PostgreSQL offers no TLS there), as
//! libpq ignores `sslmode` for it.

use std::path::PathBuf;

use postgres_native_tls::MakeTlsConnector;

use super::url::PgUrl;
use crate::StoreError;

/// How far the connection must be protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    /// The mode of `url`: its `sslmode=`, else PGSSLMODE, else `prefer`.
    pub(crate) fn of(url: &PgUrl<'_>, shown: &str) -> Result<SslMode, StoreError> {
        let from_env = std::env::var("PGSSLMODE").ok().filter(|v| !v.is_empty());
        let value = url.param("sslmode").map(str::to_string).or(from_env);
        Ok(match value.as_deref() {
            None | Some("prefer") => SslMode::Prefer,
            Some("disable") => SslMode::Disable,
            Some("require") => SslMode::Require,
            Some("verify-ca") => SslMode::VerifyCa,
            Some("verify-full") => SslMode::VerifyFull,
            Some(other) => {
                return Err(StoreError::Tls {
                    url: shown.to_string(),
                    reason: format!(
                        "sslmode={other} is not one scalprof knows: use disable, prefer, \
                         require, verify-ca or verify-full"
                    ),
                })
            }
        })
    }

    /// The client's mode: it encrypts or not; the connector checks the certificate.
    pub(crate) fn client(self) -> postgres::config::SslMode {
        match self {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        }
    }

    /// The mode as `sslmode=` writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    pub(crate) fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// The connector for `mode`: one that checks the server's certificate for `verify-*`, one
/// that accepts any for `prefer` and `require` (they promise encryption only).
pub(crate) fn connector(
    mode: SslMode,
    url: &PgUrl<'_>,
    shown: &str,
) -> Result<MakeTlsConnector, StoreError> {
    let fail = |reason: String| StoreError::Tls {
        url: shown.to_string(),
        reason,
    };
    let mut builder = native_tls::TlsConnector::builder();
    builder.min_protocol_version(Some(native_tls::Protocol::Tlsv12));
    if mode.verifies() {
        let root = url.param("sslrootcert").map(str::to_string).or_else(|| {
            std::env::var("PGSSLROOTCERT")
                .ok()
                .filter(|v| !v.is_empty())
        });
        if root.as_deref() != Some("system") {
            let path = match root {
                Some(p) => PathBuf::from(p),
                None => std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".postgresql/root.crt"))
                    .unwrap_or_default(),
            };
            let pem = std::fs::read(&path).map_err(|e| {
                fail(format!(
                    "sslmode={} needs the server's root certificate, and {} cannot be read ({e}): \
                     pass sslrootcert=FILE in the URL (or sslrootcert=system for the system's roots)",
                    mode.name(),
                    path.display()
                ))
            })?;
            let certs = pem_certificates(&pem);
            if certs.is_empty() {
                return Err(fail(format!(
                    "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    path.display()
                )));
            }
            builder.disable_built_in_roots(true);
            for c in certs {
                let cert = native_tls::Certificate::from_pem(&c)
                    .map_err(|e| fail(format!("a certificate in {}: {e}", path.display())))?;
                builder.add_root_certificate(cert);
            }
        }
        builder.danger_accept_invalid_hostnames(mode == SslMode::VerifyCa);
    } else {
        builder.danger_accept_invalid_certs(true);
        builder.danger_accept_invalid_hostnames(true);
    }
    let connector = builder
        .build()
        .map_err(|e| fail(format!("OpenSSL could not be set up: {e}")))?;
    Ok(MakeTlsConnector::new(connector))
}

/// Each `-----BEGIN CERTIFICATE-----` block of a PEM file.
fn pem_certificates(pem: &[u8]) -> Vec<Vec<u8>> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let text = String::from_utf8_lossy(pem);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let end = start + len + END.len();
        out.push(rest.as_bytes()[start..end].to_vec());
        rest = &rest[end..];
    }
    out
}
