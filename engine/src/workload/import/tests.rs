use super::*;
#[cfg(not(target_arch = "wasm32"))]
use proptest::prelude::*;

const MOONCAKE: &str = r#"{"timestamp": 0, "input_length": 1000, "output_length": 20, "hash_ids": [1, 2]}
{"timestamp": 250, "input_length": 512, "output_length": 7, "hash_ids": [1]}

{"timestamp": 250, "input_length": 1025, "output_length": 3, "hash_ids": [1, 2, 9]}
"#;

#[test]
fn mooncake_reads_times_lengths_and_block_ids() {
    assert_eq!(TraceFormat::detect(MOONCAKE), Some(TraceFormat::Mooncake));
    let t = import(MOONCAKE, TraceFormat::Mooncake).unwrap();
    let got: Vec<(f64, u32, u32)> = t
        .requests
        .iter()
        .map(|r| (r.arrival, r.prompt, r.output))
        .collect();
    assert_eq!(got, [(0.0, 1000, 20), (0.25, 512, 7), (0.25, 1025, 3)]);
    let b = t.blocks.unwrap();
    assert_eq!((b.block_tokens, b.len()), (512, 3));
    assert_eq!(
        (b.of(0), b.of(1), b.of(2)),
        (&[1, 2][..], &[1][..], &[1, 2, 9][..])
    );
    assert_eq!(
        t.skipped,
        Skipped {
            blank: 1,
            failed: 0
        }
    );
    assert_eq!(t.lines, 4);
}

#[test]
fn burstgpt_skips_failures_and_counts_them() {
    let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                5,ChatGPT,472,18,490,Conversation log\n\
                7.5,GPT-4,1200,0,1200,Conversation log\n\
                9,ChatGPT,30,60,90,API log\n";
    assert_eq!(TraceFormat::detect(text), Some(TraceFormat::BurstGpt));
    let t = import(text, TraceFormat::BurstGpt).unwrap();
    let got: Vec<(f64, u32, u32)> = t
        .requests
        .iter()
        .map(|r| (r.arrival, r.prompt, r.output))
        .collect();
    assert_eq!(got, [(0.0, 472, 18), (4.0, 30, 60)]);
    assert_eq!(
        t.skipped,
        Skipped {
            blank: 0,
            failed: 1
        }
    );
    assert!(t.blocks.is_none());
}

#[test]
fn azure_reads_datetimes() {
    let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                2023-11-16 18:15:46.6805900,374,44\n\
                2023-11-16 18:15:50.9951690,396,109\n\
                2023-11-17 00:00:00,10,1\n";
    assert_eq!(TraceFormat::detect(text), Some(TraceFormat::Azure));
    let t = import(text, TraceFormat::Azure).unwrap();
    let a: Vec<f64> = t.requests.iter().map(|r| r.arrival).collect();
    assert!((a[1] - 4.314579).abs() < 1e-9, "{a:?}");
    // To midnight: 5 h 44 min 13.31941 s.
    assert!(
        (a[2] - (5.0 * 3600.0 + 44.0 * 60.0 + 13.31941)).abs() < 1e-9,
        "{a:?}"
    );
    assert_eq!((t.requests[0].prompt, t.requests[0].output), (374, 44));
}

#[test]
fn datetimes_and_days() {
    assert_eq!(csv::datetime("1970-01-01 00:00:00"), Some((0, 0)));
    assert_eq!(
        csv::datetime("2024-02-29T12:00:01.5Z"),
        Some((1_709_208_001, 500_000_000))
    );
    for bad in [
        "2023-02-29 00:00:00",
        "2023-13-01 00:00:00",
        "2023-1-01 00:00:00",
        "x",
        "2023-01-01 24:00:00",
        "2023-01-01 00:00:00.",
        "2023-01-01",
    ] {
        assert_eq!(csv::datetime(bad), None, "{bad}");
    }
    for d in [-1000, 0, 19_723, 60_000] {
        let (y, m, day) = civil_from_days(d);
        assert_eq!(
            csv::datetime(&format!("{y:04}-{m:02}-{day:02} 00:00:00")),
            Some((d * 86_400, 0))
        );
    }
}

