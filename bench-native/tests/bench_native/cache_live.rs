//! What the two prefix-cache live tests share (`prefix_live`: vLLM's automatic prefix
//! caching; `slot_live`: llama-server's slot cache): the settings, each request's check
//! in `requests.csv`, and the report. The settings come in a fixed order: three prefix
//! settings, the second of them again (the measurement's own noise), then three
//! conversation settings of closed-loop users.

use std::path::Path;

/// Conversations of 4 turns on average, at most 8 (`--conversations`; the users set the
/// think time).
pub const CHATS: &str = "4:8:1";

/// One setting: its name, the traffic's flags for both `run` and `simulate`, its seed
/// (every run its own, so nothing is cached from an earlier one).
pub type Setting = (String, Vec<&'static str>, u64);

/// The seven settings: independent requests at `rate` behind the system prompts of
/// `prompts` (`G:SHARE:TOKENS`, the second repeated), then `users` [fewer, more, behind a
/// shared 256-token system prompt] sending conversations with 0.5 s of thought.
pub fn settings(
    rate: &'static str,
    prompts: [&'static str; 3],
    users: [&'static str; 3],
) -> Vec<Setting> {
    let name = |p: &str| {
        let f: Vec<&str> = p.split(':').collect();
        format!("{}x{} at {:.1}", f[0], f[2], f[1].parse::<f64>().unwrap())
    };
    let mut v: Vec<Setting> = prompts
        .iter()
        .chain([&prompts[1]])
        .map(|&p| (name(p), vec!["--rate", rate, "--system-prompt", p]))
        .enumerate()
        .map(|(i, (n, t))| {
            (
                if i == 3 { format!("{n}, again") } else { n },
                t,
                i as u64 + 1,
            )
        })
        .collect();
    for (i, &u) in users.iter().enumerate() {
        let mut t = vec!["--users", u, "--think", "0.5", "--conversations", CHATS];
        let mut n = format!("{u} users' chats");
        if i == 2 {
            t.extend(["--system-prompt", "1:1:256"]);
            n.push_str(" after 1x256");
        }
        v.push((n, t, 5 + i as u64));
    }
    v
}

/// `requests.csv` of the run in `dir`: every prompt exactly as long as asked (a shared
/// system prompt sized with /tokenize; a conversation's earlier turns and answers resent
/// as they were), every row with the server's cached count. Returns (requests, prompt
/// tokens, cached tokens).
pub fn requests(dir: &Path) -> (usize, f64, f64) {
    let csv = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |k: &str| head.iter().position(|h| *h == k).unwrap();
    let (want, got, cached) = (
        col("target_prompt_tokens"),
        col("prompt_tokens"),
        col("cached_tokens"),
    );
    let (mut n, mut prompt, mut hit) = (0, 0.0, 0.0);
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f[want], f[got], "exact prompt length: {l}");
        prompt += f[got].parse::<f64>().unwrap();
        hit += f[cached]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("the server reports cached tokens: {l}"));
        n += 1;
    }
    (n, prompt, hit)
}

/// One setting, measured and simulated.
pub struct Row {
    pub name: String,
    pub measured_hit: f64,
    pub predicted_hit: f64,
    pub measured_ttft: f64,
    pub predicted_ttft: f64,
    /// Mean TTFT of the requests that reused a prefix (measured: as the server reported
    /// each request's cached tokens) [s].
    pub measured_hit_ttft: Option<f64>,
    pub predicted_hit_ttft: Option<f64>,
}

/// The table and the figures the tests bound.
pub struct Report {
    pub md: String,
    /// Median |relative error| of the mean TTFT over the three prefix settings, and over
    /// the three conversation settings.
    pub prefix_median: f64,
    pub chat_median: f64,
    /// How far the repeated setting's mean TTFT moved (relative).
    pub ttft_noise: f64,
}

/// The report of `rows`, in [`settings`]' order; `note` ends its last line.
pub fn report(rows: &[Row], note: &str) -> Report {
    let mut md = String::from(
        "| setting | hit rate measured | predicted | mean TTFT measured [ms] | predicted [ms] | error | hits' mean TTFT measured / predicted [ms] |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    let mut errs = Vec::new();
    for r in rows {
        let e = r.predicted_ttft / r.measured_ttft - 1.0;
        errs.push(e.abs());
        md.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.1} | {:.1} | {:+.1} % | {} / {} |\n",
            r.name,
            r.measured_hit,
            r.predicted_hit,
            r.measured_ttft * 1e3,
            r.predicted_ttft * 1e3,
            e * 100.0,
            ms(r.measured_hit_ttft),
            ms(r.predicted_hit_ttft),
        ));
    }
    let median3 = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let chat_median = median3(errs.split_off(4));
    errs.truncate(3);
    let prefix_median = median3(errs);
    let ttft_noise = (rows[3].measured_ttft / rows[1].measured_ttft - 1.0).abs();
    let hit_noise = (rows[3].measured_hit - rows[1].measured_hit).abs();
    md.push_str(&format!(
        "\nmedian |error| of mean TTFT over the three prefix settings {:.1} %, over the three conversation settings {:.1} % (target 15 %); the repeated setting's measured mean TTFT differs by {:.1} %, its hit rate by {:.3}; {note}\n",
        prefix_median * 100.0,
        chat_median * 100.0,
        ttft_noise * 100.0,
        hit_noise,
    ));
    Report {
        md,
        prefix_median,
        chat_median,
        ttft_noise,
    }
}

#[test]
fn the_settings_are_three_prefixes_one_repeated_then_three_conversations() {
    let s = settings("1", ["1:0.5:256", "2:0.8:256", "8:1:384"], ["3", "8", "6"]);
    let names: Vec<&str> = s.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "1x256 at 0.5",
            "2x256 at 0.8",
            "8x384 at 1.0",
            "2x256 at 0.8, again",
            "3 users' chats",
            "8 users' chats",
            "6 users' chats after 1x256"
        ]
    );
    assert_eq!(s[3].1, ["--rate", "1", "--system-prompt", "2:0.8:256"]);
    assert_eq!(
        s[6].1,
        [
            "--users",
            "6",
            "--think",
            "0.5",
            "--conversations",
            CHATS,
            "--system-prompt",
            "1:1:256"
        ]
    );
    assert_eq!(
        s.iter().map(|x| x.2).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7]
    );
}
