//! Measured files grouped into series: the files of one sweep — the same server, model,
//! prompts, burstiness, concurrency cap and flags, at different rates — are one series,
//! drawn as one line through its points and named after that setup ("measured: vLLM ·
//! Qwen2.5-1.5B-Instruct · 300 prompts"). A file that says nothing about its setup is a
//! series of its own (a summary CSV already holds a whole sweep), unless it came in a
//! folder with others.

use super::setup::Setup;
use super::{MeasuredPoint, MeasuredSet, Source};

/// One measured point and the file it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesPoint {
    pub file: String,
    pub point: MeasuredPoint,
}

/// The files of one measured run, as one series.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredSeries {
    /// The legend's name: "measured: " and the setup.
    pub name: String,
    /// The setup the files share (without the rate).
    pub setup: Setup,
    /// Every file's points, sorted by rate.
    pub points: Vec<SeriesPoint>,
    /// Each file with its own setup (its rate included), in the order they came.
    pub files: Vec<(String, Setup)>,
    /// The first file's format.
    pub source: Source,
    /// Each file's notes, prefixed with its name.
    pub notes: Vec<String>,
}

/// What puts files into one series.
#[derive(Clone, Debug, PartialEq)]
enum Key {
    /// Files recording their setup (or coming from one folder): equal setups, one series.
    Setup(Box<Setup>),
    /// A file that says nothing about its setup.
    File(String),
}

fn key(s: &MeasuredSet) -> Key {
    if s.setup.is_known() {
        Key::Setup(Box::new(s.setup.series_key()))
    } else {
        Key::File(s.name.clone())
    }
}

/// The name of a series with setup `s` whose first file is `file`.
fn name(s: &Setup, file: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(s.server.clone());
    parts.extend(s.model_short().map(str::to_string));
    if let Some(n) = s.prompts {
        parts.push(format!("{n} prompts"));
    }
    if let Some(c) = s.max_concurrency {
        parts.push(format!("≤ {c} in flight"));
    }
    if let Some(b) = s.burstiness.filter(|b| (b - 1.0).abs() > 1e-9) {
        parts.push(format!("burstiness {b}"));
    }
    parts.extend(s.label.clone());
    if parts.is_empty() {
        // Only a folder is known.
        parts.extend(s.folder.clone());
    }
    if parts.is_empty() {
        parts.push(file.to_string());
    }
    format!("measured: {}", parts.join(" · "))
}

/// Groups `sets` into series, in the order their first files came.
///
/// Series whose names would be equal (two folders of the same setup, two server
/// configurations that differ only in flags) are told apart by their folder, their
/// flags, or else a number.
pub fn group(sets: &[MeasuredSet]) -> Vec<MeasuredSeries> {
    let mut keys: Vec<Key> = Vec::new();
    let mut out: Vec<MeasuredSeries> = Vec::new();
    for set in sets {
        let k = key(set);
        let at = match keys.iter().position(|x| *x == k) {
            Some(i) => i,
            None => {
                keys.push(k);
                out.push(MeasuredSeries {
                    name: name(&set.setup, &set.name),
                    setup: set.setup.series_key(),
                    points: Vec::new(),
                    files: Vec::new(),
                    source: set.source,
                    notes: Vec::new(),
                });
                out.len() - 1
            }
        };
        let s = &mut out[at];
        s.files.push((set.name.clone(), set.setup.clone()));
        s.points.extend(set.points.iter().map(|p| SeriesPoint {
            file: set.name.clone(),
            point: p.clone(),
        }));
        s.notes
            .extend(set.notes.iter().map(|n| format!("{}: {n}", set.name)));
    }
    for s in &mut out {
        s.points
            .sort_by(|a, b| a.point.rate.total_cmp(&b.point.rate));
    }
    disambiguate(&mut out);
    out
}