#[test]
fn errors_name_the_line_and_the_problem() {
    let cases: [(&str, TraceFormat, ImportError); 9] = [
        (
            "{\"timestamp\": 0, \"input_length\": 5, \"hash_ids\": [1]}",
            TraceFormat::Mooncake,
            ImportError::MissingColumn { line: 1, column: "output_length" },
        ),
        (
            "{\"timestamp\": 5, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1]}\n{\"timestamp\": 4, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1]}",
            TraceFormat::Mooncake,
            ImportError::Unsorted { line: 2, value: 0.004, previous: 0.005 },
        ),
        (
            "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1]}",
            TraceFormat::Mooncake,
            ImportError::HashIds { line: 1, input_length: 600, expected: 2, got: 1 },
        ),
        (
            "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}",
            TraceFormat::Mooncake,
            ImportError::NonPositive { line: 1, column: "input_length", value: 0 },
        ),
        (
            "{\"timestamp\": -3, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}",
            TraceFormat::Mooncake,
            ImportError::NegativeTimestamp { line: 1, value: -0.003 },
        ),
        (
            "Timestamp,Model,Response tokens\n1,x,3",
            TraceFormat::BurstGpt,
            ImportError::MissingColumn { line: 1, column: "Request tokens" },
        ),
        (
            "Timestamp,Request tokens,Response tokens\n1,3,4\n2,-3,4",
            TraceFormat::BurstGpt,
            ImportError::NonPositive { line: 3, column: "Request tokens", value: -3 },
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:15:45,1,1",
            TraceFormat::Azure,
            ImportError::Unsorted { line: 3, value: -1.0, previous: 0.0 },
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1\n",
            TraceFormat::Azure,
            ImportError::MissingColumn { line: 2, column: "GeneratedTokens" },
        ),
    ];
    for (text, format, want) in cases {
        assert_eq!(import(text, format).unwrap_err(), want, "{text}");
    }
    let e = import(
        "Timestamp,Request tokens,Response tokens\n1,2,0\n",
        TraceFormat::BurstGpt,
    )
    .unwrap_err();
    assert_eq!(
        e,
        ImportError::Empty {
            format: TraceFormat::BurstGpt
        }
    );
    let e = import("{\"timestamp\": \"soon\"}", TraceFormat::Mooncake).unwrap_err();
    assert!(
        matches!(
            e,
            ImportError::BadField {
                line: 1,
                column: "timestamp",
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().starts_with("line 1: column `timestamp`"),
        "{e}"
    );
}

#[test]
fn too_large_is_refused_before_parsing() {
    let text = " ".repeat(MAX_TRACE_BYTES + 1);
    let e = import(&text, TraceFormat::Azure).unwrap_err();
    assert!(e.to_string().contains("256 MiB"), "{e}");
}

/// What an accepted trace must be: requests, arrivals from 0, finite, in order, lengths
/// ≥ 1, Mooncake block ids one per 512 prompt tokens; every line accounted for.
#[cfg(not(target_arch = "wasm32"))]
fn sensible(t: &ImportedTrace, format: TraceFormat) -> Result<(), TestCaseError> {
    prop_assert!(!t.requests.is_empty());
    prop_assert!(t.requests[0].arrival >= 0.0);
    let mut prev = 0.0;
    for r in &t.requests {
        prop_assert!(r.arrival.is_finite() && r.arrival >= prev);
        prop_assert!(r.prompt >= 1 && r.output >= 1);
        prev = r.arrival;
    }
    let header = (format != TraceFormat::Mooncake) as u64;
    prop_assert_eq!(
        t.requests.len() as u64 + t.skipped.total() + header,
        t.lines
    );
    if format == TraceFormat::Mooncake {
        let b = t.blocks.as_ref().expect("Mooncake has block ids");
        prop_assert_eq!(b.len(), t.requests.len());
        for (i, r) in t.requests.iter().enumerate() {
            prop_assert_eq!(b.of(i).len() as u32, r.prompt.div_ceil(512));
        }
    }
    Ok(())
}

#[cfg(not(target_arch = "wasm32"))]
fn format() -> impl Strategy<Value = TraceFormat> {
    prop_oneof![
        Just(TraceFormat::Mooncake),
        Just(TraceFormat::BurstGpt),
        Just(TraceFormat::Azure)
    ]
}

/// A valid trace: sorted arrivals, lengths ≥ 1, block ids per 512 tokens.
#[cfg(not(target_arch = "wasm32"))]
fn valid() -> impl Strategy<Value = ImportedTrace> {
    prop::collection::vec((0u32..5000, 1u32..3000, 1u32..500, 0u32..4), 1..12).prop_map(|rows| {
        let mut at = 0u64;
        let mut blocks = BlockIds {
            block_tokens: 512,
            offsets: vec![0],
            ids: Vec::new(),
            shared: Vec::new(),
        };
        let requests = rows
            .iter()
            .enumerate()
            .map(|(i, &(gap_ms, prompt, output, share))| {
                if i > 0 {
                    at += gap_ms as u64;
                }
                for j in 0..prompt.div_ceil(512) {
                    // The first `share` blocks are common to every request.
                    blocks.ids.push(if j < share {
                        j
                    } else {
                        1000 * (i as u32 + 1) + j
                    });
                }
                blocks.offsets.push(blocks.ids.len() as u32);
                TraceRequest {
                    arrival: at as f64 / 1000.0,
                    prompt,
                    output,
                    class: 0,
                }
            })
            .collect();
        blocks.mark_shared();
        ImportedTrace {
            requests,
            blocks: Some(blocks),
            skipped: Skipped::default(),
            lines: 0,
        }
    })
}

/// Corruptions of one data line of a valid trace, and the error each must give.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy, Debug)]
enum Break {
    DropColumn,
    ZeroPrompt,
    NegativeOutput,
    EarlierThanBefore,
    ExtraHashId,
    Garbage,
}

/// A format and a fault its lines can have (a stray hash id only in Mooncake), drawn so
/// that no case is thrown away for the pair: discarded cases count against proptest's
/// limit of rejects, which a run of thousands of cases could reach.
#[cfg(not(target_arch = "wasm32"))]
fn format_and_break() -> impl Strategy<Value = (TraceFormat, Break)> {
    format().prop_flat_map(|f| {
        let mut breaks = vec![
            Break::DropColumn,
            Break::ZeroPrompt,
            Break::NegativeOutput,
            Break::EarlierThanBefore,
            Break::Garbage,
        ];
        if f == TraceFormat::Mooncake {
            breaks.push(Break::ExtraHashId);
        }
        (Just(f), prop::sample::select(breaks))
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn corrupt(line: &str, format: TraceFormat, how: Break) -> String {
    match (format, how) {
        (TraceFormat::Mooncake, Break::DropColumn) => {
            line.replace("\"output_length\"", "\"output_len\"")
        }
        (TraceFormat::Mooncake, Break::ZeroPrompt) => {
            let (a, b) = line.split_once("\"input_length\": ").unwrap();
            let rest = &b[b.find(',').unwrap()..];
            format!("{a}\"input_length\": 0{rest}")
        }
        (TraceFormat::Mooncake, Break::NegativeOutput) => {
            let (a, b) = line.split_once("\"output_length\": ").unwrap();
            format!("{a}\"output_length\": -{b}")
        }
        (TraceFormat::Mooncake, Break::ExtraHashId) => {
            line.replace("\"hash_ids\": [", "\"hash_ids\": [77, ")
        }
        (_, Break::Garbage) => "#~ not a trace line ~#".to_string(),
        (_, Break::EarlierThanBefore) => unreachable!("done by the caller"),
        (_, how) => {
            // CSV: timestamp, prompt, output are the first column, the prompt and output
            // columns.
            let mut f: Vec<String> = csv::split(line);
            let (p, o) = if format == TraceFormat::BurstGpt {
                (2, 3)
            } else {
                (1, 2)
            };
            match how {
                Break::DropColumn => {
                    f.truncate(o);
                }
                Break::ZeroPrompt => f[p] = "0".into(),
                Break::NegativeOutput => f[o] = "-5".into(),
                _ => unreachable!(),
            }
            f.join(",")
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
proptest! {
    #[test]
    fn never_panics_on_any_text(text in "(?s).{0,300}", f in format()) {
        if let Ok(t) = import(&text, f) {
            sensible(&t, f)?;
        }
    }

    #[test]
    fn never_panics_on_format_like_text(
        lines in prop::collection::vec("[0-9a-zA-Z :,.\\-\"\\[\\]{}_]{0,60}", 0..6),
        f in format(),
    ) {
        let head = match f {
            TraceFormat::Mooncake => String::new(),
            TraceFormat::BurstGpt => "Timestamp,Request tokens,Response tokens\n".into(),
            TraceFormat::Azure => "TIMESTAMP,ContextTokens,GeneratedTokens\n".into(),
        };
        let text = head + &lines.join("\n");
        if let Ok(t) = import(&text, f) {
            sensible(&t, f)?;
        }
    }

    /// A valid trace written in any format reads back the same (and is detected).
    #[test]
    fn valid_traces_round_trip(t in valid(), f in format()) {
        let text = render(&t, f);
        prop_assert_eq!(TraceFormat::detect(&text), Some(f));
        let back = import(&text, f).unwrap();
        sensible(&back, f)?;
        prop_assert_eq!(back.requests.len(), t.requests.len());
        for (a, b) in back.requests.iter().zip(&t.requests) {
            prop_assert_eq!((a.prompt, a.output), (b.prompt, b.output));
            prop_assert!((a.arrival - b.arrival).abs() < 1e-6, "{} vs {}", a.arrival, b.arrival);
        }
        if f == TraceFormat::Mooncake {
            prop_assert_eq!(back.blocks, t.blocks);
        }
    }

    /// One broken line in a valid trace: an error naming exactly that line and the fault.
    #[test]
    fn a_broken_line_is_named(
        t in valid(),
        (f, how) in format_and_break(),
        pick in any::<prop::sample::Index>(),
    ) {
        let mut t = t;
        let i = pick.index(t.requests.len());
        if let Break::EarlierThanBefore = how {
            prop_assume!(i > 0);
            // Half a second before the line above.
            let before = t.requests[i - 1].arrival;
            prop_assume!(before >= 1.0);
            t.requests[i].arrival = before - 0.5;
        }
        let text = render(&t, f);
        let header = (f != TraceFormat::Mooncake) as usize;
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        if !matches!(how, Break::EarlierThanBefore) {
            lines[i + header] = corrupt(&lines[i + header], f, how);
        }
        let e = import(&lines.join("\n"), f).unwrap_err();
        let line = (i + header + 1) as u64;
        let ok = match (how, &e) {
            (Break::DropColumn, ImportError::MissingColumn { line: l, .. }) => *l == line,
            (Break::ZeroPrompt, ImportError::NonPositive { line: l, value: 0, .. }) => *l == line,
            (Break::NegativeOutput, ImportError::NonPositive { line: l, .. }) => *l == line,
            (Break::EarlierThanBefore, ImportError::Unsorted { line: l, .. }) => *l == line,
            (Break::ExtraHashId, ImportError::HashIds { line: l, .. }) => *l == line,
            (Break::Garbage, ImportError::BadField { line: l, .. } | ImportError::MissingColumn { line: l, .. }) => *l == line,
            _ => false,
        };
        prop_assert!(ok, "{:?} of line {} in {}: {:?}", how, line, f, e);
        prop_assert!(e.to_string().starts_with(&format!("line {line}: ")), "{}", e);
    }

    /// BurstGPT: every row with 0 response tokens is skipped and counted, the others kept.
    #[test]
    fn burstgpt_failures_are_counted(t in valid(), failed in prop::collection::vec(any::<bool>(), 12)) {
        let text = render(&t, TraceFormat::BurstGpt);
        let mut out = Vec::new();
        let mut n_failed = 0;
        for (k, l) in text.lines().enumerate() {
            if k > 0 && failed[k - 1] {
                let mut f = csv::split(l);
                f[3] = "0".into();
                out.push(f.join(","));
                n_failed += 1;
            } else {
                out.push(l.to_string());
            }
        }
        match import(&out.join("\n"), TraceFormat::BurstGpt) {
            Ok(back) => {
                prop_assert_eq!(back.skipped.failed, n_failed);
                prop_assert_eq!(back.requests.len() as u64, t.requests.len() as u64 - n_failed);
                sensible(&back, TraceFormat::BurstGpt)?;
            }
            Err(e) => {
                prop_assert_eq!(n_failed, t.requests.len() as u64);
                prop_assert_eq!(e, ImportError::Empty { format: TraceFormat::BurstGpt });
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
proptest! {
    /// The fast reader and serde agree on every line.
    #[test]
    fn fast_mooncake_lines_read_as_serde_does(
        line in prop_oneof![
            "\\{ ?\"timestamp\": ?-?[0-9]{1,6}(\\.[0-9]{1,3})?, ?\"input_length\": ?-?[0-9]{1,5}, ?\"output_length\": ?[0-9]{1,4}, ?\"hash_ids\": ?\\[([0-9]{1,4}(, ?)?){0,4}\\] ?\\}",
            "[{}\" :,\\[\\]0-9a-z_.\\-]{0,80}",
        ]
    ) {
        let fast = mooncake::parse_with(&line, true);
        let serde = mooncake::parse_with(&line, false);
        prop_assert_eq!(fast.is_ok(), serde.is_ok(), "{:?} vs {:?}", fast, serde);
        if let (Ok(a), Ok(b)) = (fast, serde) {
            prop_assert_eq!(a, b);
        }
    }
}

#[test]
fn a_requests_ids_past_the_first_one_no_other_request_has_are_its_own() {
    let mut b = BlockIds {
        block_tokens: 512,
        offsets: vec![0, 3, 5, 6],
        // Requests 0 and 1 share ids 7 and 8; request 0's 9 and request 2's 4 are their own.
        ids: vec![7, 8, 9, 7, 8, 4],
        shared: Vec::new(),
    };
    assert_eq!(
        (b.shared_len(0), b.shared_len(2)),
        (3, 1),
        "unmarked: all shared"
    );
    b.mark_shared();
    assert_eq!(b.shared, vec![2, 2, 0]);
    assert_eq!(b.shared_len(1), 2);
}
