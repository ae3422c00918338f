//! `bench-native`: kvqueue's native command line. Thin: parse, dispatch, map errors to an
//! exit code. The logic lives in the library modules so tests call it directly.

use bench_native::cli::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
