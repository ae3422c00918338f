//! Run configuration: workload × server × cost model × run rules, with a fallible
//! [`SimConfig::validate`]. Plain serde structs so the CLI, the app's URL state and the
//! sweep files all carry the same thing.

use crate::cost::CostModel;
use crate::error::{at_least_one, non_negative, positive, ConfigError};
use crate::limits::{self, Limits};
use crate::metrics::MetricsConfig;
use crate::workload::{LengthDist, Workload};
use serde::{Deserialize, Serialize};

/// Scheduling policy (docs/model.md, Policies). Each is its own [`crate::scheduler::Scheduler`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// One request at a time, run to completion.
    Serial,
    /// Up to B requests at a time; the next batch starts when all of them have finished.
    Static,
    /// Iteration-level batching, whole-prompt prefill iterations stall decoding (vLLM v0/Orca).
    #[default]
    Continuous,
    /// Token budget per iteration: decodes first, then prefill chunks (vLLM v1/Sarathi).
    Chunked,
    /// Like continuous, the waiting queue ordered by total length (oracle SJF).
    Sjf,
    /// llama.cpp's slots: chunked under `-b` with prompts served in slot order, slots
    /// taken least recently used first (see [`crate::scheduler::LlamaCpp`]).
    LlamaCpp,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Serial,
        Policy::Static,
        Policy::Continuous,
        Policy::Chunked,
        Policy::Sjf,
        Policy::LlamaCpp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Serial => "serial",
            Policy::Static => "static",
            Policy::Continuous => "continuous",
            Policy::Chunked => "chunked",
            Policy::Sjf => "sjf",
            Policy::LlamaCpp => "llama_cpp",
        }
    }
}

/// How KV memory is allocated and what happens when it runs out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvMode {
    /// Loss system: at arrival reserve prompt + output (rounded up to blocks); if it does
    /// not fit, the request is rejected (the reference study).
    #[default]
    Reserve,
    /// vLLM-style paging: blocks grow with the sequence; recompute preemption of the most
    /// recently admitted request when a block is needed and none is free.
    Paged,
}

/// Whether the KV manager keeps the blocks of earlier requests to reuse their prefill
/// (docs/model.md, Prefix caching).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixCache {
    /// No reuse: every admission prefills its whole prompt.
    #[default]
    Off,
    /// vLLM's automatic prefix caching (paged KV only): full blocks are keyed by their
    /// tokens and everything before them; blocks no request holds stay cached until
    /// their room is needed, least recently used first; a hit skips the prefill of its
    /// cached blocks.
    Apc,
    /// llama.cpp's per-slot prompt cache (`llama-server` with `cache_prompt`; the
    /// `llama_cpp` policy only): each slot keeps its last sequence's tokens, a request
    /// takes the idle slot most similar to its prompt and reuses the common prefix
    /// (docs/model.md, Slot cache).
    Slot,
}

impl PrefixCache {
    pub fn is_off(&self) -> bool {
        *self == PrefixCache::Off
    }
}

/// Which requests are admitted at arrival, on top of the KV mode's own rule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Admission {
    /// Everything the KV mode accepts.
    #[default]
    All,
    /// Threshold admission: accept only while fewer than `max_in_system` requests are in
    /// the system (waiting + running). The analytical DP rule supplies the threshold.
    MaxInSystem { max_in_system: u32 },
}

/// When the first output token is produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstToken {
    /// The iteration that completes a request's prefill emits its first token (vLLM).
    #[default]
    AfterPrefill,
    /// Prefill emits nothing; the first token is stamped at the end of the first decode
    /// iteration (the reference study).
    AfterFirstDecode,
}

/// How a run ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndRule {
    /// Arrivals stop at the horizon; accepted requests run to completion.
    #[default]
    Drain,
    /// Everything stops at the horizon; unfinished requests are excluded from latency and
    /// goodput but counted as accepted (the reference study).
    Cut,
}

