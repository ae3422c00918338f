//! `bench-native server-sweep` against real llama-servers: two configurations (1 and 2
//! slots) launched from a template on free loopback ports, measured, and stopped.

use bench_native::cli::{Cli, Command as Sub};
use clap::Parser;

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn server_sweep_launches_measures_and_stops_each_configuration() {
    let _live = crate::common::live();
    let (bin, model) = crate::common::installed();
    let out =
        crate::common::scratch_root().join(format!("kvq-server-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let template = format!(
        "{} -m {} --host 127.0.0.1 --port {{port}} -np {{slots}} -b {{budget}} -ub {{budget}} -c 2048 -t 1 --metrics --no-webui -cram 0",
        bin.display(),
        model.display()
    );
    let out_s = out.to_string_lossy().to_string();
    let cli = Cli::parse_from([
        "bench-native",
        "server-sweep",
        "--server-cmd",
        &template,
        "--slots",
        "1,2",
        "--budget",
        "256",
        "--rates",
        "3",
        "--num-requests",
        "5",
        "--lengths",
        "fixed",
        "--prompt-tokens",
        "16",
        "--output-tokens",
        "6",
        "--duration",
        "10",
        "--quiet",
        "--out",
        &out_s,
    ]);
    let Sub::ServerSweep(args) = cli.command else {
        panic!("parsed another subcommand")
    };
    let measured = bench_native::server_sweep::server_sweep(&args).expect("sweep runs");
    assert_eq!(measured.len(), 2);
    for m in &measured {
        assert_eq!(
            m.summary.completed, 5,
            "slots {}: every request completed",
            m.slots
        );
        assert_eq!(m.summary.errors, 0);
        assert!(m.dir.join("requests.csv").is_file());
        assert_eq!(m.kv_tokens, 2048, "KV capacity read from the server");
    }
    let csv = std::fs::read_to_string(out.join("server_sweep_summary.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], engine::sweep::summary_header());
    assert_eq!(lines.len(), 3);
    assert!(
        lines[1].starts_with("3.0,1,2048,1,") && lines[2].starts_with("3.0,2,2048,1,"),
        "{csv}"
    );
    // Every launched server is gone (its port refuses connections).
    for m in &measured {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", m.port)).is_err(),
            "server on {} still up",
            m.port
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
