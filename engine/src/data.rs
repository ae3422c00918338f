//! Reference data shipped in `data/` and embedded into the binary, so the simulator, the
//! app and the CLI have sensible defaults with no file at hand.

use crate::error::ConfigError;

/// 5,000 ShareGPT (prompt, output) token-length pairs (Qwen2.5 tokenizer); see `data/README.md`.
pub const SHAREGPT_CSV: &str = include_str!("../../data/sharegpt_lengths.csv");

/// Measured decode step latency of vLLM 0.22 + Qwen2.5-1.5B on one A10G; see `data/README.md`.
pub const A10G_QWEN_1_5B_JSON: &str = include_str!("../../data/a10g_qwen2.5-1.5b_vllm.json");

/// Parses `prompt_len,gen_len` pairs from a CSV with a header naming those columns (extra
/// columns, such as `request_id`, are ignored).
///
/// # Errors
/// [`ConfigError::Parse`] for a missing column or a malformed row, [`ConfigError::Empty`]
/// for no rows.
pub fn parse_length_pairs(csv: &str) -> Result<Vec<(u32, u32)>, ConfigError> {
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().ok_or(ConfigError::Empty {
        what: "length table",
    })?;
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let find = |names: &[&str]| cols.iter().position(|c| names.contains(c));
    let p =
        find(&["prompt_len", "prompt_tokens", "input_len"]).ok_or_else(|| ConfigError::Parse {
            what: "length table",
            why: format!("no prompt_len column in header '{header}'"),
        })?;
    let o = find(&[
        "gen_len",
        "output_len",
        "completion_tokens",
        "output_tokens",
    ])
    .ok_or_else(|| ConfigError::Parse {
        what: "length table",
        why: format!("no gen_len column in header '{header}'"),
    })?;
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let get = |j: usize| -> Result<u32, ConfigError> {
            f.get(j)
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|&v| v >= 1)
                .ok_or_else(|| ConfigError::Parse {
                    what: "length table",
                    why: format!("row {}: expected positive integers, got '{line}'", i + 2),
                })
        };
        out.push((get(p)?, get(o)?));
    }
    if out.is_empty() {
        return Err(ConfigError::Empty {
            what: "length table",
        });
    }
    Ok(out)
}

/// The embedded ShareGPT pairs.
pub fn sharegpt_pairs() -> Vec<(u32, u32)> {
    parse_length_pairs(SHAREGPT_CSV).expect("embedded ShareGPT table parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharegpt_matches_its_readme() {
        let pairs = sharegpt_pairs();
        assert_eq!(pairs.len(), 5000);
        let mean_p = pairs.iter().map(|p| p.0 as f64).sum::<f64>() / 5000.0;
        let mean_o = pairs.iter().map(|p| p.1 as f64).sum::<f64>() / 5000.0;
        assert!((mean_p - 114.2).abs() < 0.1, "{mean_p}");
        assert!((mean_o - 302.7).abs() < 0.1, "{mean_o}");
    }

    #[test]
    fn bad_tables_are_errors() {
        assert!(parse_length_pairs("").is_err());
        assert!(parse_length_pairs("a,b\n1,2").is_err());
        assert!(parse_length_pairs("prompt_len,gen_len\n1,x").is_err());
        assert!(parse_length_pairs("prompt_len,gen_len\n").is_err());
        assert_eq!(
            parse_length_pairs("gen_len,prompt_len\n3,4").unwrap(),
            vec![(4, 3)]
        );
    }
}