/// The server: batch width, KV cache, token budget, policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerConfig {
    pub policy: Policy,
    /// `max_num_seqs`, B [requests].
    pub max_batch: u32,
    /// KV capacity K [tokens].
    pub kv_tokens: u64,
    /// Block size [tokens] (16 like vLLM; 1 = token-exact).
    pub block_size: u32,
    /// Per-iteration token budget (`max_num_batched_tokens`) [tokens]; used by `chunked`.
    pub token_budget: u32,
    pub kv_mode: KvMode,
    /// Paged mode: fraction of blocks kept free when admitting (vLLM's watermark, 0.01).
    pub watermark: f64,
    /// Paged mode: reject arrivals when this many are waiting (None = unbounded).
    pub queue_cap: Option<u32>,
    pub admission: Admission,
    /// Front-end latency per request [s]: from the request's arrival (the client's send)
    /// until the scheduler sees it — HTTP, tokenization, the server's task queue, and the
    /// first chunk's way back. The simulator delays each request's entry by it, so TTFT
    /// and E2E include it (and queueing sees the later entry). 0 by default: the
    /// reference study and the analytical models have none. `bench-native fit` measures
    /// it as a lone prompt's client TTFT minus the server's own prompt time.
    #[serde(default)]
    pub overhead_s: f64,
    /// Front-end latency per prompt token [s/token] (tokenization, the chat template, the
    /// hand-off of the token ids): a request enters the scheduler at
    /// [`ServerConfig::entry_delay`] after its arrival, `overhead_s` + this × prompt
    /// tokens, and in arrival order (docs/model.md, Overheads). 0 by default, and then
    /// not written out, so older files and outputs stay as they were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overhead_per_token_s: f64,
    /// Scheduling overhead of every engine step [s]: the scheduler's pass, the batch's
    /// preparation and the output processing between two forward passes, added to every
    /// iteration's cost ([`crate::cost::PreparedCost::with_step_overhead`]). 0 by
    /// default (the cost model's own intercept holds it), and then not written out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step_overhead_s: f64,
    /// The wake-up after idle: the first step after the server has had nothing to run for
    /// a while takes longer, by how long (caches, CPU frequency and the scheduler's sleep
    /// going cold). (idle time [s], extra time of that step [s]) points, strictly
    /// increasing in idle time, interpolated piecewise-linearly and held at the end
    /// points' values beyond them ([`ServerConfig::wake_s`]; docs/model.md, Overheads).
    /// `bench-native microbench` measures it as lone prompts after pauses. Empty by
    /// default (no such cost), and then not written out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_wake: Vec<(f64, f64)>,
    /// Prefix caching (paged KV only); off by default, and then not written out.
    #[serde(default, skip_serializing_if = "PrefixCache::is_off")]
    pub prefix_cache: PrefixCache,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            policy: Policy::Continuous,
            max_batch: 8,
            kv_tokens: 8192,
            block_size: 1,
            token_budget: 2048,
            kv_mode: KvMode::Reserve,
            watermark: 0.01,
            queue_cap: None,
            admission: Admission::All,
            overhead_s: 0.0,
            overhead_per_token_s: 0.0,
            step_overhead_s: 0.0,
            idle_wake: Vec::new(),
            prefix_cache: PrefixCache::Off,
        }
    }
}

