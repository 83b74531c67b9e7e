//! Reading a `postgres://` URL ourselves, strictly, before the client sees it: its password
//! taken out (to hide it in what we print, and to move it out of scalprof's command line),
//! and the parameters the client does not know (`sslmode=verify-*`, `sslrootcert`,
//! `passfile`) kept for us.
//!
//! The grammar is libpq's (`postgres[ql]://[user[:password]@][host[:port][,…]][/dbname]
//! [?key=value&…]`, every part percent-decoded, keys too), read strictly where a lenient
//! reading could put part of a password somewhere we print: an `@` anywhere but at the end
//! of the user and password must be written `%40` (so must `/`, `?` and `&` inside a
//! password). A URL we cannot read is shown without anything that could be a password.

/// The parameters this module reads, besides those the client reads itself.
const OURS: [&str; 4] = ["password", "passfile", "sslmode", "sslrootcert"];

/// The parameters the client (`tokio_postgres::Config`) reads from a URL.
const CLIENTS: [&str; 18] = [
    "user",
    "dbname",
    "options",
    "application_name",
    "sslnegotiation",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
    "gssencmode",
];

/// A URL as read: the raw (still encoded) text of each part, and the password decoded.
#[derive(Debug)]
pub(crate) struct PgUrl<'a> {
    scheme: &'a str,
    /// The user part of the user information, as written.
    user: Option<&'a str>,
    /// Whether the user information has a password (`user:…@`).
    has_url_password: bool,
    /// Host list (with ports) as written.
    hosts: &'a str,
    /// `/dbname` as written, or empty.
    path: &'a str,
    /// `key=value` pairs: the raw text, the decoded key and the decoded value.
    params: Vec<Param<'a>>,
    /// The password: the `password=` parameter's, else the user information's (decoded).
    pub(crate) password: Option<Vec<u8>>,
}

#[derive(Debug)]
struct Param<'a> {
    raw_key: &'a str,
    raw_value: &'a str,
    key: String,
    value: String,
}

/// Why a URL could not be read: says nothing that could be part of a password.
#[derive(Debug, PartialEq)]
pub(crate) struct UrlError(pub(crate) String);

