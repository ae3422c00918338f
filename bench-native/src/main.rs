//! `bench-native`: kvqueue's native command line. Thin: parse, dispatch, map errors to an
//! exit code. The logic lives in the library modules so tests call it directly.

use bench_native::cli::{Cli, Command};
use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

/// Lets every option take a negative number as its value (`--rate -1`), so the value
/// reaches validation and gets its real message ("arrival rate must be … > 0") instead
/// of clap's "unexpected argument '-1'".
fn negative_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negative_values)
}

fn main() -> ExitCode {
    let matches = negative_values(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Run(a) => bench_native::run::execute(a),
        Command::Microbench(a) => bench_native::microbench::execute(a),
        Command::Fit(a) => bench_native::fit::execute(a),
        Command::Simulate(a) => bench_native::simulate::execute(a),
        Command::Sweep(a) => bench_native::sweep::execute(a),
        Command::Merge(a) => bench_native::sweep::merge(a),
        Command::ServerSweep(a) => bench_native::server_sweep::execute(a),
        Command::Compare(a) => bench_native::compare::execute(a),
        Command::Validate(a) => bench_native::validate::execute(a),
        Command::Plan(a) => bench_native::plan::execute(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
