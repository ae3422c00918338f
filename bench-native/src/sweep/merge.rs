//! `merge`'s check of the summary CSVs it reads: every row against the schema that
//! [`engine::sweep::summary_row_of`] writes (the column names and count of
//! [`summary_header`], a number where the writer writes a number), so a cut-short row, a
//! stray word or a `NaN` is reported with its file, line and column instead of passing
//! into the merged file. See `docs/model.md`, Metrics, for what each column means.

use engine::sweep::{merge_summary_csvs, summary_header, PREFIX_COLUMNS};

/// What the writer puts in a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A finite number ≥ 0, always present (the grid point's rate, the horizon).
    Number,
    /// An unsigned integer, always present (B, K, seeds, block size, token budget).
    Count,
    /// A finite number ≥ 0, or empty where the statistic has no samples.
    Optional,
    /// A non-empty label without a comma (policy, KV mode).
    Label,
}

/// The kind of the summary column `name`.
pub fn kind(name: &str) -> Kind {
    match name {
        "arrival_rate" | "horizon_s" => Kind::Number,
        "max_batch_size"
        | "kv_budget"
        | "n_seeds"
        | "block_size_tokens"
        | "token_budget_tokens" => Kind::Count,
        "policy" | "kv_mode" => Kind::Label,
        _ => Kind::Optional,
    }
}

/// Why `value` is not a `kind`, or `None` if it is.
pub fn refuse(kind: Kind, value: &str) -> Option<&'static str> {
    let number = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
    match kind {
        Kind::Number if number(value).is_none() => Some("is not a finite number >= 0"),
        Kind::Optional if !value.is_empty() && number(value).is_none() => {
            Some("is not empty nor a finite number >= 0")
        }
        Kind::Count if value.parse::<u64>().is_err() => Some("is not a whole number >= 0"),
        Kind::Label if value.trim().is_empty() => Some("is empty"),
        _ => None,
    }
}

/// The data rows of one summary CSV named `file` (header and blank lines dropped, a
/// trailing `\r` removed), or every problem found in it, one per line, each naming the
/// file, the line and (for a value) the column.
///
/// # Errors
/// An empty or header-only file, a header other than [`summary_header`] (or it followed by
/// the prefix cache's [`PREFIX_COLUMNS`]), rows with another column count, values the
/// writer could not have written.
pub fn check_summary<'a>(file: &str, text: &'a str) -> Result<Vec<&'a str>, Vec<String>> {
    let plain = summary_header();
    let with_prefix = format!("{plain},{PREFIX_COLUMNS}");
    let mut lines = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hl, h)) = lines.next() else {
        return Err(vec![format!("{file}: empty; expected a sweep summary CSV")]);
    };
    let header = if h == with_prefix { with_prefix } else { plain };
    let names: Vec<&str> = header.split(',').collect();
    let kinds: Vec<Kind> = names.iter().map(|n| kind(n)).collect();
    if h != header {
        return Err(vec![format!(
            "{file}:{hl}: not the sweep summary header (expected the {} columns `{}`…)",
            names.len(),
            names[..4].join(",")
        )]);
    }
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (n, l) in lines {
        let cells: Vec<&str> = l.split(',').collect();
        if cells.len() != names.len() {
            errors.push(format!(
                "{file}:{n}: {} columns, the header has {}",
                cells.len(),
                names.len()
            ));
            continue;
        }
        let before = errors.len();
        for (j, c) in cells.iter().enumerate() {
            if let Some(why) = refuse(kinds[j], c) {
                errors.push(format!(
                    "{file}:{n}: column {} ({}): '{}' {why}",
                    j + 1,
                    names[j],
                    c.escape_debug()
                ));
            }
        }
        if errors.len() == before {
            rows.push(l);
        }
    }
    if rows.is_empty() && errors.is_empty() {
        errors.push(format!("{file}: header only, no rows"));
    }
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(errors)
    }
}

/// Problems listed in full up to this many; the rest are counted.
const LISTED: usize = 50;