impl<'a> PgUrl<'a> {
    pub(crate) fn parse(url: &'a str) -> Result<PgUrl<'a>, UrlError> {
        let (scheme, rest) = ["postgresql://", "postgres://"]
            .iter()
            .find_map(|p| url.strip_prefix(p).map(|rest| (&url[..p.len() - 3], rest)))
            .ok_or_else(|| UrlError("it does not start with postgres://".into()))?;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, after) = rest.split_at(authority_end);
        let ambiguous = || {
            UrlError(
                "an @ may only end the user and password; write a password's @ / ? & : as \
                 %40 %2F %3F %26 %3A (and an @ in the database or a parameter as %40)"
                    .into(),
            )
        };
        if after.contains('@') {
            return Err(ambiguous());
        }
        let (userinfo, hosts) = match authority.split_once('@') {
            Some((_, h)) if h.contains('@') => return Err(ambiguous()),
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, url_password) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((user, password)) => (Some(user), Some(password)),
                None => (Some(u), None),
            },
            None => (None, None),
        };
        let (path, query) = match after.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (after, None),
        };
        let mut params = Vec::new();
        for kv in query.into_iter().flat_map(|q| q.split('&')) {
            if kv.is_empty() {
                continue;
            }
            let Some((raw_key, raw_value)) = kv.split_once('=') else {
                return Err(UrlError(
                    "a parameter without a value (key=value); write a password's & as %26".into(),
                ));
            };
            params.push(Param {
                raw_key,
                raw_value,
                key: decode_text(raw_key)?,
                value: decode_text(raw_value)?,
            });
        }
        let password = params
            .iter()
            .rev()
            .find(|p| p.key.eq_ignore_ascii_case("password"))
            .map(|p| decode(p.raw_value))
            .or_else(|| url_password.map(decode));
        let parsed = PgUrl {
            scheme,
            user,
            has_url_password: url_password.is_some(),
            hosts,
            path,
            params,
            password,
        };
        // Unknown keys are named only where no `password=` could have made them (a
        // password's `&` starts what reads as another parameter).
        let has_password_param = parsed.params.iter().any(|p| p.is_password());
        for p in &parsed.params {
            let known = OURS.contains(&p.key.as_str()) || CLIENTS.contains(&p.key.as_str());
            if !known && !p.is_password() {
                return Err(UrlError(if has_password_param {
                    "an unknown parameter".into()
                } else {
                    format!("unknown parameter {:?}", p.key)
                }));
            }
        }
        Ok(parsed)
    }

    /// The value of parameter `key` (the last one given), decoded.
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    /// The URL without its password and without our own parameters: what the client reads.
    pub(crate) fn for_client(&self) -> String {
        self.rebuild(None, |p| {
            !OURS.contains(&p.key.as_str()) && !p.is_password()
        })
    }

    /// The URL as written, less its password: the same URL, usable in its place when the
    /// password comes from elsewhere.
    pub(crate) fn without_password(&self) -> String {
        self.rebuild(None, |p| !p.is_password())
    }

    /// The URL with its password shown as `***`.
    pub(crate) fn redacted(&self) -> String {
        self.rebuild(Some("***"), |_| true)
    }

    /// The URL from its parts: the password written as `password` (or left out), the
    /// parameters that `keep` keeps.
    fn rebuild(&self, password: Option<&str>, keep: impl Fn(&Param<'_>) -> bool) -> String {
        let mut out = format!("{}://", self.scheme);
        if let Some(user) = self.user {
            out.push_str(user);
            if let (true, Some(shown)) = (self.has_url_password, password) {
                out.push(':');
                out.push_str(shown);
            }
            out.push('@');
        }
        out.push_str(self.hosts);
        out.push_str(self.path);
        let kept: Vec<String> = self
            .params
            .iter()
            .filter(|p| keep(p))
            .map(|p| match password {
                Some(shown) if p.is_password() => format!("{}={shown}", p.raw_key),
                _ => format!("{}={}", p.raw_key, p.raw_value),
            })
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
        out
    }
}

impl Param<'_> {
    fn is_password(&self) -> bool {
        self.key.eq_ignore_ascii_case("password")
    }
}

/// The URL with its password hidden: `user:secret@` becomes `user:***@`, and a `password=`
/// parameter (in any case, its key percent-encoded or not) `password=***`. Errors and
/// `scalprof runs` show only this. A URL that cannot be read is shown with everything
/// before its last `@` hidden, or only its scheme when it names a password parameter.
pub fn redact(url: &str) -> String {
    if let Ok(parsed) = PgUrl::parse(url) {
        return parsed.redacted();
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return "***".into();
    };
    let decoded = String::from_utf8_lossy(&decode(rest)).to_ascii_lowercase();
    if decoded.contains("password") {
        return format!("{scheme}://*** (not shown: it may hold a password)");
    }
    match rest.rsplit_once('@') {
        Some((_, after)) => format!("{scheme}://***@{after}"),
        None => format!("{scheme}://{rest}"),
    }
}

/// Percent-decoding, as libpq does it (a `%` not followed by two hex digits stays).
fn decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

