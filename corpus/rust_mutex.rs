//! A route table behind one `std::sync::Mutex` in a `static`: every lookup takes the lock,
//! so threads queue on it (Rust's std mutex is futex-based). The corpus builds it with
//! `rustc -O -g`. Argument: threads. Prints "ops=N".
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::OnceLock;

static ROUTES: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();

/// The critical section: one lookup and update under the table's lock.
#[inline(never)]
fn route_lookup(key: u64) -> u64 {
    let mut table = ROUTES.get().expect("initialized in main").lock().unwrap();
    let entry = table.entry(key % 1024).or_insert(0);
    *entry = entry.wrapping_mul(31).wrapping_add(key);
    *entry
}

/// Private work between lookups, outside the lock.
#[inline(never)]
fn private_work(mut x: u64) -> u64 {
    for _ in 0..50 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

fn worker(iters: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut acc = 0u64;
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc.wrapping_add(route_lookup(x));
        x = private_work(x);
    }
    acc
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
    let threads: u64 = match std::env::args().nth(1) {
        None => 1,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("rust_mutex: expected a positive integer, got '{a}'");
                std::process::exit(2);
            }
        },
    };
    ROUTES.get_or_init(|| Mutex::new(HashMap::new()));
    let iters = iterations(2_000_000);
    let handles: Vec<_> = (0..threads)
        .map(|t| std::thread::spawn(move || worker(iters, t + 1)))
        .collect();
    let sum = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold(0, u64::wrapping_add);
    eprintln!("checksum={sum}");
    println!("ops={}", threads * iters);
}
