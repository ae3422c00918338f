//! The engine workload the parameters describe (docs/model.md, Workload; Shared tokens):
//! arrivals, lengths, a trace, and what the requests share — system prompts and
//! multi-turn conversations, the tokens a prefix cache can reuse.

use super::{Arrivals, Invalid, Lengths, Params};
use engine::config::{KvMode, PrefixCache};
use engine::workload::{
    ArrivalProcess, Conversations, LengthDist, SharedTokens, SystemPrompts, Workload,
};
use serde::{Deserialize, Serialize};

/// What the requests share (the CLI's `--system-prompt G:SHARE:TOKENS[:ZIPF]` and
/// `--conversations MEAN:MAX:THINK_S`). The numbers are kept while a part is off, so
/// switching it back on restores them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedParams {
    /// A share of the requests begin with one of `groups` system prompts.
    pub system: bool,
    pub groups: u32,
    /// Share of requests (of conversations) with a system prompt, in [0, 1].
    pub share: f64,
    /// System prompt length P [tokens].
    pub tokens: u32,
    /// Group popularity: group g chosen ∝ 1/(g+1)^zipf.
    pub zipf: f64,
    /// The arrivals start multi-turn conversations.
    pub conversations: bool,
    /// Mean turns per conversation (geometric, at most `max_turns`).
    pub mean_turns: f64,
    pub max_turns: u32,
    /// Mean gap between a turn and the next [s].
    pub think_s: f64,
}

impl Default for SharedParams {
    /// Both parts off, at the CLI's examples' values (8:0.5:512, 4:10:30).
    fn default() -> Self {
        SharedParams {
            system: false,
            groups: 8,
            share: 0.5,
            tokens: 512,
            zipf: 0.0,
            conversations: false,
            mean_turns: 4.0,
            max_turns: 10,
            think_s: 30.0,
        }
    }
}

impl SharedParams {
    /// The engine's description of what the requests share (None: nothing).
    pub fn tokens(&self) -> Option<SharedTokens> {
        let system = self.system.then_some(SystemPrompts {
            groups: self.groups,
            share: self.share,
            tokens: self.tokens,
            zipf: self.zipf,
        });
        if self.conversations {
            Some(SharedTokens::Conversations {
                conversations: Conversations {
                    mean_turns: self.mean_turns,
                    max_turns: self.max_turns,
                    think_s: self.think_s,
                },
                system,
            })
        } else {
            system.map(|system| SharedTokens::Prefixes { system })
        }
    }

    /// Whether any part is on.
    pub fn any(&self) -> bool {
        self.system || self.conversations
    }
}

impl Params {
    /// The engine workload at `rate`.
    pub fn workload(&self, rate: f64) -> Workload {
        let arrivals = match self.arrivals {
            Arrivals::Poisson => ArrivalProcess::Poisson { rate },
            Arrivals::Gamma => ArrivalProcess::Gamma {
                rate,
                burstiness: self.burstiness,
            },
            Arrivals::Deterministic => ArrivalProcess::Deterministic { rate },
        };
        let lengths = match self.lengths {
            Lengths::Lognormal => LengthDist::Lognormal {
                prompt_median: self.prompt_median,
                prompt_sigma: self.prompt_sigma,
                output_median: self.output_median,
                output_sigma: self.output_sigma,
            },
            Lengths::ShareGpt => LengthDist::sharegpt(),
            Lengths::Fixed => LengthDist::Fixed {
                prompt: self.fixed_prompt,
                output: self.fixed_output,
            },
            Lengths::Mixture => LengthDist::short_long_mix(),
        };
        self.trace_workload(
            rate,
            Workload {
                arrivals,
                lengths,
                max_model_len: None,
                shared: self.shared.tokens(),
            },
        )
    }
}

impl Params {
    /// The shared-token and prefix-cache settings that cannot hold together: the cache
    /// with reserve KV, and system prompts or conversations with a trace.
    ///
    /// # Errors
    /// A message beside the field to change (`pc`, `sp` or `conv`).
    pub(super) fn check_shared(&self) -> Result<(), Invalid> {
        if self.prefix_cache != PrefixCache::Off && self.kv_mode == KvMode::Reserve {
            return Err(Invalid {
                key: Some("pc"),
                message: "prefix cache: needs paged KV. Reserve mode frees a request's blocks \
                          when it leaves, so nothing stays to reuse: set KV mode to paged, or \
                          turn the prefix cache off"
                    .into(),
            });
        }
        if self.trace.is_some() && self.shared.any() {
            let key = if self.shared.system { "sp" } else { "conv" };
            return Err(Invalid {
                key: Some(key),
                message: format!(
                    "{}: a trace brings its own requests, and a Mooncake trace what they \
                     share; remove the trace, or turn system prompts and conversations off",
                    if self.shared.system {
                        "system prompts"
                    } else {
                        "conversations"
                    }
                ),
            });
        }
        Ok(())
    }
}
