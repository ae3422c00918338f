//! Shared by the tests: the repository root, where `scripts/llama-server.sh` installed
//! the server, free ports, fixtures, and the lock that keeps live tests one at a time.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static ONE_LIVE_TEST_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held by every test that starts a real server, so that in the one test binary they run
/// one at a time and do not disturb each other's timings (nor share the two cores).
pub fn live() -> MutexGuard<'static, ()> {
    ONE_LIVE_TEST_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

static CPU_BOUND_ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held by the hermetic tests that keep the CPU busy (simulations, spawned binaries) and by
/// those that time the client against a fake server, so that on a small or loaded machine
/// the timed ones do not starve behind the busy ones in this one test binary.
pub fn cpu_bound() -> MutexGuard<'static, ()> {
    CPU_BOUND_ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A recorded input of the hermetic tests: `bench-native/tests/fixtures/<name>` (see the
/// README there for what recorded each one).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Where the tests write their files: cargo's folder for integration tests' data
/// (`target/tmp`), so that nothing is left in the system's temporary folder and
/// `cargo clean` removes it all. Each test names its own folder in it.
pub fn scratch_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The llama-server binary and the tiny model, as `scripts/llama-server.sh paths` reports.
pub fn installed() -> (PathBuf, PathBuf) {
    let script = repo_root().join("scripts/llama-server.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("paths")
        .output()
        .expect("run scripts/llama-server.sh paths");
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("{k} missing from `{} paths`", script.display()))
    };
    let (bin, model) = (get("LLAMA_SERVER_BIN="), get("LLAMA_SERVER_MODEL="));
    assert!(
        bin.is_file() && model.is_file(),
        "llama-server or its model is not installed ({} / {}): run `scripts/setup.sh server` first (builds llama-server from the llama-cpp-python sdist, ~6-8 min)",
        bin.display(),
        model.display()
    );
    (bin, model)
}

/// A loopback port that was free a moment ago (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local address")
        .port()
}

/// The `Content-Length` of an HTTP request head (0 when absent or unreadable), as the
/// tests' fake servers and the fault-injecting proxy read their requests.
pub fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// The bench-native binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bench-native"))
}

/// Runs `c`, fails the test with its stderr unless it succeeds; its stdout.
pub fn run_ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}
