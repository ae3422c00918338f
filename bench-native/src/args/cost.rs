//! `--cost`: the reference cost, the measured A10G table, a roofline preset, or a cost
//! model file written by `bench-native fit`.

use anyhow::{bail, Context};
use engine::cost::{BatchShape, CostModel, TableCost};

/// `GPU:MODEL[:MEM_UTIL[:TP]]` → the roofline cost model and the KV capacity [tokens].
pub fn roofline(spec: &str) -> anyhow::Result<(CostModel, u64)> {
    let parts: Vec<&str> = spec.split(':').collect();
    if parts.len() < 2 || parts.len() > 4 {
        let gpus: Vec<&str> = engine::cost::roofline::GPUS
            .iter()
            .map(|g| g.name)
            .collect();
        let models: Vec<&str> = engine::cost::roofline::MODELS
            .iter()
            .map(|m| m.name)
            .collect();
        bail!(
            "--cost roofline:GPU:MODEL[:MEM_UTIL[:TP]]; GPUs: {}; models: {}",
            gpus.join(", "),
            models.join(", ")
        );
    }
    let util = parts
        .get(2)
        .map_or(Ok(0.9), |x| x.parse::<f64>())
        .context("MEM_UTIL must be a number")?;
    let tp = parts
        .get(3)
        .map_or(Ok(1), |x| x.parse::<u32>())
        .context("TP must be an integer")?;
    Ok(engine::cost::RooflineCost::preset(
        parts[0], parts[1], util, tp,
    )?)
}

/// The overheads a cost file gives beside its model (docs/model.md, Overheads): `fit`'s
/// `overhead_s`, `overhead_per_token_s` and `step_overhead_s`; all 0 for a bare model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overheads {
    /// Front-end delay per request [s] (`ServerConfig::overhead_s`).
    pub request_s: f64,
    /// Front-end delay per prompt token [s] (`ServerConfig::overhead_per_token_s`).
    pub per_token_s: f64,
    /// Scheduling overhead per engine step [s] (`ServerConfig::step_overhead_s`).
    pub step_s: f64,
    /// The wake-up after idle: (idle [s], extra time of the next step [s]) points
    /// (`ServerConfig::idle_wake`).
    pub idle_wake: Vec<(f64, f64)>,
}

impl Overheads {
    /// Sets them on `server`.
    pub fn apply(&self, server: &mut engine::config::ServerConfig) {
        server.overhead_s = self.request_s;
        server.overhead_per_token_s = self.per_token_s;
        server.step_overhead_s = self.step_s;
        server.idle_wake.clone_from(&self.idle_wake);
    }
}

/// `reference`, `a10g`, or a JSON file holding a CostModel, or an object of them as `fit`
/// writes (`{"ubatch": …, "table": …, "linear": …, "default": "ubatch", "overhead_s": …}`):
/// the model its `default` names (`fit`: the one whose form matches the server), else its
/// `ubatch` model, else `table`, else `linear`; `FILE#linear` (or `#table`, `#ubatch`)
/// picks one. Returns the model and the overheads the file gives (`fit`'s `overhead_s`,
/// `overhead_per_token_s`, `step_overhead_s`, `idle_wake_s`; none otherwise).
pub fn load_cost(spec: &str) -> anyhow::Result<(CostModel, Overheads)> {
    match spec {
        "reference" => Ok((CostModel::default(), Overheads::default())),
        "a10g" => Ok((
            CostModel::Table(TableCost::a10g_qwen_1_5b()),
            Overheads::default(),
        )),
        spec => {
            let (path, kind) = match spec.rsplit_once('#') {
                Some((p, k)) => (p, Some(k)),
                None => (spec, None),
            };
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading cost model {path}"))?;
            parse_cost(&text, path, kind)
        }
    }
}

