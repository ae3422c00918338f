//! The prefix-cache flags and the shared-token workload flags (docs/model.md, Prefix
//! caching; Shared tokens): `--prefix-cache`, `--system-prompt G:SHARE:P[:ZIPF]`,
//! `--conversations MEAN:MAX:THINK_S`, each value checked against the flag it came from.

use super::ArgError;
use clap::ValueEnum;
use engine::config::{KvMode, Policy, SimConfig};
use engine::workload::{Conversations, SharedTokens, SystemPrompts};
use engine::PrefixCache;

/// `--prefix-cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PrefixCacheArg {
    /// No reuse between requests (the default).
    Off,
    /// vLLM's automatic prefix caching: full blocks keyed by their tokens and everything
    /// before them, kept until their room is needed, evicted least recently used first.
    Apc,
    /// llama-server's per-slot prompt cache (--preset llama-cpp / --policy llama-cpp
    /// only): each slot keeps its last sequence; a request takes the idle slot most
    /// similar to its prompt (above 10 %, else the least recently used) and reuses the
    /// common prefix.
    Slot,
}

impl From<PrefixCacheArg> for PrefixCache {
    fn from(a: PrefixCacheArg) -> PrefixCache {
        match a {
            PrefixCacheArg::Off => PrefixCache::Off,
            PrefixCacheArg::Apc => PrefixCache::Apc,
            PrefixCacheArg::Slot => PrefixCache::Slot,
        }
    }
}

/// The numbers of a `A:B:C[:D]` flag value.
fn fields(
    flag: &'static str,
    what: &'static str,
    v: &str,
    n: std::ops::RangeInclusive<usize>,
) -> Result<Vec<f64>, ArgError> {
    let xs: Vec<&str> = v.split(':').collect();
    if !n.contains(&xs.len()) {
        return Err(ArgError::range(flag, what, v));
    }
    xs.iter()
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| ArgError::range(flag, what, v))
        })
        .collect()
}

const SYSTEM_WHAT: &str = "GROUPS:SHARE:TOKENS[:ZIPF] with GROUPS a whole number in 1..=65535, \
     SHARE in [0, 1], TOKENS a whole number >= 1, ZIPF >= 0 (e.g. 8:0.5:512)";
const CONV_WHAT: &str = "MEAN_TURNS:MAX_TURNS:THINK_S with MEAN_TURNS >= 1, MAX_TURNS a whole \
     number >= 1, THINK_S > 0 (e.g. 4:10:30)";

fn whole(x: f64, lo: f64, hi: f64) -> bool {
    x.fract() == 0.0 && (lo..=hi).contains(&x)
}

/// Parses `--system-prompt G:SHARE:P[:ZIPF]`.
///
/// # Errors
/// [`ArgError`] naming the flag and the expected form.
pub fn system_prompt(v: &str) -> Result<SystemPrompts, ArgError> {
    let flag = "--system-prompt";
    let x = fields(flag, SYSTEM_WHAT, v, 3..=4)?;
    let zipf = x.get(3).copied().unwrap_or(0.0);
    if !(whole(x[0], 1.0, 65535.0)
        && (0.0..=1.0).contains(&x[1])
        && whole(x[2], 1.0, u32::MAX as f64)
        && zipf >= 0.0)
    {
        return Err(ArgError::range(flag, SYSTEM_WHAT, v));
    }
    Ok(SystemPrompts {
        groups: x[0] as u32,
        share: x[1],
        tokens: x[2] as u32,
        zipf,
    })
}

/// Parses `--conversations MEAN_TURNS:MAX_TURNS:THINK_S`.
///
/// # Errors
/// [`ArgError`] naming the flag and the expected form.
pub fn conversations(v: &str) -> Result<Conversations, ArgError> {
    let flag = "--conversations";
    let x = fields(flag, CONV_WHAT, v, 3..=3)?;
    if !(x[0] >= 1.0 && whole(x[1], 1.0, u32::MAX as f64) && x[2] > 0.0) {
        return Err(ArgError::range(flag, CONV_WHAT, v));
    }
    Ok(Conversations {
        mean_turns: x[0],
        max_turns: x[1] as u32,
        think_s: x[2],
    })
}