impl ServerConfig {
    /// llama.cpp's `llama-server -np SLOTS -c CTX -b BATCH`, as the simulator models it.
    ///
    /// What the server does (llama.cpp `tools/server`): a request takes a free slot or
    /// waits in the server's queue; every iteration first adds one decode token for each
    /// generating slot, then prompt tokens of the slots still prefilling until the batch
    /// holds `-b` tokens (chunked prefill, decodes first); the first token is sampled when
    /// a prompt's last chunk has been computed. `-c` is split equally: each slot owns
    /// CTX / SLOTS tokens of KV that no other slot can use, so KV never blocks a free slot
    /// and nothing is ever preempted; a prompt + output longer than a slot does not fit
    /// (see [`SimConfig::llama_cpp`], which caps the workload at the slot).
    ///
    /// Mapping: the `llama_cpp` policy (slot assignment and prompt order as the server
    /// does them, see [`crate::scheduler::LlamaCpp`]), B = SLOTS, budget = BATCH,
    /// token-granular `paged` KV of CTX tokens without a watermark. Waiting requests hold
    /// no KV (unlike `reserve`, which would reserve at arrival and reject), and with every
    /// request capped at CTX / SLOTS the B running ones always fit: no blocking and no
    /// preemption, as with slots.
    pub fn llama_cpp(slots: u32, ctx_tokens: u64, batch: u32) -> ServerConfig {
        ServerConfig {
            policy: Policy::LlamaCpp,
            max_batch: slots,
            kv_tokens: ctx_tokens,
            block_size: 1,
            token_budget: batch,
            kv_mode: KvMode::Paged,
            watermark: 0.0,
            queue_cap: None,
            admission: Admission::All,
            overhead_s: 0.0,
            overhead_per_token_s: 0.0,
            step_overhead_s: 0.0,
            idle_wake: Vec::new(),
            prefix_cache: PrefixCache::Off,
        }
    }

    /// Front-end delay of a request with `prompt` tokens [s]: `overhead_s` +
    /// `overhead_per_token_s` × prompt (docs/model.md, Overheads).
    #[inline]
    pub fn entry_delay(&self, prompt: u32) -> f64 {
        self.overhead_s + self.overhead_per_token_s * prompt as f64
    }

    /// Extra time of the first step after `idle` seconds without work [s]
    /// ([`ServerConfig::idle_wake`]; 0 when it is empty).
    pub fn wake_s(&self, idle: f64) -> f64 {
        match self.idle_wake.as_slice() {
            [] => 0.0,
            [first, ..] if idle <= first.0 => first.1,
            [.., last] if idle >= last.0 => last.1,
            pts => crate::cost::interpolate(pts, idle),
        }
    }

    /// Tokens of KV each llama.cpp slot owns (CTX / SLOTS), for [`ServerConfig::llama_cpp`].
    pub fn slot_context(&self) -> u64 {
        self.kv_tokens / self.max_batch.max(1) as u64
    }

    /// vLLM V1 (`--max-num-seqs`, KV_BLOCKS × BLOCK_SIZE, `--max-num-batched-tokens`), as
    /// the simulator models it.
    ///
    /// What the server does (vLLM V1 scheduler, chunked prefill on by default): one pass
    /// per step under a token budget — running requests first (a decode token each, or
    /// their next prefill chunk), then waiting requests first come first served while the
    /// budget, `max_num_seqs` and free blocks allow. KV is paged: a running request that
    /// cannot get a block for its next token preempts the most recently admitted running
    /// request (recompute: its blocks are freed, it goes back to the head of the queue and
    /// later re-prefills prompt + generated tokens). V1 keeps no admission watermark.
    ///
    /// Mapping: `chunked`, `paged` with those blocks, watermark 0, no queue cap. Known
    /// differences: the prefix cache is off here (vLLM V1's is on by default: set
    /// `prefix_cache` to `apc` to model it, or run the server with
    /// `--no-enable-prefix-caching` or distinct prompts), and V1's
    /// `long_prefill_token_threshold` is not modelled (off by default).
    pub fn vllm_v1(
        max_num_seqs: u32,
        kv_blocks: u64,
        block_size: u32,
        max_num_batched_tokens: u32,
    ) -> ServerConfig {
        ServerConfig {
            policy: Policy::Chunked,
            max_batch: max_num_seqs,
            kv_tokens: kv_blocks * block_size as u64,
            block_size,
            token_budget: max_num_batched_tokens,
            kv_mode: KvMode::Paged,
            watermark: 0.0,
            queue_cap: None,
            admission: Admission::All,
            overhead_s: 0.0,
            overhead_per_token_s: 0.0,
            step_overhead_s: 0.0,
            idle_wake: Vec::new(),
            prefix_cache: PrefixCache::Off,
        }
    }
}