/// Batch shapes every accepted cost model must price at a finite, non-negative time: pure
/// decodes of 1 to 1024 sequences, a one-token and a million-token prompt alone, and a
/// heavy mixed iteration (1024 sequences, a million prompt tokens, ten million tokens of
/// context).
pub fn probes() -> Vec<BatchShape> {
    let mut v: Vec<BatchShape> = [1u32, 2, 8, 64, 256, 1024]
        .into_iter()
        .map(|n| BatchShape {
            running: n,
            decode_seqs: n,
            context_tokens: u64::from(n) * 8192,
            decode_ubatches: n,
            max_context_tokens: 8192,
            ..BatchShape::default()
        })
        .collect();
    for tokens in [1u64, 1 << 20] {
        v.push(BatchShape {
            running: 1,
            prefill_tokens: tokens,
            prefill_seqs: 1,
            prefill_attn: tokens * tokens,
            max_context_tokens: tokens,
            ..BatchShape::default()
        });
    }
    v.push(BatchShape {
        running: 1024,
        prefill_tokens: 1 << 20,
        prefill_seqs: 8,
        decode_seqs: 1016,
        context_tokens: 10_000_000,
        prefill_attn: 1 << 36,
        decode_ubatches: 1016,
        max_context_tokens: 1 << 17,
    });
    v
}