/// The merged summary of `inputs` (file name, text): every file checked with
/// [`check_summary`], then merged by the engine (sorted by grid point, duplicates refused).
///
/// # Errors
/// Every problem of every file (the first [`LISTED`] in full), or the engine's refusal.
pub fn merge_checked(inputs: &[(String, String)]) -> anyhow::Result<String> {
    let mut errors = Vec::new();
    let mut parts = Vec::new();
    for (file, text) in inputs {
        match check_summary(file, text) {
            Ok(rows) => {
                // The file's own header: checked, and the same in every file (the
                // engine's merge refuses a mix).
                let mut s = text
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .map_or("", |l| l.strip_suffix('\r').unwrap_or(l))
                    .to_string();
                for r in rows {
                    s.push('\n');
                    s.push_str(r);
                }
                parts.push(s);
            }
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        let n = errors.len();
        let mut msg = errors[..n.min(LISTED)].join("\n");
        if n > LISTED {
            msg += &format!("\n… and {} more", n - LISTED);
        }
        anyhow::bail!("{n} problem(s) in the inputs; nothing written:\n{msg}");
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    Ok(merge_summary_csvs(&refs)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A value the writer could write in a column of `kind`.
    fn valid(kind: Kind) -> BoxedStrategy<String> {
        let number = prop_oneof![
            (0.0..1e9f64).prop_map(|x| format!("{x:?}")),
            (0.0..1e-3f64).prop_map(|x| format!("{x}")),
            (0u64..1000).prop_map(|x| x.to_string()),
            Just("1e300".to_string()),
        ];
        match kind {
            Kind::Number => number.boxed(),
            Kind::Optional => prop_oneof![number, Just(String::new())].boxed(),
            Kind::Count => any::<u32>().prop_map(|x| x.to_string()).boxed(),
            Kind::Label => "[a-z][a-z_-]{0,8}".boxed(),
        }
    }

    /// A value that is wrong in any column but a label's.
    fn invalid() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("NaN".to_string()),
            Just("inf".to_string()),
            Just("-inf".to_string()),
            Just("hello".to_string()),
            (1e-9..1e9f64).prop_map(|x| format!("{:?}", -x)),
            Just(" 1".to_string()),
        ]
    }

    fn kinds() -> Vec<Kind> {
        summary_header().split(',').map(kind).collect()
    }

    /// A row of the writer's shape.
    fn row() -> impl Strategy<Value = Vec<String>> {
        kinds().into_iter().map(valid).collect::<Vec<_>>()
    }

    fn file(rows: &[Vec<String>]) -> String {
        let mut s = summary_header();
        for r in rows {
            s.push('\n');
            s.push_str(&r.join(","));
        }
        s.push('\n');
        s
    }

    proptest! {
        #[test]
        fn never_panics_on_any_text(text in "(?s).{0,400}") {
            let _ = check_summary("x.csv", &text);
            let _ = merge_checked(&[("x.csv".into(), text)]);
        }

        #[test]
        fn never_panics_after_the_header(tail in "[0-9a-zA-Z.,\\-+ \r\n]{0,400}") {
            let text = format!("{}\n{tail}", summary_header());
            let _ = merge_checked(&[("x.csv".into(), text)]);
        }

        /// Whatever is accepted has the header's column count and, in every number column,
        /// a finite number >= 0.
        #[test]
        fn what_is_accepted_is_sensible(
            mut rows in prop::collection::vec(row(), 1..6),
            spoil in prop::collection::vec((0usize..6, 0usize..36, invalid()), 0..3),
        ) {
            let ks = kinds();
            let mut spoiled = 0;
            for (i, j, v) in spoil {
                let i = i % rows.len();
                if ks[j] != Kind::Label {
                    rows[i][j] = v;
                    spoiled += 1;
                }
            }
            let text = file(&rows);
            match check_summary("x.csv", &text) {
                Ok(ok) => {
                    prop_assert_eq!(spoiled, 0);
                    prop_assert_eq!(ok.len(), rows.len());
                    for r in ok {
                        let cells: Vec<&str> = r.split(',').collect();
                        prop_assert_eq!(cells.len(), ks.len());
                        for (c, k) in cells.iter().zip(&ks) {
                            if *k != Kind::Label && !c.is_empty() {
                                let x: f64 = c.parse().unwrap();
                                prop_assert!(x.is_finite() && x >= 0.0, "{}", c);
                            }
                        }
                    }
                }
                Err(e) => {
                    prop_assert!(spoiled > 0, "{:?}", e);
                    prop_assert!(e.iter().all(|m| m.starts_with("x.csv:")), "{:?}", e);
                }
            }
        }

        /// Valid files merge into exactly their rows, sorted by grid point, whichever file
        /// holds which.
        #[test]
        fn valid_files_round_trip(rows in prop::collection::vec(row(), 1..8), cut in 0usize..8) {
            // distinct grid points: the row index as K
            let rows: Vec<Vec<String>> = rows
                .into_iter()
                .enumerate()
                .map(|(i, mut r)| {
                    r[2] = i.to_string();
                    r
                })
                .collect();
            let cut = cut.min(rows.len() - 1).max(1).min(rows.len());
            let mut inputs = vec![("a.csv".to_string(), file(&rows[..cut]))];
            if cut < rows.len() {
                inputs.push(("b.csv".to_string(), file(&rows[cut..])));
            }
            let merged = merge_checked(&inputs).unwrap();
            let mut lines = merged.lines();
            prop_assert_eq!(lines.next().unwrap(), summary_header());
            let mut got: Vec<&str> = lines.collect();
            let mut want: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
            got.sort_unstable();
            want.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn crlf_files_are_read_as_their_rows() {
        let row: Vec<String> = kinds()
            .into_iter()
            .map(|k| if k == Kind::Label { "x" } else { "1" }.to_string())
            .collect();
        let text = file(&[row]).replace('\n', "\r\n");
        assert_eq!(check_summary("x.csv", &text).unwrap().len(), 1);
    }
}
