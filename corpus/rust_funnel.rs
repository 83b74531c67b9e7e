//! Every thread hands each result to one collector thread over a bounded
//! `std::sync::mpsc::sync_channel`: the senders wait for room while the collector folds
//! the results into its table alone. The corpus builds it with `rustc -O -g`. Argument:
//! threads (the producers). Prints "ops=N".
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Private work per result, on the producer's own thread.
#[inline(never)]
fn produce(results: SyncSender<u64>, iters: u64, seed: u64) {
    let mut x = seed | 1;
    for _ in 0..iters {
        for _ in 0..150 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        results.send(x).expect("the collector outlives the producers");
    }
}

/// The shared part: every result checked and folded into one table, by one thread (it
/// costs more than a producer's work: the collector alone cannot keep up with one).
#[inline(never)]
fn collect(results: Receiver<u64>) -> usize {
    let mut table: HashMap<u64, u64> = HashMap::new();
    for mut x in results {
        for _ in 0..400 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let e = table.entry(x & 0xffff).or_insert(0);
        *e = e.wrapping_add(x);
    }
    table.len()
}

/// Per-thread iterations, scaled by CORPUS_SCALE as the C programs are (common.h).
fn iterations(base: u64) -> u64 {
    let scale = std::env::var("CORPUS_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|f| *f > 0.0)
        .unwrap_or(1.0);
    ((base as f64 * scale) as u64).max(1)
}

fn main() {
    let threads: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let iters = iterations(200_000);
    let (tx, rx) = sync_channel(16);
    let collector = std::thread::spawn(move || collect(rx));
    let producers: Vec<_> = (0..threads)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || produce(tx, iters, t.wrapping_mul(0x9e3779b97f4a7c15)))
        })
        .collect();
    drop(tx);
    for p in producers {
        p.join().unwrap();
    }
    let entries = collector.join().unwrap();
    println!("ops={} entries={entries}", iters * threads);
}