fn decode_text(s: &str) -> Result<String, UrlError> {
    String::from_utf8(decode(s)).map_err(|_| UrlError("a parameter is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::{redact, PgUrl};

    const SECRETS: [&str; 8] = [
        "s3cr:et",
        "pa/ss",
        "pa?ss",
        "p@ss",
        "a&b",
        "p%40ss",
        "x/1@y",
        "tOp:s/e?c@r&et",
    ];

    fn percent_encode(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    /// Every piece of `secret` longer than two characters, and the secret itself.
    fn pieces(secret: &str) -> Vec<String> {
        let mut out = vec![secret.to_string()];
        for part in secret.split(|c: char| !c.is_ascii_alphanumeric()) {
            if part.len() > 2 {
                out.push(part.to_string());
            }
        }
        out
    }

    fn assert_hidden(url: &str, secret: &str) {
        let shown = redact(url);
        for piece in pieces(secret) {
            assert!(
                !shown.contains(&piece),
                "{url:?} shown as {shown:?}: {piece:?} of the password is visible"
            );
        }
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redact("postgres://ann:s3cr:et@db.lan:5433/runs"),
            "postgres://ann:***@db.lan:5433/runs"
        );
        assert_eq!(
            redact("postgresql://ann@db.lan/runs?password=s3cret&sslmode=disable"),
            "postgresql://ann@db.lan/runs?password=***&sslmode=disable"
        );
        assert_eq!(
            redact("postgresql://ann@db.lan/runs?PassWord=s3cret"),
            "postgresql://ann@db.lan/runs?PassWord=***"
        );
        assert_eq!(redact("postgres://db.lan/runs"), "postgres://db.lan/runs");
        assert_eq!(
            redact("postgres://a:b@c@h/d"),
            "postgres://***@h/d",
            "a password with an @"
        );
        assert_eq!(
            redact("postgres://ann:pa/ss@db/runs"),
            "postgres://***@db/runs"
        );
    }

    #[test]
    fn no_piece_of_a_password_is_shown_however_it_is_written() {
        for secret in SECRETS {
            let encoded = percent_encode(secret);
            for url in [
                format!("postgres://ann:{secret}@db.lan:5433/runs"),
                format!("postgres://ann:{encoded}@db.lan:5433/runs"),
                format!("postgres://ann:{secret}@db.lan/runs?sslmode=require"),
                format!("postgresql://ann@db.lan/runs?password={secret}"),
                format!("postgresql://ann@db.lan/runs?password={encoded}&sslmode=disable"),
                format!("postgresql://ann@db.lan/runs?sslmode=disable&PASSWORD={secret}"),
                format!("postgresql://ann@db.lan/runs?pass%77ord={secret}"),
                format!("postgresql://ann@db.lan/runs?pass%77ord={encoded}"),
                format!("postgres://ann:{secret}@db.lan:notaport/runs"),
                format!("postgres://ann:{secret}@db.lan/runs?bogus=1"),
            ] {
                assert_hidden(&url, secret);
            }
        }
    }

    #[test]
    fn an_encoded_password_is_read_decoded_and_taken_out() {
        let url = "postgres://ann:tOp%3As%2Fe%3Fc%40r%26et@db.lan:5433/runs?sslmode=verify-full&sslrootcert=%2Fca.pem";
        let parsed = PgUrl::parse(url).unwrap();
        assert_eq!(parsed.password.as_deref(), Some(&b"tOp:s/e?c@r&et"[..]));
        assert_eq!(parsed.param("sslmode"), Some("verify-full"));
        assert_eq!(parsed.param("sslrootcert"), Some("/ca.pem"));
        assert_eq!(
            parsed.without_password(),
            "postgres://ann@db.lan:5433/runs?sslmode=verify-full&sslrootcert=%2Fca.pem"
        );
        assert_eq!(parsed.for_client(), "postgres://ann@db.lan:5433/runs");
        let by_param =
            PgUrl::parse("postgresql://ann@h/db?password=a%26b&application_name=x").unwrap();
        assert_eq!(by_param.password.as_deref(), Some(&b"a&b"[..]));
        assert_eq!(
            by_param.without_password(),
            "postgresql://ann@h/db?application_name=x"
        );
    }

    #[test]
    fn ambiguous_urls_are_refused_with_a_hint_and_nothing_of_the_password() {
        for url in [
            "postgres://ann:pa/ss@db/runs",
            "postgres://ann:p@ss@db/runs",
            "postgres://ann:12?x@db/runs",
            "postgres://ann@db/runs?application_name=a@b",
            "postgres://ann@db/runs?password=a&b",
        ] {
            let e = PgUrl::parse(url).unwrap_err();
            for piece in ["pa/ss", "p@ss", "12?x", "a@b", "a&b", "ann"] {
                assert!(!e.0.contains(piece), "{url}: {}", e.0);
            }
        }
        assert_eq!(
            PgUrl::parse("postgres://db/runs?colour=red").unwrap_err().0,
            "unknown parameter \"colour\""
        );
    }
}
