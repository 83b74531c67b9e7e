//! A server's operations from its metrics endpoint (`watch --ops-url URL#METRIC`): a
//! Prometheus counter in the text format, read on this host, its increase between two reads
//! (a counter that went down was reset: its new value is the increase).
//!
//! Only an endpoint on this host is read (`localhost`, `127.0.0.0/8`, `[::1]`), over plain
//! HTTP, without a proxy or redirects, at most [`MOST_BYTES`] an answer: what the server
//! answers decides nothing scalprof runs or opens.

use std::time::Duration;

/// The most of an answer that is read.
pub const MOST_BYTES: u64 = 8 << 20;

/// How long a read may take.
const TIMEOUT: Duration = Duration::from_secs(1);

/// A counter followed at an endpoint.
pub struct Scraper {
    url: String,
    selector: Selector,
    agent: ureq::Agent,
    /// The counter's last value read.
    last: Option<f64>,
    said_failing: bool,
}

/// Which series of the answer are summed: a metric name and labels they must have.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    pub name: String,
    pub labels: Labels,
}

impl Scraper {
    /// The endpoint and counter of `spec` (`http://127.0.0.1:9100/metrics#requests_total`,
    /// labels as `#name{code="200"}`), read once now: a typo is said before the watch.
    pub fn open(spec: &str) -> Result<Scraper, String> {
        let (url, metric) = spec.rsplit_once('#').ok_or_else(|| {
            format!("--ops-url {spec}: name the counter after a #: URL#METRIC (http://127.0.0.1:9100/metrics#http_requests_total)")
        })?;
        same_host(url).map_err(|why| format!("--ops-url {url}: {why}"))?;
        let selector =
            Selector::parse(metric).map_err(|why| format!("--ops-url …#{metric}: {why}"))?;
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .proxy(None)
            .max_redirects(0)
            .build();
        let mut scraper = Scraper {
            url: url.to_string(),
            selector,
            agent: config.into(),
            last: None,
            said_failing: false,
        };
        let value = scraper.read()?;
        scraper.last = Some(value.ok_or_else(|| {
            format!(
                "--ops-url {url}: its answer has no series of {metric} (`curl -s {url} | grep {}` lists them)",
                scraper.selector.name
            )
        })?);
        Ok(scraper)
    }

    /// The counter's increase since the last read (`Some(0)` the first time it is seen).
    pub fn poll(&mut self) -> super::follow::Polled {
        let mut polled = super::follow::Polled::default();
        match self.read() {
            Ok(Some(now)) => {
                let increase = match self.last {
                    Some(was) if now >= was => now - was,
                    Some(_) => now, // reset: the server restarted its count
                    None => 0.0,
                };
                self.last = Some(now);
                self.said_failing = false;
                polled.ops = Some(increase.round() as u64);
            }
            Ok(None) | Err(_) if self.said_failing => {}
            Ok(None) => {
                self.said_failing = true;
                polled.notes.push(format!(
                    "{}: the counter {} is no longer in its answer",
                    self.url, self.selector.name
                ));
            }
            Err(why) => {
                self.said_failing = true;
                polled.notes.push(format!("{why}; reading it again"));
            }
        }
        polled
    }

    /// The counter's value now; `None`: no series of it in the answer.
    fn read(&self) -> Result<Option<f64>, String> {
        let mut answer = self
            .agent
            .get(&self.url)
            .call()
            .map_err(|e| format!("--ops-url {}: {e}", self.url))?;
        let text = answer
            .body_mut()
            .with_config()
            .limit(MOST_BYTES)
            .read_to_string()
            .map_err(|e| format!("--ops-url {}: {e}", self.url))?;
        Ok(self.selector.sum(&text))
    }
}

/// Whether `url` is plain HTTP to this host.
fn same_host(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only an http:// endpoint on this host is read")?;
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    let local = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if local {
        Ok(())
    } else {
        Err(format!(
            "{host} is not this host: watch reads a metrics endpoint on this host only (localhost, 127.0.0.1, [::1])"
        ))
    }
}

