//! A private PostgreSQL server for the tests and the store's bench: `initdb` on a temporary
//! data directory, `pg_ctl start` on a free local port with its socket in that directory,
//! one database per test, and `pg_ctl stop -m immediate` when the last user drops it.
//!
//! PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user
//! (the directory is chown'ed to it). Without PostgreSQL installed a test is skipped, and
//! says why; in CI (`CI` set) that is a failure. Also compiled into `crates/scalprof`'s
//! tests (`#[path]`), so it needs nothing but std and `tempfile`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A running server; stopped on drop.
pub struct PgServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// Run the server's programs as this user (`postgres` when we are root).
    user: Option<String>,
}

/// The role the tests connect as (`initdb -U`), trusted without a password (except over
/// TCP on a [`PgServer::start_secure`] server).
pub const ROLE: &str = "scalprof";

/// [`ROLE`]'s password on a [`PgServer::start_secure`] server: with each of the characters
/// a URL must escape.
pub const PASSWORD: &str = "t0p:s/e?c@r&et%";

impl PgServer {
    /// The server this test binary's tests share while any of them runs, started if
    /// none does; `None` (after printing why) outside CI without PostgreSQL.
    pub fn shared(test: &str) -> Option<Arc<PgServer>> {
        static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(server) = shared.upgrade() {
            return Some(server);
        }
        let server = Arc::new(PgServer::start(test, false)?);
        *shared = Arc::downgrade(&server);
        Some(server)
    }

    /// Starts a server of its own. `durable`: with `fsync` on, as a real server runs (for
    /// timings); the tests turn it off.
    pub fn start(test: &str, durable: bool) -> Option<PgServer> {
        PgServer::start_with(test, durable, false)
    }

    /// Starts a server as a team would run one: TLS on (`ssl = on`, a self-signed
    /// certificate for `localhost`, [`PgServer::certificate`]), and over TCP a password
    /// needed ([`PASSWORD`], SCRAM); its Unix socket still trusts every local user.
    pub fn start_secure(test: &str) -> Option<PgServer> {
        let server = PgServer::start_with(test, false, true)?;
        let status = Command::new(server.bin.join("psql"))
            .args(["-h", &server.dir.path().display().to_string()])
            .args(["-p", &server.port.to_string(), "-U", ROLE, "-d", "postgres"])
            .args(["-v", "ON_ERROR_STOP=1", "-qc"])
            .arg(format!("ALTER ROLE {ROLE} PASSWORD '{PASSWORD}'"))
            .status()
            .expect("psql runs");
        assert!(status.success(), "{test}: cannot set the role's password");
        Some(server)
    }

    /// The certificate (PEM) a [`PgServer::start_secure`] server presents, also its own
    /// root: what `sslrootcert=` names to verify it.
    pub fn certificate(&self) -> PathBuf {
        self.dir.path().join("data/server.crt")
    }

    /// A URL of database `db` on this server with `params` (`key=value&…`), through TCP
    /// on `host`.
    pub fn url_with(&self, host: &str, db: &str, params: &str) -> String {
        format!("postgres://{ROLE}@{host}:{}/{db}?{params}", self.port)
    }

