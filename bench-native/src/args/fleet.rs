//! `--replicas N --router NAME` and `--fleet FILE`: a fleet of servers behind a router
//! (docs/model.md, "Fleets"), for `simulate` and `sweep`.
//!
//! A fleet file is JSON: the router and groups of identical replicas, each group a preset
//! and the server flags it would take on the command line (docs/model.md, "Fleet files").
//! The workload, horizon, seed and end rule are the command line's, shared by the whole
//! fleet. Every group is checked by the same step as the command line's own flags, so a
//! value out of range is refused with the group it came from.

use super::limits::Scope;
use super::model::{KvModeArg, ModelArgs, PolicyArg, Preset};
use super::{ArgError, Point, PointFlags};
use anyhow::Context;
use clap::{Args, ValueEnum};
use engine::fleet::{FleetConfig, Replica, RouterKind};
use engine::limits::MAX_REPLICAS;
use engine::SimConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The fleet flags of `simulate` and `sweep`.
#[derive(Clone, Debug, Default, Args)]
pub struct FleetArgs {
    /// Simulate N identical replicas (the server flags above) behind --router, sharing the
    /// one request stream (--rate is the whole fleet's).
    #[arg(long, value_name = "N", conflicts_with = "fleet")]
    pub replicas: Option<u32>,
    /// The fleet's router: round_robin (rr), random, least_outstanding (lor, least_conn,
    /// leastconn), least_tokens (jsq), power_of_D (p2c = power_of_2), kv_aware (kv; paged
    /// servers only). Default round_robin, or the fleet file's.
    #[arg(long, value_name = "NAME")]
    pub router: Option<String>,
    /// A fleet of mixed replicas from a JSON file:
    /// `{"router": "least_outstanding", "replicas": [{"count": 2, "preset": "vllm-v1",
    /// "batch": 8, "kv": 768, "cost": "fit.json"}, {"count": 1, "preset": "llama-cpp", …}]}`
    /// (docs/model.md, "Fleet files").
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
}

/// One group of identical replicas in a fleet file. Unset fields are the command line's.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    #[serde(default = "one")]
    count: u32,
    preset: Option<String>,
    batch: Option<u32>,
    kv: Option<u64>,
    budget: Option<u32>,
    block_size: Option<u32>,
    kv_mode: Option<String>,
    policy: Option<String>,
    cost: Option<String>,
    overhead_ms: Option<f64>,
    max_in_system: Option<u32>,
}

fn one() -> u32 {
    1
}

/// A fleet file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    router: Option<String>,
    replicas: Vec<Group>,
}

/// A checked fleet description: the router and, per group, the flags its replicas take.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub router: RouterKind,
    groups: Vec<GroupArgs>,
}

/// (where the group came from, for messages; its flags; its batch and KV if set; count)
type GroupArgs = (String, ModelArgs, Option<u32>, Option<u64>, u32);

fn router(name: &str, what: &str) -> Result<RouterKind, ArgError> {
    RouterKind::parse(name).ok_or_else(|| {
        ArgError::Conflict(format!(
            "{what}: unknown router '{name}': one of round_robin (rr), random, \
             least_outstanding (lor, least_conn), least_tokens (jsq), power_of_D (p2c), kv_aware, \
             prefix_affinity (prefix)"
        ))
    })
}

fn value_enum<T: ValueEnum>(s: &str, what: &str) -> Result<T, ArgError> {
    T::from_str(s, true).map_err(|_| {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_string()))
            .collect();
        ArgError::Conflict(format!(
            "{what}: unknown value '{s}': one of {}",
            names.join(", ")
        ))
    })
}

impl FleetArgs {
    /// Whether a fleet was asked for.
    pub fn is_fleet(&self) -> bool {
        self.replicas.is_some() || self.fleet.is_some()
    }