/// Everything one simulation run needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    pub workload: Workload,
    pub server: ServerConfig,
    pub cost: CostModel,
    /// Arrivals stop at this time [s].
    pub horizon_s: f64,
    pub end: EndRule,
    pub first_token: FirstToken,
    pub metrics: MetricsConfig,
    pub seed: u64,
    /// Keep every request record in the report (memory grows with the run).
    pub keep_records: bool,
    /// Record queue / batch / KV time series, at most this many points (0 = off).
    pub timeseries_points: u32,
}

impl Default for SimConfig {
    /// The reference-compatible configuration (see [`SimConfig::reference`]).
    fn default() -> Self {
        SimConfig::reference(1.0, 8, 8192)
    }
}

impl SimConfig {
    /// The reference study's simulator, exactly (docs/model.md, Server): continuous,
    /// token-exact reserve, reference cost, first token after the first decode, arrivals
    /// and everything else stop at the horizon (1000 s), lognormal reference lengths.
    pub fn reference(rate: f64, max_batch: u32, kv_tokens: u64) -> SimConfig {
        SimConfig {
            workload: Workload::default().with_rate(rate),
            server: ServerConfig {
                max_batch,
                kv_tokens,
                ..ServerConfig::default()
            },
            cost: CostModel::default(),
            horizon_s: 1000.0,
            end: EndRule::Cut,
            first_token: FirstToken::AfterFirstDecode,
            metrics: MetricsConfig::default(),
            seed: 0,
            keep_records: false,
            timeseries_points: 0,
        }
    }

    /// vLLM-like defaults: chunked prefill, paged KV in 16-token blocks, ShareGPT lengths,
    /// the A10G table cost, drain.
    pub fn vllm_like(rate: f64) -> SimConfig {
        SimConfig {
            workload: Workload {
                lengths: LengthDist::sharegpt(),
                ..Workload::default()
            }
            .with_rate(rate),
            server: ServerConfig {
                policy: Policy::Chunked,
                max_batch: 128,
                kv_tokens: 565_904,
                block_size: 16,
                token_budget: 2048,
                kv_mode: KvMode::Paged,
                ..ServerConfig::default()
            },
            cost: CostModel::Table(crate::cost::TableCost::a10g_qwen_1_5b()),
            horizon_s: 600.0,
            end: EndRule::Drain,
            first_token: FirstToken::AfterPrefill,
            ..SimConfig::reference(rate, 1, 1)
        }
    }

    /// A llama-server (`-np SLOTS -c CTX -b BATCH`, see [`ServerConfig::llama_cpp`]) under
    /// `rate` req/s of the default workload: the workload is capped at one slot's context,
    /// the first token comes with the last prompt chunk, accepted requests drain.
    pub fn llama_cpp(rate: f64, slots: u32, ctx_tokens: u64, batch: u32) -> SimConfig {
        let server = ServerConfig::llama_cpp(slots, ctx_tokens, batch);
        let slot = u32::try_from(server.slot_context()).unwrap_or(u32::MAX);
        SimConfig {
            workload: Workload {
                max_model_len: Some(slot),
                ..Workload::default()
            }
            .with_rate(rate),
            server,
            end: EndRule::Drain,
            first_token: FirstToken::AfterPrefill,
            ..SimConfig::reference(rate, 1, 1)
        }
    }

