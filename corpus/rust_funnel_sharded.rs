//! The fixed twin of rust_funnel: each thread checks and folds its own results into its
//! own table, and hands the collector one table at the end. The corpus builds it with
//! `rustc -O -g`. Argument: threads. Prints "ops=N".
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, SyncSender};

/// A producer's work and its own share of the collector's.
#[inline(never)]
fn produce(tables: SyncSender<HashMap<u64, u64>>, iters: u64, seed: u64) {
    let mut table: HashMap<u64, u64> = HashMap::new();
    let mut x = seed | 1;
    for _ in 0..iters {
        for _ in 0..150 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        let mut y = x;
        for _ in 0..400 {
            y = std::hint::black_box(y.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let e = table.entry(y & 0xffff).or_insert(0);
        *e = e.wrapping_add(y);
    }
    tables.send(table).expect("main outlives the producers");
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
    let (tx, rx) = sync_channel(threads as usize);
    let producers: Vec<_> = (0..threads)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || produce(tx, iters, t.wrapping_mul(0x9e3779b97f4a7c15)))
        })
        .collect();
    drop(tx);
    let mut merged: HashMap<u64, u64> = HashMap::new();
    for table in rx {
        for (k, v) in table {
            let e = merged.entry(k).or_insert(0);
            *e = e.wrapping_add(v);
        }
    }
    for p in producers {
        p.join().unwrap();
    }
    println!("ops={} entries={}", iters * threads, merged.len());
}