/// The cost model in `text` (the contents of the file `path`, for messages), as
/// [`load_cost`] reads it; `kind` is the `#linear`-style pick. The model must validate and
/// price the [`probes`] at finite, non-negative times.
///
/// # Errors
/// Not JSON, no such model, not a cost model, invalid, or non-finite / negative times.
pub fn parse_cost(
    text: &str,
    path: &str,
    kind: Option<&str>,
) -> anyhow::Result<(CostModel, Overheads)> {
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{path} is not JSON"))?;
    let field = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_f64)
            .filter(|x| x.is_finite() && *x >= 0.0)
            .unwrap_or(0.0)
    };
    let idle_wake: Vec<(f64, f64)> = match v.get("idle_wake_s") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(w) => serde_json::from_value(w.clone()).with_context(|| {
            format!("{path}: \"idle_wake_s\" must be [[idle seconds, extra seconds], …]")
        })?,
    };
    let overhead = Overheads {
        request_s: field("overhead_s"),
        per_token_s: field("overhead_per_token_s"),
        step_s: field("step_overhead_s"),
        idle_wake,
    };
    let pick = match kind {
        Some(k) => v
            .get(k)
            .cloned()
            .with_context(|| format!("{path} has no \"{k}\" model"))?,
        None if v.get("kind").is_some() => v,
        // `fit` names the model whose form matches the server (`default`); older files
        // and hand-written ones fall back to the first of these they hold.
        None => v
            .get("default")
            .and_then(serde_json::Value::as_str)
            .into_iter()
            .chain(["ubatch", "table", "linear"])
            .find_map(|k| v.get(k).cloned())
            .with_context(|| {
                format!("{path}: expected a CostModel (with \"kind\") or an object with \"ubatch\"/\"table\"/\"linear\"")
            })?,
    };
    let m: CostModel =
        serde_json::from_value(pick).with_context(|| format!("{path}: not a cost model"))?;
    m.validate()?;
    for b in &probes() {
        let t = m.iteration(b);
        if !(t.is_finite() && t >= 0.0) {
            bail!(
                "{path}: the cost model prices an iteration of {} sequences, {} prompt tokens \
                 and {} context tokens at {t} s; its coefficients must give finite, \
                 non-negative times",
                b.running,
                b.prefill_tokens,
                b.context_tokens
            );
        }
    }
    Ok((m, overhead))
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::cost::LinearCost;
    use proptest::prelude::*;

    #[test]
    fn a_fit_file_gives_its_ubatch_model_and_overhead_unless_told_otherwise() {
        let fit = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/llama_server_fit.json"
        );
        let (m, o) = load_cost(fit).unwrap();
        let overhead = o.request_s;
        assert!(matches!(m, CostModel::Ubatch(_)), "{m:?}");
        assert!(overhead > 0.0 && overhead < 0.01, "{overhead}");
        let (l, o) = load_cost(&format!("{fit}#linear")).unwrap();
        assert!(matches!(l, CostModel::Linear(_)) && o.request_s == overhead);
        assert!(matches!(
            load_cost(&format!("{fit}#table")).unwrap().0,
            CostModel::Table(_)
        ));
        let e = load_cost(&format!("{fit}#nope")).unwrap_err();
        assert!(format!("{e:#}").contains("no \"nope\" model"), "{e:#}");
        // a bare model file has no overhead
        let bare = fit.replace("fit.json", "fit.linear.json");
        assert_eq!(load_cost(&bare).unwrap().1, Overheads::default());
    }

    /// `default` picks the model; `idle_wake_s` comes with the overheads and reaches the
    /// server; a malformed one is refused by name.
    #[test]
    fn a_fit_file_names_its_default_model_and_wake_up() {
        let lin = LinearCost {
            beta0: 2e-3,
            beta_prefill: 1e-4,
            ..LinearCost::default()
        };
        let table =
            serde_json::json!({"kind": "table", "decode": [[1.0, 0.01]], "prefill": [[1.0, 0.01]]});
        let text = serde_json::json!({
            "linear": CostModel::Linear(lin), "table": table, "default": "linear",
            "idle_wake_s": [[0.0, 0.0], [1.0, 0.004]],
        })
        .to_string();
        let (m, o) = parse_cost(&text, "fit.json", None).unwrap();
        assert!(matches!(m, CostModel::Linear(_)), "{m:?}");
        assert_eq!(o.idle_wake, vec![(0.0, 0.0), (1.0, 0.004)]);
        let mut server = engine::config::ServerConfig::default();
        o.apply(&mut server);
        assert_eq!(server.wake_s(5.0), 0.004);
        // a default it does not hold falls back to the usual order
        let text = text.replace("\"default\":\"linear\"", "\"default\":\"ubatch\"");
        let (m, _) = parse_cost(&text, "fit.json", None).unwrap();
        assert!(matches!(m, CostModel::Table(_)), "{m:?}");
        let bad = text.replace("[[0.0,0.0],[1.0,0.004]]", "\"soon\"");
        let e = parse_cost(&bad, "fit.json", None).unwrap_err().to_string();
        assert!(e.contains("idle_wake_s"), "{e}");
    }

    /// A coefficient: mostly sensible, sometimes negative, zero, huge or tiny.
    fn coef() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => 0.0..1e-2f64,
            1 => Just(0.0),
            1 => -1.0..0.0f64,
            1 => Just(1e300),
            1 => Just(f64::MAX),
            1 => Just(5e-324),
        ]
    }

    /// Every accepted model prices the probes and a few more shapes at finite, >= 0 times.
    fn sensible(m: &CostModel) -> Result<(), TestCaseError> {
        for n in [1u32, 8, 256] {
            let t = m.decode_step(n, u64::from(n) * 512);
            prop_assert!(t.is_finite() && t >= 0.0, "decode {} -> {}", n, t);
        }
        for b in &probes() {
            let t = m.iteration(b);
            prop_assert!(t.is_finite() && t >= 0.0, "{:?} -> {}", b, t);
        }
        Ok(())
    }

    /// Equal but for the last bit of each number: serde_json's default float parser does
    /// not always give back the nearest double of what it wrote.
    fn close(a: &CostModel, b: &CostModel) -> Result<(), TestCaseError> {
        let (a, b) = (
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap(),
        );
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        prop_assert_eq!(a.len(), b.len());
        for (k, x) in a {
            let y = &b[k];
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => prop_assert!((x - y).abs() <= x.abs() * 1e-15, "{}", k),
                _ => prop_assert_eq!(x, y),
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn never_panics_on_any_text(text in "(?s).{0,300}") {
            let _ = parse_cost(&text, "x.json", None);
            let _ = parse_cost(&text, "x.json", Some("linear"));
        }

        /// JSON of the right shape with any numbers: accepted only if sensible.
        #[test]
        fn what_is_accepted_is_sensible(
            b in prop::array::uniform6(coef()),
            tile in any::<u32>(),
            kind in prop_oneof![Just("linear"), Just("reference"), Just("table"), Just("ubatch")],
            overhead in prop_oneof![coef(), Just(-1.0)],
            wrap in any::<bool>(),
        ) {
            let model = serde_json::json!({
                "kind": kind,
                "beta0": b[0], "beta_prefill": b[1], "beta_decode": b[2],
                "beta_kv": b[3], "beta_attn": b[4], "beta_mixed": b[5], "attn_tile": tile,
                "prefill_base_s": b[0], "prefill_per_token_s": b[1], "decode_base_s": b[2],
                "decode_per_batch_s": b[3], "batch_coef": b[4], "batch_exp": b[5],
            });
            let text = if wrap {
                serde_json::json!({ "linear": model, "overhead_s": overhead }).to_string()
            } else {
                model.to_string()
            };
            if let Ok((m, o)) = parse_cost(&text, "x.json", None) {
                sensible(&m)?;
                prop_assert!(o.request_s.is_finite() && o.request_s >= 0.0);
            }
        }

        /// Tables of any points: accepted only if sensible (a falling table extrapolates
        /// below zero past its last point; the probes catch it).
        #[test]
        fn accepted_tables_are_sensible(
            decode in prop::collection::vec((0.0..300.0f64, coef()), 0..5),
            prefill in prop::collection::vec((0.0..1e5f64, coef()), 0..5),
            sorted in any::<bool>(),
        ) {
            let (mut decode, mut prefill) = (decode, prefill);
            if sorted {
                decode.sort_by(|a, b| a.0.total_cmp(&b.0));
                prefill.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            let text = serde_json::json!({ "kind": "table", "decode": decode, "prefill": prefill })
                .to_string();
            if let Ok((m, _)) = parse_cost(&text, "x.json", None) {
                sensible(&m)?;
            }
        }

        /// A sensible linear model written as `fit` writes it reads back equal, with its
        /// overhead.
        #[test]
        fn valid_models_round_trip(
            b in prop::array::uniform6(0.0..1e-2f64),
            tile in 0u32..512,
            overhead in 0.0..0.1f64,
        ) {
            let m = CostModel::Linear(LinearCost {
                beta0: b[0] + 1e-6,
                beta_prefill: b[1],
                beta_decode: b[2],
                beta_kv: b[3],
                beta_attn: b[4],
                attn_tile: tile,
                beta_mixed: b[5],
            });
            let bare = serde_json::to_string(&m).unwrap();
            let (back, o) = parse_cost(&bare, "x.json", None).unwrap();
            prop_assert_eq!(o, Overheads::default());
            close(&back, &m)?;
            let fit = serde_json::json!({ "linear": m, "overhead_s": overhead }).to_string();
            let (back, o) = parse_cost(&fit, "x.json", None).unwrap();
            close(&back, &m)?;
            let o = o.request_s;
            prop_assert!((o - overhead).abs() <= overhead * 1e-15, "{} vs {}", o, overhead);
        }
    }

    /// Coefficients each finite but so large that an iteration's time overflows were
    /// accepted (the engine checks each coefficient is finite): refused now.
    #[test]
    fn coefficients_that_overflow_an_iteration_are_refused() {
        let text = r#"{"kind":"linear","beta0":1e-3,"beta_prefill":1e305,"beta_decode":1e-3}"#;
        let e = parse_cost(text, "x.json", None).unwrap_err();
        assert!(
            format!("{e:#}").contains("finite, non-negative times"),
            "{e:#}"
        );
    }

    /// Found by `what_is_accepted_is_sensible`: a reference cost with a huge decode base
    /// and batch coefficient, finite at one sequence, overflows from two on.
    #[test]
    fn a_reference_cost_that_overflows_past_one_sequence_is_refused() {
        let text = r#"{"kind":"reference","prefill_base_s":5e-324,"prefill_per_token_s":0.0,
            "decode_base_s":1.7976931348623157e308,"decode_per_batch_s":0.0058,
            "batch_coef":1e300,"batch_exp":0.0}"#;
        let e = parse_cost(text, "x.json", None).unwrap_err();
        assert!(
            format!("{e:#}").contains("finite, non-negative times"),
            "{e:#}"
        );
    }
}