    /// Checks every parameter, and that a run fits the default [`Limits`].
    ///
    /// # Errors
    /// The first problem found: non-positive rate/horizon, B = 0, a KV cache that cannot
    /// hold one request, NaN anywhere; then a value past a structural bound of
    /// [`crate::limits`] (B, K, rate, burstiness, horizon…) or a run of more requests
    /// than [`Limits::max_requests_per_run`] ([`ConfigError::Limit`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&Limits::default())
    }

    /// Requests one run is expected to simulate, the estimate the work limits check
    /// ([`limits::expected_requests`]) [requests].
    pub fn expected_requests(&self) -> f64 {
        limits::expected_requests(&self.workload, self.horizon_s)
    }

    /// A drained run's backlog and drain time, estimated from the cost model before it
    /// runs ([`limits::drain_estimate`]); `None` for a run cut at the horizon, or when the
    /// offered load stays within the server's best-case capacity.
    pub fn drain_estimate(&self) -> Option<limits::DrainEstimate> {
        if self.end != EndRule::Drain {
            return None;
        }
        let s = &self.server;
        let mut hold = f64::INFINITY;
        if let Admission::MaxInSystem { max_in_system } = s.admission {
            hold = hold.min(max_in_system as f64);
        }
        match s.kv_mode {
            // Each request in the system holds its prompt + output, at least one token each.
            KvMode::Reserve => hold = hold.min(s.kv_tokens as f64 / 2.0),
            KvMode::Paged => {
                if let Some(q) = s.queue_cap {
                    hold = hold.min(q as f64 + s.max_batch as f64);
                }
            }
        }
        limits::drain_estimate(
            &self.workload,
            self.horizon_s,
            (s.max_batch, s.kv_tokens, hold),
            &self.cost,
        )
    }

    /// [`SimConfig::validate`] against other work limits.
    ///
    /// # Errors
    /// As [`SimConfig::validate`].
    pub fn validate_with(&self, work: &Limits) -> Result<(), ConfigError> {
        self.workload.validate()?;
        self.cost.validate()?;
        positive("horizon_s", self.horizon_s)?;
        let s = &self.server;
        at_least_one("max_batch", s.max_batch as u64)?;
        at_least_one("block_size", s.block_size as u64)?;
        at_least_one("token_budget", s.token_budget as u64)?;
        at_least_one("kv_tokens", s.kv_tokens)?;
        non_negative("watermark", s.watermark)?;
        non_negative("per-request overhead", s.overhead_s)?;
        non_negative("per-prompt-token overhead", s.overhead_per_token_s)?;
        non_negative("per-step overhead", s.step_overhead_s)?;
        if s.idle_wake
            .iter()
            .any(|p| !(p.0.is_finite() && p.1.is_finite() && p.0 >= 0.0 && p.1 >= 0.0))
            || s.idle_wake.windows(2).any(|w| w[1].0 <= w[0].0)
        {
            return Err(ConfigError::Cost(
                "idle wake-up points must be finite, >= 0 and strictly increasing in idle time"
                    .into(),
            ));
        }
        if s.watermark >= 0.5 {
            return Err(ConfigError::OutOfRange {
                name: "watermark",
                value: s.watermark,
                why: "must be < 0.5",
            });
        }
        if s.prefix_cache == PrefixCache::Apc && s.kv_mode != KvMode::Paged {
            return Err(ConfigError::PrefixCache(
                "automatic prefix caching needs paged KV (kv_mode paged): reserve mode holds \
                 no blocks between requests",
            ));
        }
        if s.prefix_cache == PrefixCache::Slot {
            if s.policy != Policy::LlamaCpp {
                return Err(ConfigError::PrefixCache(
                    "the slot cache is llama-server's per-slot prompt cache and needs the \
                     llama_cpp policy (its slots); for a vLLM-style server use apc",
                ));
            }
            if s.kv_mode != KvMode::Paged {
                return Err(ConfigError::PrefixCache(
                    "the slot cache needs paged KV (kv_mode paged, as ServerConfig::llama_cpp \
                     sets): reserve mode reserves a whole request at arrival",
                ));
            }
        }
        if let Admission::MaxInSystem { max_in_system } = s.admission {
            at_least_one("max_in_system", max_in_system as u64)?;
        }
        non_negative("stall_threshold_s", self.metrics.stall_threshold_s)?;
        non_negative("warmup_s", self.metrics.warmup_s)?;
        positive("slo_ttft_s", self.metrics.slo_ttft_s)?;
        positive("slo_tpot_s", self.metrics.slo_tpot_s)?;
        // The smallest request the workload can produce must fit in the cache.
        let need = match &self.workload.arrivals {
            crate::workload::ArrivalProcess::Trace { requests } => requests
                .iter()
                .map(|r| r.prompt as u64 + r.output as u64)
                .min()
                .unwrap_or(2),
            _ => self.workload.lengths.min_total(),
        };
        let need = match self.workload.max_model_len {
            Some(cap) => need.min(cap as u64),
            None => need,
        };
        let bs = s.block_size as u64;
        if need.div_ceil(bs) > s.kv_tokens / bs {
            return Err(ConfigError::KvTooSmall {
                kv_tokens: s.kv_tokens,
                need_tokens: need.div_ceil(bs) * bs,
            });
        }
        limits::check_sizes(
            s.max_batch,
            s.kv_tokens,
            self.timeseries_points,
            &self.workload.arrivals,
        )?;
        work.check_run(self.expected_requests())?;
        limits::check_clock(self.horizon_s, &self.workload.arrivals)?;
        if self.end == EndRule::Drain {
            limits::check_drained_clock(self.horizon_s, work.max_drain_horizons)?;
            work.check_drain(self.drain_estimate(), self.horizon_s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ArrivalProcess, TraceRequest};

    fn two(per_token: f64, step: f64) -> crate::sim::SimReport {
        let mut c = SimConfig::vllm_like(1.0);
        c.workload.arrivals = ArrivalProcess::Trace {
            requests: vec![
                TraceRequest {
                    arrival: 0.0,
                    prompt: 1000,
                    output: 4,
                    class: 0,
                },
                TraceRequest {
                    arrival: 0.001,
                    prompt: 10,
                    output: 4,
                    class: 0,
                },
            ],
        };
        c.horizon_s = 1.0;
        c.keep_records = true;
        c.server.overhead_s = 0.002;
        c.server.overhead_per_token_s = per_token;
        c.server.step_overhead_s = step;
        crate::sim::simulate(&c).unwrap()
    }

    /// The per-token front end delays a long prompt more, and a short prompt behind it
    /// enters with it, not before; the step overhead lengthens every iteration.
    #[test]
    fn front_end_per_token_keeps_arrival_order_and_step_overhead_adds_to_each_step() {
        let base = two(0.0, 0.0);
        let fe = two(1e-5, 0.0);
        assert!(fe.stats.time_monotone);
        let (a0, b0) = (
            base.records[0].ttft().unwrap(),
            base.records[1].ttft().unwrap(),
        );
        let (a1, b1) = (fe.records[0].ttft().unwrap(), fe.records[1].ttft().unwrap());
        assert!(a1 >= a0 + 0.01 - 1e-9, "{a0} {a1}");
        // B's own entry (0.001 + 0.002 + 0.0001) is before A's (0.012): it waits for A's.
        assert!(b1 + 0.001 >= 0.012, "{b0} {b1}");
        let step = two(0.0, 0.001);
        let (t0, t1) = (
            base.records[1].tpot().unwrap(),
            step.records[1].tpot().unwrap(),
        );
        assert!((t1 - t0 - 0.001).abs() < 1e-9, "{t0} {t1}");
        // 0 is the old behaviour, bit for bit
        assert_eq!(two(0.0, 0.0).records, base.records);
        assert_eq!(ServerConfig::default().entry_delay(1000), 0.0);
    }
}