/// What the requests share, from `--system-prompt` and `--conversations` (None: neither).
///
/// # Errors
/// As [`system_prompt`] and [`conversations`].
pub fn shared_tokens(
    system: Option<&str>,
    conv: Option<&str>,
) -> Result<Option<SharedTokens>, ArgError> {
    let system = system.map(system_prompt).transpose()?;
    Ok(match (conv.map(conversations).transpose()?, system) {
        (Some(conversations), system) => Some(SharedTokens::Conversations {
            conversations,
            system,
        }),
        (None, Some(system)) => Some(SharedTokens::Prefixes { system }),
        (None, None) => None,
    })
}

/// The flags that cannot hold with the prefix cache on: reserve KV (what the preset or
/// `--kv-mode` chose); for the slot cache, a policy other than llama.cpp's.
///
/// # Errors
/// [`ArgError::Conflict`] saying what to change.
pub fn check_prefix_cache(c: &SimConfig) -> Result<(), ArgError> {
    if c.server.prefix_cache == PrefixCache::Slot && c.server.policy != Policy::LlamaCpp {
        return Err(ArgError::Conflict(format!(
            "--prefix-cache slot is llama-server's per-slot prompt cache and needs its slots: \
             the policy here is {}; use --preset llama-cpp (or --policy llama-cpp), or \
             --prefix-cache apc for a vLLM-style server",
            c.server.policy.as_str()
        )));
    }
    if c.server.prefix_cache == PrefixCache::Slot && c.server.kv_mode == KvMode::Reserve {
        return Err(ArgError::Conflict(
            "--prefix-cache slot needs paged KV (as --preset llama-cpp sets): drop \
             --kv-mode reserve"
                .into(),
        ));
    }
    if !c.server.prefix_cache.is_off() && c.server.kv_mode == KvMode::Reserve {
        return Err(ArgError::Conflict(
            "--prefix-cache apc needs paged KV: reserve mode (the reference preset's, or \
             --kv-mode reserve) frees a request's blocks when it leaves, so nothing stays to \
             reuse; add --kv-mode paged (or use --preset vllm / vllm-v1)"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_parse_or_name_the_flag() {
        let s = system_prompt("8:0.5:512").unwrap();
        assert_eq!((s.groups, s.share, s.tokens, s.zipf), (8, 0.5, 512, 0.0));
        assert_eq!(system_prompt("2:1:64:1.2").unwrap().zipf, 1.2);
        for bad in [
            "8:0.5",
            "0:0.5:512",
            "8:1.5:512",
            "8:0.5:0",
            "8:0.5:5.5",
            "a:b:c",
            "8:0.5:512:-1",
            "8:0.5:512:1:2",
        ] {
            let e = system_prompt(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("--system-prompt must be GROUPS:SHARE:TOKENS"),
                "{bad}: {e}"
            );
            assert!(e.ends_with(&format!("got {bad}")), "{e}");
        }
        let c = conversations("4:10:30").unwrap();
        assert_eq!((c.mean_turns, c.max_turns, c.think_s), (4.0, 10, 30.0));
        for bad in ["0.5:10:30", "4:0:30", "4:10:0", "4:10", "4:10:nan"] {
            let e = conversations(bad).unwrap_err().to_string();
            assert!(e.starts_with("--conversations must be"), "{bad}: {e}");
        }
        assert!(matches!(
            shared_tokens(Some("2:1:64"), Some("3:5:10")).unwrap(),
            Some(SharedTokens::Conversations {
                system: Some(_),
                ..
            })
        ));
        assert_eq!(shared_tokens(None, None).unwrap(), None);
    }
}
