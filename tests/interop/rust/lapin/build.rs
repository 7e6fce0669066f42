//! Hands the program the lapin version it is compiled against (LAPIN_VERSION), read from
//! Cargo.lock: the build runs with --locked, so the lock file names exactly what is linked.
use std::{env, fs, path::Path};

fn main() {
    let lock = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).expect("Cargo.lock is committed beside Cargo.toml");
    let version = text
        .split("[[package]]")
        .find(|package| package.contains("\nname = \"lapin\"\n"))
        .and_then(|package| package.lines().find_map(|line| line.strip_prefix("version = \"")))
        .and_then(|rest| rest.strip_suffix('"'))
        .expect("Cargo.lock names a version of lapin");
    println!("cargo:rustc-env=LAPIN_VERSION={version}");
}
