//! Shared by the real-server tests: where `scripts/llama-server.sh` installed the server.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

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
