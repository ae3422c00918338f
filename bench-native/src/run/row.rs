//! One row of `requests.csv` per request: what its stream produced, the client's view of
//! the schedule, and the failures grouped by kind for the summary.

use crate::client::StreamResult;
use engine::kv_cache::PrefixCounts;
use engine::metrics::{percentile_type7, PrefixAccumulator, PrefixSummary, Summary};
use engine::record::{Outcome, RequestRecord};
use engine::workload::Request;
use serde::Serialize;

/// One row of `requests.csv`. Times [s] on the run clock (0 = run start).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RequestRow {
    pub id: u64,
    pub class: u16,
    /// When the schedule said to send it [s].
    pub intended_send_s: f64,
    /// When it was handed to the HTTP client [s] (after any client queue); the connection
    /// writes it right after.
    pub actual_send_s: Option<f64>,
    /// Time waiting for a concurrency slot [s].
    pub client_queue_s: Option<f64>,
    pub first_token_s: Option<f64>,
    pub last_token_s: Option<f64>,
    /// From the intended send time [s].
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    /// Asked-for prompt length [tokens].
    pub target_prompt_tokens: u32,
    /// Asked-for output length [tokens].
    pub target_output_tokens: u32,
    /// From `usage` [tokens].
    pub prompt_tokens: Option<u32>,
    /// From `usage` [tokens].
    pub completion_tokens: Option<u32>,
    /// Prompt tokens the server reports from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`, llama.cpp's `timings.cache_n`) [tokens].
    pub cached_tokens: Option<u32>,
    /// Chunks that carried text [count].
    pub chunks: u32,
    pub max_gap_s: f64,
    pub stalls: u32,
    pub finish_reason: String,
    /// completed / error / unfinished.
    pub outcome: String,
    /// llama.cpp's own prompt (prefill) time [ms].
    pub server_prompt_ms: Option<f64>,
    /// llama.cpp's own generation time [ms].
    pub server_predicted_ms: Option<f64>,
    pub error: String,
}

impl RequestRow {
    /// The engine record of this row (what the metrics are computed from).
    pub fn record(&self) -> RequestRecord {
        RequestRecord {
            id: self.id,
            class: self.class,
            arrival_s: self.intended_send_s,
            first_token_s: self.first_token_s,
            finish_s: if self.outcome == "completed" {
                self.last_token_s
            } else {
                None
            },
            prompt_tokens: self.prompt_tokens.unwrap_or(self.target_prompt_tokens),
            output_tokens: self.completion_tokens.unwrap_or(self.chunks),
            max_gap_s: self.max_gap_s,
            stalls: self.stalls,
            preemptions: 0,
            outcome: match self.outcome.as_str() {
                "completed" => Outcome::Completed,
                "unfinished" => Outcome::Unfinished,
                _ => Outcome::Error,
            },
            admitted_s: None,
            cached_tokens: self.cached_tokens.unwrap_or(0),
        }
    }

    pub(super) fn from_result(
        req: &Request,
        queue_s: Option<f64>,
        res: Option<StreamResult>,
        stall_s: f64,
    ) -> RequestRow {
        let mut row = RequestRow {
            id: req.id,
            class: req.class,
            intended_send_s: req.arrival,
            client_queue_s: queue_s,
            target_prompt_tokens: req.prompt,
            target_output_tokens: req.output,
            ..RequestRow::default()
        };
        let Some(res) = res else {
            row.outcome = Outcome::Unfinished.as_str().into();
            row.error = "interrupted".into();
            return row;
        };
        row.actual_send_s = Some(res.sent_s);
        row.first_token_s = res.token_chunk_s.first().copied();
        row.last_token_s = res.token_chunk_s.last().copied();
        row.chunks = res.token_chunk_s.len() as u32;
        for w in res.token_chunk_s.windows(2) {
            let g = w[1] - w[0];
            row.max_gap_s = row.max_gap_s.max(g);
            if g > stall_s {
                row.stalls += 1;
            }
        }
        row.prompt_tokens = res.usage.map(|u| u.prompt_tokens);
        row.completion_tokens = res.usage.map(|u| u.completion_tokens);
        row.cached_tokens = res.cached_tokens;
        row.finish_reason = res.finish_reason.unwrap_or_default();
        row.server_prompt_ms = res.timings.map(|t| t.prompt_ms).filter(|x| x.is_finite());
        row.server_predicted_ms = res
            .timings
            .map(|t| t.predicted_ms)
            .filter(|x| x.is_finite());
        match res.error {
            Some(e) => {
                row.outcome = Outcome::Error.as_str().into();
                row.error = e;
            }
            None => {
                row.outcome = Outcome::Completed.as_str().into();
                if res.usage.is_none() {
                    row.error = "no usage in stream: completion_tokens counted from chunks".into();
                }
            }
        }
        let rec = row.record();
        row.ttft_s = rec.ttft();
        row.tpot_s = rec.tpot();
        row.e2e_s = rec.e2e();
        row
    }
}

