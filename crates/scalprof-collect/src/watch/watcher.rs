//! The watch's own thread: it reads the server's operations (its log, or its metrics
//! endpoint) and samples its threads' waits, on the monotonic clock, while the windows are
//! measured; the windows read what it saw between their ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{follow, load, scrape};
use crate::CollectError;

/// How often the watcher reads the log and samples the threads' waits (at most).
pub(super) const TICK: Duration = Duration::from_millis(40);

/// How often a metrics endpoint is read.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);

/// Where the watcher reads the operations.
pub(super) enum OpsSource {
    Log(follow::Follower),
    Url(scrape::Scraper),
}

/// The watcher keeps its thread-wait sampling under this share of one CPU.
const SAMPLING_SHARE: f64 = 0.01;

/// What the watcher thread has seen, on the monotonic clock.
#[derive(Default)]
pub(super) struct Timeline {
    /// Polls that read at least one ops line: when, and the sum of their counts.
    pub(super) ops: Vec<(Instant, u64)>,
    /// Samples of the threads waiting on a lock or the kernel.
    pub(super) waits: Vec<(Instant, Vec<load::ThreadId>)>,
    /// The most sleeping threads whose wait could not be read, in one sample.
    pub(super) unknown_waits: u32,
    /// Lines for the user (log rotated, skipped, …), not yet told.
    pub(super) notes: Vec<String>,
    /// Polls that read latency lines: when, the latencies' sum in seconds, how many.
    pub(super) latencies: Vec<(Instant, f64, u64)>,
    /// Ops lines whose group was not a number, not yet told.
    pub(super) not_numbers: u64,
    /// When the log was last read.
    pub(super) polled: Option<Instant>,
}

/// The thread that reads the log and samples the threads' waits.
pub(super) struct Watcher {
    stop: Arc<AtomicBool>,
    pids: Arc<Mutex<Vec<i32>>>,
    timeline: Arc<Mutex<Timeline>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Watcher {
    pub(super) fn start(
        mut source: Option<OpsSource>,
        pids: Vec<i32>,
    ) -> Result<Watcher, CollectError> {
        let stop = Arc::new(AtomicBool::new(false));
        let pids = Arc::new(Mutex::new(pids));
        let timeline = Arc::new(Mutex::new(Timeline::default()));
        let (s, p, t) = (stop.clone(), pids.clone(), timeline.clone());
        let handle = std::thread::Builder::new()
            .name("scalprof-watch".into())
            .spawn(move || {
                let mut next_wait_sample = Instant::now();
                let mut next_scrape = Instant::now();
                let mut wait_every = TICK;
                while !s.load(Ordering::SeqCst) {
                    let polled = match source.as_mut() {
                        Some(OpsSource::Log(f)) => Some(f.poll()),
                        Some(OpsSource::Url(scraper)) if Instant::now() >= next_scrape => {
                            next_scrape = Instant::now() + SCRAPE_EVERY;
                            Some(scraper.poll())
                        }
                        _ => None,
                    };
                    let now = Instant::now();
                    let sample = (now >= next_wait_sample).then(|| {
                        let targets = p.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        let took = Instant::now();
                        let waiting = load::waiting_threads(&targets);
                        // The sampling's own CPU stays under its share, however many threads.
                        wait_every = TICK.max(took.elapsed().div_f64(SAMPLING_SHARE));
                        next_wait_sample = now + wait_every;
                        waiting
                    });
                    {
                        let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(polled) = polled {
                            t.polled = Some(now);
                            if let Some(n) = polled.ops {
                                t.ops.push((now, n));
                            }
                            t.not_numbers += polled.not_numbers;
                            if polled.latencies > 0 {
                                t.latencies.push((now, polled.latency_s, polled.latencies));
                            }
                            t.notes.extend(polled.notes);
                        }
                        if let Some((blocked, unknown)) = sample {
                            t.waits.push((now, blocked));
                            t.unknown_waits = t.unknown_waits.max(unknown);
                        }
                    }
                    std::thread::sleep(TICK);
                }
            })
            .map_err(|e| {
                CollectError::Attach(format!("could not start the watch's thread: {e}"))
            })?;
        Ok(Watcher {
            stop,
            pids,
            timeline,
            handle: Some(handle),
        })
    }

    pub(super) fn set_pids(&self, pids: &[i32]) {
        *self.pids.lock().unwrap_or_else(|e| e.into_inner()) = pids.to_vec();
    }

    pub(super) fn timeline(&self) -> std::sync::MutexGuard<'_, Timeline> {
        self.timeline.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