    /// Runs SQL on database `db` through the server's Unix socket, as [`ROLE`].
    pub fn psql(&self, db: &str, sql: &str) {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", &self.dir.path().display().to_string()])
            .args(["-p", &self.port.to_string(), "-U", ROLE, "-d", db])
            .args(["-v", "ON_ERROR_STOP=1", "-qc", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new, empty database, made through the Unix socket (a secure server's TCP port
    /// wants a password); its name.
    pub fn create_database(&self, name: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let db = format!("{name}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.psql("postgres", &format!("CREATE DATABASE {db}"));
        db
    }

    fn start_with(test: &str, durable: bool, secure: bool) -> Option<PgServer> {
        let Some(bin) = bin_dir() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: PostgreSQL is not installed, and CI needs it (apt-get install postgresql)"
            );
            eprintln!("{test}: skipped, PostgreSQL is not installed (apt-get install postgresql)");
            return None;
        };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let dir = tempfile::Builder::new()
            .prefix("scalprof-pg-")
            .tempdir()
            .expect("a temporary directory");
        let user = root.then(|| "postgres".to_string());
        if root {
            let (uid, gid) = ids("postgres");
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown to postgres");
        }
        let mut server = PgServer {
            bin,
            dir,
            port: 0,
            user,
        };
        server.init_cluster(secure);
        if secure {
            server.make_certificate();
        }
        if server.start_on_a_free_port(durable, secure) {
            return Some(server);
        }
        let log = std::fs::read_to_string(server.dir.path().join("log")).unwrap_or_default();
        panic!("{test}: the PostgreSQL server did not start:\n{log}");
    }

    /// `initdb`: local connections trusted; over TCP, trusted too, or a password on a
    /// `secure` server.
    fn init_cluster(&self, secure: bool) {
        let data = self.data();
        let host_auth = if secure {
            "--auth-host=scram-sha-256"
        } else {
            "--auth-host=trust"
        };
        self.run(
            "initdb",
            &[
                "-D",
                &data,
                "--auth-local=trust",
                host_auth,
                "-U",
                ROLE,
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
    }

    /// A self-signed certificate for localhost, made by the server's user (its key must be
    /// that user's, mode 0600).
    fn make_certificate(&self) {
        self.run(
            "openssl",
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "data/server.key",
                "-out",
                "data/server.crt",
            ],
        );
    }

    /// `pg_ctl start` on a free port, with `fsync` only when `durable` and TLS when
    /// `secure`; false when it did not start. A port free now may be taken before the
    /// server binds it: it tries a few.
    fn start_on_a_free_port(&mut self, durable: bool, secure: bool) -> bool {
        let data = self.data();
        for _ in 0..5 {
            self.port = free_port();
            let mut options = format!(
                "-p {} -k {} -h 127.0.0.1 -c fsync={} -c max_connections=60",
                self.port,
                self.dir.path().display(),
                if durable { "on" } else { "off" }
            );
            if secure {
                options.push_str(" -c ssl=on");
            }
            let log = self.dir.path().join("log").display().to_string();
            if self.try_run(
                "pg_ctl",
                &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
            ) {
                return true;
            }
        }
        false
    }

    /// A new, empty database for one test, as a URL to pass to `--db`.
    pub fn database(&self, name: &str) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let safe: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(40)
            .collect();
        let db = format!("{safe}_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let port = self.port.to_string();
        let status = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &port, "-U", ROLE, &db])
            .status()
            .expect("createdb runs");
        assert!(status.success(), "createdb {db} failed");
        self.url(&db)
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{ROLE}@127.0.0.1:{}/{db}", self.port)
    }

    /// The URL of database `db` through the server's Unix socket (its directory, with
    /// `/` written `%2F`, as the host).
    pub fn socket_url(&self, db: &str) -> String {
        let dir = self.dir.path().display().to_string().replace('/', "%2F");
        format!("postgres://{ROLE}@{dir}:{}/{db}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let program = if program == "openssl" {
            PathBuf::from(program)
        } else {
            self.bin.join(program)
        };
        let mut c = match &self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        c.args(args).current_dir(self.dir.path());
        c
    }

    fn try_run(&self, program: &str, args: &[&str]) -> bool {
        self.command(program, args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn run(&self, program: &str, args: &[&str]) {
        let out = self
            .command(program, args)
            .output()
            .unwrap_or_else(|e| panic!("{program} cannot run: {e}"));
        assert!(
            out.status.success(),
            "{program} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.try_run("pg_ctl", &["-D", &data, "-m", "immediate", "stop"]);
    }
}

/// The newest installed PostgreSQL's programs (Debian keeps them per version).
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn ids(user: &str) -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, user])
            .output()
            .expect("id runs");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no user {user}"))
    };
    (id("-u"), id("-g"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}