impl Selector {
    /// `name` or `name{label="value",…}`.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let (name, labels) = match text.split_once('{') {
            None => (text, Vec::new()),
            Some((name, rest)) => {
                let inner = rest.strip_suffix('}').ok_or("labels end with }")?;
                (
                    name,
                    parse_labels(inner).ok_or("labels are name=\"value\", separated by commas")?,
                )
            }
        };
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if !valid {
            return Err(format!("{name:?} is not a metric name"));
        }
        Ok(Selector {
            name: name.to_string(),
            labels,
        })
    }

    /// The sum of the series of the text format `text` that match; `None` without one.
    pub fn sum(&self, text: &str) -> Option<f64> {
        let mut total = None;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, labels, value)) = sample(line) else {
                continue;
            };
            if name != self.name || !self.labels.iter().all(|l| labels.contains(l)) {
                continue;
            }
            if let Ok(v) = value.parse::<f64>() {
                if v.is_finite() {
                    total = Some(total.unwrap_or(0.0) + v);
                }
            }
        }
        total
    }
}

/// A series' labels, by name.
type Labels = Vec<(String, String)>;

/// A sample line: its name, labels and value (a timestamp after it is left).
fn sample(line: &str) -> Option<(&str, Labels, &str)> {
    match line.find('{') {
        Some(open) if line[..open].find(' ').is_none() => {
            let close = closing_brace(line, open)?;
            let labels = parse_labels(&line[open + 1..close])?;
            let value = line[close + 1..].split_whitespace().next()?;
            Some((&line[..open], labels, value))
        }
        _ => {
            let mut words = line.split_whitespace();
            Some((words.next()?, Vec::new(), words.next()?))
        }
    }
}

/// Where the label set opened at `open` closes (braces inside quoted values skipped).
fn closing_brace(line: &str, open: usize) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in line[open + 1..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(open + 1 + i),
            _ => {}
        }
    }
    None
}

/// `a="x",b="y\"z"` (a trailing comma allowed).
fn parse_labels(text: &str) -> Option<Labels> {
    let mut labels = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let after = after.trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((name.trim().to_string(), value));
        rest = after[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "\
# HELP http_requests_total Requests served.
# TYPE http_requests_total counter
http_requests_total{code=\"200\",path=\"/a{b}\"} 1027 1700000000000
http_requests_total{code=\"500\",path=\"/a\"} 3
http_requests_total{code=\"200\",path=\"/q\\\"x\"} 5
http_requests_total_created 1.7e9
other_total 9
";

    #[test]
    fn a_counters_series_are_summed_where_their_labels_match() {
        let all = Selector::parse("http_requests_total").unwrap();
        assert_eq!(all.sum(ANSWER), Some(1035.0));
        let ok = Selector::parse(r#"http_requests_total{code="200"}"#).unwrap();
        assert_eq!(ok.sum(ANSWER), Some(1032.0));
        let quoted = Selector::parse(r#"http_requests_total{path="/q\"x"}"#).unwrap();
        assert_eq!(quoted.sum(ANSWER), Some(5.0));
        assert_eq!(Selector::parse("missing_total").unwrap().sum(ANSWER), None);
        assert!(Selector::parse("bad name").is_err());
        assert!(Selector::parse(r#"x{code="200""#).is_err());
    }

    #[test]
    fn only_plain_http_on_this_host_is_read() {
        for url in [
            "http://127.0.0.1:9100/metrics",
            "http://localhost/metrics",
            "http://[::1]:8080/m",
        ] {
            assert_eq!(same_host(url), Ok(()), "{url}");
        }
        for url in [
            "https://127.0.0.1/metrics",
            "http://10.0.0.5:9100/metrics",
            "http://example.com/metrics",
            "http://127.0.0.1.example.com/metrics",
        ] {
            assert!(same_host(url).is_err(), "{url}");
        }
    }

    #[test]
    fn a_served_counter_is_followed_through_a_reset() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            for value in [100, 160, 160, 20] {
                let (mut s, _) = listener.accept().unwrap();
                let mut request = [0u8; 1024];
                let _ = s.read(&mut request);
                let body = format!("# TYPE served_total counter\nserved_total {value}\n");
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        let mut scraper =
            Scraper::open(&format!("http://127.0.0.1:{port}/metrics#served_total")).unwrap();
        assert_eq!(scraper.poll().ops, Some(60));
        assert_eq!(scraper.poll().ops, Some(0));
        assert_eq!(scraper.poll().ops, Some(20), "a reset counts its new value");
        server.join().unwrap();
        let refused = Scraper::open(&format!("http://127.0.0.1:{port}/metrics#served_total"));
        assert!(refused.is_err());
    }
}