/// Client-side quality of the schedule [s].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClientStats {
    /// actual − intended send time: p50, p99, max [s].
    pub send_lateness_p50_s: Option<f64>,
    pub send_lateness_p99_s: Option<f64>,
    pub send_lateness_max_s: Option<f64>,
    /// Requests that waited for a --max-concurrency slot [count].
    pub client_queued: u64,
}

/// Header of `requests.csv` (the serde field order of [`RequestRow`]).
pub const REQUEST_COLUMNS: [&str; 23] = [
    "id",
    "class",
    "intended_send_s",
    "actual_send_s",
    "client_queue_s",
    "first_token_s",
    "last_token_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "target_prompt_tokens",
    "target_output_tokens",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "chunks",
    "max_gap_s",
    "stalls",
    "finish_reason",
    "outcome",
    "server_prompt_ms",
    "server_predicted_ms",
    "error",
];

/// The kind of a request's error: its message up to any parenthesis, with numbers
/// replaced by `N` (an HTTP status kept), so that errors differing only in counts or
/// times group together.
pub fn error_kind(error: &str) -> String {
    let head = error.split(" (").next().unwrap_or(error).trim();
    let mut out = String::with_capacity(head.len());
    let mut chars = head.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut digits = c.to_string();
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                digits.push(d);
                chars.next();
            }
            let status = digits.len() == 3 && out.ends_with("HTTP ");
            out.push_str(if status { &digits } else { "N" });
        } else {
            out.push(c);
        }
    }
    out
}