/// Makes equal names differ: by folder, then by flags, then by a number.
fn disambiguate(series: &mut [MeasuredSeries]) {
    let dupes = |series: &[MeasuredSeries], i: usize| {
        series
            .iter()
            .enumerate()
            .any(|(j, s)| j != i && s.name == series[i].name)
    };
    for pass in 0..3 {
        let clashing: Vec<usize> = (0..series.len()).filter(|&i| dupes(series, i)).collect();
        for i in clashing {
            let s = &mut series[i];
            let extra = match pass {
                0 => s.setup.folder.clone(),
                1 => (!s.setup.flags.is_empty()).then(|| {
                    s.setup
                        .flags
                        .iter()
                        .map(|(k, v)| format!("{k} = {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }),
                _ => Some(format!("#{}", i + 1)),
            };
            if let Some(e) = extra {
                s.name = format!("{} · {e}", s.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Metric;

    fn file(name: &str, rate: f64, setup: Setup) -> MeasuredSet {
        let mut p = MeasuredPoint {
            rate,
            values: vec![None; Metric::N],
        };
        p.values[Metric::MeanTtft.index()] = Some((0.03 * rate, None));
        MeasuredSet {
            name: name.into(),
            source: Source::VllmJson,
            points: vec![p],
            notes: vec![],
            setup,
        }
    }

    fn vllm(prompts: u64, rate: f64) -> Setup {
        Setup {
            tool: Some("vllm bench serve".into()),
            server: Some("vLLM".into()),
            model: Some("Qwen/Qwen2.5-1.5B".into()),
            prompts: Some(prompts),
            rate: Some(rate),
            burstiness: Some(1.0),
            ..Setup::default()
        }
    }

    #[test]
    fn the_files_of_one_sweep_are_one_series_named_after_its_setup() {
        // Dropped out of order: the series is sorted by rate.
        let rates = [4.0, 0.5, 8.0, 1.0, 2.0, 6.0, 3.0, 1.5];
        let sets: Vec<MeasuredSet> = rates
            .iter()
            .map(|&r| file(&format!("vllm_rate_{r}.json"), r, vllm(300, r)))
            .collect();
        let g = group(&sets);
        assert_eq!(g.len(), 1, "{g:#?}");
        assert_eq!(g[0].name, "measured: vLLM · Qwen2.5-1.5B · 300 prompts");
        assert_eq!(g[0].files.len(), 8);
        let got: Vec<f64> = g[0].points.iter().map(|p| p.point.rate).collect();
        assert_eq!(got, vec![0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0]);
        // Each point keeps its file, for the hover.
        assert_eq!(g[0].points[0].file, "vllm_rate_0.5.json");
        assert_eq!(g[0].setup.rate, None);
    }

    #[test]
    fn two_sweeps_dropped_together_stay_apart() {
        let mut sets = vec![
            file("a1.json", 1.0, vllm(300, 1.0)),
            file("b1.json", 1.0, vllm(100, 1.0)),
        ];
        sets.push(file("a2.json", 2.0, vllm(300, 2.0)));
        let mut capped = vllm(300, 2.0);
        capped.max_concurrency = Some(8);
        sets.push(file("c2.json", 2.0, capped));
        let g = group(&sets);
        let names: Vec<&str> = g.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "measured: vLLM · Qwen2.5-1.5B · 300 prompts",
                "measured: vLLM · Qwen2.5-1.5B · 100 prompts",
                "measured: vLLM · Qwen2.5-1.5B · 300 prompts · ≤ 8 in flight",
            ]
        );
        assert_eq!(g[0].points.len(), 2);
    }

    #[test]
    fn files_without_a_setup_are_each_a_series_unless_a_folder_joins_them() {
        let sets = vec![
            file("summary.csv", 1.0, Setup::default()),
            file("other.csv", 2.0, Setup::default()),
        ];
        let g = group(&sets);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].name, "measured: summary.csv");
        let in_folder = |name: &str, rate: f64| {
            file(
                name,
                rate,
                Setup {
                    folder: Some("run-7".into()),
                    ..Setup::default()
                },
            )
        };
        let g = group(&[
            in_folder("rate-1/requests.csv", 1.0),
            in_folder("rate-2/requests.csv", 2.0),
        ]);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].name, "measured: run-7");
    }

    #[test]
    fn equal_names_are_told_apart_by_folder_then_flags() {
        let mut a = vllm(40, 1.0);
        a.folder = Some("validate".into());
        let mut b = a.clone();
        b.folder = Some("validate/repeat-2".into());
        let mut c = vllm(40, 1.0);
        c.flags = vec![("max_num_seqs".into(), "4".into())];
        let mut d = vllm(40, 1.0);
        d.flags = vec![("max_num_seqs".into(), "8".into())];
        let g = group(&[
            file("x", 1.0, a),
            file("y", 1.0, b),
            file("z", 1.0, c),
            file("w", 1.0, d),
        ]);
        let names: Vec<&str> = g.iter().map(|s| s.name.as_str()).collect();
        assert!(names[0].ends_with("· validate"), "{names:?}");
        assert!(names[1].ends_with("· validate/repeat-2"), "{names:?}");
        assert!(names[2].ends_with("max_num_seqs = 4"), "{names:?}");
        assert!(names[3].ends_with("max_num_seqs = 8"), "{names:?}");
    }
}
