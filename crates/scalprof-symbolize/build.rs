//! Marks the tests that measure (`privileged`: see build/privileged.rs).

#[path = "../../build/privileged.rs"]
mod privileged;

fn main() {
    println!("cargo::rerun-if-changed=../../build/privileged.rs");
    privileged::emit();
}
