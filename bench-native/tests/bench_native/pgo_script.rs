//! `scripts/pgo.sh` trains the profile-guided build with bench-native commands; the build
//! itself takes minutes and is not part of the test suite, so this checks that every
//! training command still parses with today's CLI (a renamed flag would otherwise break the
//! script unnoticed) and that the training covers every policy's path.

use bench_native::cli::Cli;
use clap::Parser;

/// The training commands: the script's lines that run the instrumented binary `"$gen"`,
/// without the redirection, with shell variables replaced by a placeholder path.
fn training_commands() -> Vec<Vec<String>> {
    let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pgo.sh"))
        .expect("scripts/pgo.sh");
    script
        .lines()
        .filter_map(|l| l.trim().strip_prefix("\"$gen\" "))
        .map(|rest| {
            let args = rest.split(">/dev/null").next().unwrap_or(rest);
            std::iter::once("bench-native".to_string())
                .chain(args.split_whitespace().map(|w| {
                    if w.contains('$') {
                        "/tmp/pgo-training".to_string()
                    } else {
                        w.to_string()
                    }
                }))
                .collect()
        })
        .collect()
}

#[test]
fn every_training_command_parses() {
    let cmds = training_commands();
    assert!(cmds.len() >= 4, "training commands found: {cmds:?}");
    for c in &cmds {
        if let Err(e) = Cli::try_parse_from(c) {
            panic!(
                "scripts/pgo.sh runs `{}`, which no longer parses:\n{e}",
                c.join(" ")
            );
        }
    }
    let all = cmds.concat().join(" ");
    // The reference grid (the speed target), and the other event-loop paths: paged and
    // chunked (vllm), llama.cpp slots, serial.
    for must in [
        "sweep",
        "--preset vllm",
        "--preset llama-cpp",
        "--policy serial",
    ] {
        assert!(all.contains(must), "no training run with {must}: {all}");
    }
}