    /// The checked fleet of these flags (None without --replicas or --fleet).
    ///
    /// # Errors
    /// [`ArgError`] naming the flag or the fleet file's field; a file that cannot be read.
    pub fn resolve(&self, model: &ModelArgs) -> anyhow::Result<Option<Fleet>> {
        let cli_router = self
            .router
            .as_deref()
            .map(|r| router(r, &format!("--router {r}")))
            .transpose()?;
        if let Some(n) = self.replicas {
            if n == 0 || n as usize > MAX_REPLICAS {
                return Err(ArgError::range("--replicas", "at least 1 and at most 4096", n).into());
            }
            return Ok(Some(Fleet {
                router: cli_router.unwrap_or_default(),
                groups: vec![("--replicas".into(), model.clone(), None, None, n)],
            }));
        }
        let Some(path) = &self.fleet else {
            if let Some(r) = &self.router {
                return Err(ArgError::Conflict(format!(
                    "--router {r} needs a fleet: add --replicas N or --fleet FILE"
                ))
                .into());
            }
            return Ok(None);
        };
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).with_context(|| format!("--fleet {shown}: reading"))?;
        let file: FleetFile = serde_json::from_str(&text).with_context(|| {
            format!("--fleet {shown}: not a fleet file (docs/model.md, \"Fleet files\")")
        })?;
        let file_router = file
            .router
            .as_deref()
            .map(|r| router(r, &format!("--fleet {shown}: router")))
            .transpose()?;
        if file.replicas.is_empty() {
            return Err(ArgError::Conflict(format!(
                "--fleet {shown}: replicas is empty: a fleet needs at least one replica"
            ))
            .into());
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut groups = Vec::new();
        let mut total = 0u64;
        for (i, g) in file.replicas.iter().enumerate() {
            let at = format!("--fleet {shown}: replicas[{i}]");
            if g.count == 0 {
                return Err(
                    ArgError::Conflict(format!("{at}.count must be at least 1, got 0")).into(),
                );
            }
            total += u64::from(g.count);
            let mut m = model.clone();
            if let Some(p) = &g.preset {
                m.preset = value_enum::<Preset>(p, &format!("{at}.preset"))?;
            }
            if let Some(p) = &g.policy {
                m.policy = Some(value_enum::<PolicyArg>(p, &format!("{at}.policy"))?);
            }
            if let Some(k) = &g.kv_mode {
                m.kv_mode = Some(value_enum::<KvModeArg>(k, &format!("{at}.kv_mode"))?);
            }
            if g.block_size.is_some() {
                m.block_size = g.block_size;
            }
            if g.budget.is_some() {
                m.budget = g.budget;
            }
            if g.max_in_system.is_some() {
                m.max_in_system = g.max_in_system;
            }
            if g.overhead_ms.is_some() {
                m.overhead_ms = g.overhead_ms;
            }
            if let Some(c) = &g.cost {
                // a cost file is found beside the fleet file unless the path is absolute
                let rel = dir.join(c);
                m.cost = Some(
                    if !c.contains(':') && !Path::new(c).is_absolute() && rel.exists() {
                        rel.display().to_string()
                    } else {
                        c.clone()
                    },
                );
            }
            if g.kv.is_some() {
                m.roofline_kv = false;
            }
            groups.push((at, m, g.batch, g.kv, g.count));
        }
        if total > MAX_REPLICAS as u64 {
            return Err(ArgError::Conflict(format!(
                "--fleet {shown}: {total} replicas; a fleet has at most 4096"
            ))
            .into());
        }
        Ok(Some(Fleet {
            router: cli_router.or(file_router).unwrap_or_default(),
            groups,
        }))
    }
}

impl Fleet {
    /// The fleet at one grid point: `base` (the command line's configuration at `p`) as
    /// the fleet's workload and run settings, each group's replicas checked as its own
    /// command line would be, then the engine's fleet check.
    ///
    /// # Errors
    /// [`ArgError`] or the engine's message, prefixed by the group it came from.
    pub fn config(
        &self,
        base: &SimConfig,
        p: Point,
        flags: PointFlags,
        scope: Scope,
    ) -> anyhow::Result<FleetConfig> {
        let mut replicas = Vec::new();
        for (at, m, batch, kv, count) in &self.groups {
            let q = Point {
                batch: batch.unwrap_or(p.batch),
                kv: kv.unwrap_or(p.kv),
                ..p
            };
            let one = if at == "--replicas" {
                Replica {
                    server: base.server.clone(),
                    cost: base.cost.clone(),
                }
            } else {
                let c = m.config(q, flags, scope).with_context(|| at.clone())?;
                Replica {
                    server: c.server,
                    cost: c.cost,
                }
            };
            replicas.extend(std::iter::repeat_n(one, *count as usize));
        }
        let cfg = FleetConfig {
            base: base.clone(),
            replicas,
            router: self.router,
            client: engine::fleet::Client::Open,
        };
        cfg.validate_with(&m_limits(&self.groups, scope))
            .context("invalid fleet")?;
        Ok(cfg)
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.groups.iter().map(|g| g.4 as usize).sum()
    }

    /// Never: a fleet has at least one replica.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn m_limits(groups: &[GroupArgs], scope: Scope) -> engine::limits::Limits {
    groups[0].1.work_limits(scope)
}
