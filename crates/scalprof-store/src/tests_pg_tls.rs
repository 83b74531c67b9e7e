//! The team store's connection against a real server: TLS by `sslmode`, and passwords
//! from the URL or a private password file.

use super::tests_pg_trust::said;
use std::path::Path;

use super::test_server::PgServer;
use super::tests::new_run;
use super::tests_pg::database;
use super::{pg, Store, StoreError};

/// `s` with every byte but letters and digits percent-encoded.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether the connection to `url` is encrypted (`pg_stat_ssl`).
fn encrypted(url: &str) -> Result<bool, StoreError> {
    let (config, tls) = pg::connection(url, "test")?;
    let mut c = config.connect(tls)?;
    Ok(c.query_one(
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        &[],
    )?
    .get(0))
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn tls_by_sslmode_and_passwords_from_the_url_or_a_private_password_file() {
    use super::test_server::{PASSWORD, ROLE};
    use std::os::unix::fs::PermissionsExt;
    let Some(server) = PgServer::start_secure("tls") else {
        return;
    };
    let db = server.create_database("tls");
    let root = server.certificate().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    // Another self-signed certificate for localhost: not the server's root.
    let wrong = dir.path().join("wrong.crt");
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(dir.path().join("wrong.key"))
        .arg("-out")
        .arg(&wrong)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let port = server.port();
    let with_password = |host: &str, params: &str| {
        format!(
            "postgres://{ROLE}:{}@{host}:{port}/{db}?{params}",
            percent_encode(PASSWORD)
        )
    };

    // require: encrypted, the certificate not checked.
    let url = with_password("127.0.0.1", "sslmode=require");
    assert!(encrypted(&url).unwrap());
    drop(Store::open(Path::new(&url)).unwrap());
    // The default (prefer) encrypts where the server offers it; disable does not.
    assert!(encrypted(&with_password("127.0.0.1", "application_name=x")).unwrap());
    assert!(!encrypted(&with_password("127.0.0.1", "sslmode=disable")).unwrap());
    // verify-full: the server's root and its name.
    let full = |host: &str, root: &str| {
        with_password(host, &format!("sslmode=verify-full&sslrootcert={root}"))
    };
    assert!(encrypted(&full("localhost", &root)).unwrap());
    let e = encrypted(&full("localhost", &wrong.display().to_string())).unwrap_err();
    assert!(matches!(e, StoreError::Postgres(_)), "{}", said(&e));
    assert!(
        said(&e).contains("certificate verify failed"),
        "{}",
        said(&e)
    );
    let e = Store::open(Path::new(&full("localhost", &wrong.display().to_string())))
        .err()
        .expect("the wrong root was accepted");
    assert!(matches!(e, StoreError::Connect { .. }), "{}", said(&e));
    assert!(!said(&e).contains("s/e?c"), "{}", said(&e));
    // The certificate is made out to localhost, not 127.0.0.1: verify-ca does not mind.
    assert!(encrypted(&full("127.0.0.1", &root)).is_err());
    let ca = with_password(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={root}"),
    );
    assert!(encrypted(&ca).unwrap());
    let e = encrypted(&with_password(
        "localhost",
        "sslmode=verify-full&sslrootcert=/nonexistent",
    ))
    .unwrap_err();
    assert!(
        matches!(e, StoreError::Tls { .. }) && said(&e).contains("sslrootcert="),
        "{}",
        said(&e)
    );

    // The password from a password file of the user's own (0600), with escaped colons.
    let passfile = dir.path().join("pgpass");
    std::fs::write(
        &passfile,
        format!(
            "# team\n127.0.0.1:{port}:{db}:{ROLE}:{}\n",
            PASSWORD.replace('\\', "\\\\").replace(':', "\\:")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let by_file = format!(
        "postgres://{ROLE}@127.0.0.1:{port}/{db}?sslmode=require&passfile={}",
        passfile.display()
    );
    let store = Store::open(Path::new(&by_file)).unwrap();
    store.create_run(&new_run("by file")).unwrap();
    // Others may read it: refused, and said how to fix.
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Store::open(Path::new(&by_file))
        .err()
        .expect("a readable passfile was used");
    assert!(
        matches!(e, StoreError::Password { .. }) && said(&e).contains("chmod 600"),
        "{}",
        said(&e)
    );
    // No password at all: the server's refusal.
    let none = format!("postgres://{ROLE}@127.0.0.1:{port}/{db}?passfile=/nonexistent");
    assert!(matches!(
        Store::open(Path::new(&none)),
        Err(StoreError::Connect { .. })
    ));
    // require where the server has no TLS.
    let Some((_plain, plain_url)) = database("no_tls") else {
        return;
    };
    let e = Store::open(Path::new(&format!("{plain_url}?sslmode=require")))
        .err()
        .expect("a server without TLS passed sslmode=require");
    assert!(
        said(&e).contains("server does not support TLS"),
        "{}",
        said(&e)
    );
}