/// The kinds of error of the `error` rows ([`error_kind`]), most frequent first.
pub fn failure_reasons(rows: &[RequestRow]) -> Vec<(String, u64)> {
    let mut by_kind = std::collections::BTreeMap::<String, u64>::new();
    for r in rows.iter().filter(|r| r.outcome == Outcome::Error.as_str()) {
        *by_kind.entry(error_kind(&r.error)).or_default() += 1;
    }
    let mut v: Vec<(String, u64)> = by_kind.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// "3× reason; 1× other" (at most the three most frequent kinds) with the number of
/// failed requests, or `None` when no request failed.
pub fn failures_text(rows: &[RequestRow]) -> Option<(u64, String)> {
    let reasons = failure_reasons(rows);
    let failed: u64 = reasons.iter().map(|r| r.1).sum();
    if failed == 0 {
        return None;
    }
    let mut parts: Vec<String> = reasons
        .iter()
        .take(3)
        .map(|(why, n)| format!("{n}× {why}"))
        .collect();
    if reasons.len() > 3 {
        let rest: u64 = reasons[3..].iter().map(|r| r.1).sum();
        parts.push(format!("{rest}× of {} other kinds", reasons.len() - 3));
    }
    Some((failed, parts.join("; ")))
}

pub(super) fn client_stats(rows: &[RequestRow]) -> ClientStats {
    let mut late: Vec<f64> = rows
        .iter()
        .filter_map(|r| Some(r.actual_send_s? - r.intended_send_s))
        .collect();
    late.sort_by(f64::total_cmp);
    ClientStats {
        send_lateness_p50_s: percentile_type7(&late, 0.5),
        send_lateness_p99_s: percentile_type7(&late, 0.99),
        send_lateness_max_s: late.last().copied(),
        client_queued: rows
            .iter()
            .filter(|r| r.client_queue_s.is_some_and(|q| q > 1e-3))
            .count() as u64,
    }
}

/// The prefix cache as the server reported it request by request (`cached_tokens`), in
/// the simulator's terms (engine::metrics::prefix, token hit rate and TTFT of hits
/// against misses; a request that reused any token is a hit, as on llama-server, where
/// BOS is always reused). `None` when the server reported no count. Block counts stay 0:
/// the client sees tokens, not the server's blocks.
pub fn measured_prefix(rows: &[RequestRow], warmup_s: f64) -> Option<PrefixSummary> {
    let reported: Vec<(&RequestRow, u32)> = rows
        .iter()
        .filter(|r| r.outcome == Outcome::Completed.as_str())
        .filter_map(|r| Some((r, r.cached_tokens?)))
        .filter(|(r, _)| r.intended_send_s >= warmup_s)
        .collect();
    if reported.is_empty() {
        return None;
    }
    let mut acc = PrefixAccumulator::new(warmup_s);
    let mut c = PrefixCounts::default();
    for &(r, cached) in &reported {
        acc.push(&r.record(), cached);
        c.lookups += 1;
        c.hit_lookups += u64::from(cached > 0);
        c.query_tokens += u64::from(r.prompt_tokens.unwrap_or(r.target_prompt_tokens));
        c.hit_tokens += u64::from(cached);
    }
    Some(acc.finish(c, 0, 0))
}

/// One line on a measured prefix cache ([`measured_prefix`]).
pub fn prefix_text(p: &PrefixSummary) -> String {
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    format!(
        "prefix cache (server's report): {} of {} requests hit, {} of {} prompt tokens cached \
         ({}); mean TTFT ms hits {} misses {}",
        p.hit_lookups,
        p.lookups,
        p.saved_tokens,
        p.query_tokens,
        p.token_hit_rate
            .map_or("-".to_string(), |h| format!("{:.1} %", h * 100.0)),
        ms(p.ttft_hit.mean),
        ms(p.ttft_miss.mean),
    )
}

/// Human-readable lines of a summary (printed at the end of a run).
pub fn summary_text(s: &Summary, c: &ClientStats) -> String {
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    format!(
        "requests: {} offered, {} completed, {} errors, {} unfinished over {:.1} s\n\
         throughput: {:.2} req/s, {:.1} output tok/s; SLO goodput {:.2} req/s\n\
         TTFT ms  mean {} p50 {} p90 {} p99 {}\n\
         TPOT ms  mean {} p50 {} p90 {} p99 {}\n\
         E2E  ms  mean {} p50 {} p99 {}\n\
         stalls: {}; preemptions (server) {}; send lateness ms p50 {} p99 {} max {}; client-queued {}",
        s.arrivals,
        s.completed,
        s.errors,
        s.unfinished,
        s.window_s,
        s.throughput_rps,
        s.output_tokens_per_s,
        s.slo_goodput_rps,
        ms(s.ttft.mean),
        ms(s.ttft.p50),
        ms(s.ttft.p90),
        ms(s.ttft.p99),
        ms(s.tpot.mean),
        ms(s.tpot.p50),
        ms(s.tpot.p90),
        ms(s.tpot.p99),
        ms(s.e2e.mean),
        ms(s.e2e.p50),
        ms(s.e2e.p99),
        s.stalls,
        s.preemptions,
        ms(c.send_lateness_p50_s),
        ms(c.send_lateness_p99_s),
        ms(c.send_lateness_max_s),
        c.client_queued,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_columns_match_row_fields() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(RequestRow::default()).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let header = text.lines().next().unwrap();
        assert_eq!(header, REQUEST_COLUMNS.join(","));
    }

    #[test]
    fn errors_group_by_kind_and_the_most_frequent_come_first() {
        assert_eq!(
            error_kind("timed out after 4.0 s (12 chunks received)"),
            "timed out after N.N s"
        );
        assert_eq!(
            error_kind("HTTP 503: slot 12 busy"),
            "HTTP 503: slot N busy"
        );
        assert_eq!(
            error_kind("usage.completion_tokens = -5 is not a count"),
            "usage.completion_tokens = -N is not a count"
        );
        let row = |outcome: &str, error: &str| RequestRow {
            outcome: outcome.into(),
            error: error.into(),
            ..RequestRow::default()
        };
        let mut rows = vec![
            row(
                "completed",
                "no usage in stream: completion_tokens counted from chunks",
            ),
            row("unfinished", "interrupted"),
        ];
        assert_eq!(failures_text(&rows), None);
        for (n, e) in [
            (3, "stream cut: ended before [DONE] after 7 chunks"),
            (1, "a"),
            (2, "HTTP 500: x"),
            (1, "b"),
            (1, "c"),
        ] {
            rows.extend((0..n).map(|_| row("error", e)));
        }
        assert_eq!(
            failure_reasons(&rows)[..2],
            [
                (
                    "stream cut: ended before [DONE] after N chunks".to_string(),
                    3
                ),
                ("HTTP 500: x".to_string(), 2)
            ]
        );
        assert_eq!(
            failures_text(&rows),
            Some((
                8,
                "3× stream cut: ended before [DONE] after N chunks; 2× HTTP 500: x; 1× a; 2× of 2 other kinds"
                    .to_string()
            ))
        );
    }
}
