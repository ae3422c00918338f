//! `--cost`: the reference cost, the measured A10G table, a roofline preset, or a cost
//! model file written by `bench-native fit`.

use anyhow::{bail, Context};
use engine::cost::{CostModel, TableCost};

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

/// `reference`, `a10g`, or a JSON file holding a CostModel, or an object of them as `fit`
/// writes (`{"ubatch": …, "table": …, "linear": …, "overhead_s": …}`): its `ubatch` model
/// (the one `validate` predicts with), else `table`, else `linear`; `FILE#linear` (or
/// `#table`, `#ubatch`) picks one. Returns the model and the per-request overhead [s] the
/// file gives (`fit`'s `overhead_s`; 0 otherwise).
pub fn load_cost(spec: &str) -> anyhow::Result<(CostModel, f64)> {
    match spec {
        "reference" => Ok((CostModel::default(), 0.0)),
        "a10g" => Ok((CostModel::Table(TableCost::a10g_qwen_1_5b()), 0.0)),
        spec => {
            let (path, kind) = match spec.rsplit_once('#') {
                Some((p, k)) => (p, Some(k)),
                None => (spec, None),
            };
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading cost model {path}"))?;
            let v: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{path} is not JSON"))?;
            let overhead = v
                .get("overhead_s")
                .and_then(serde_json::Value::as_f64)
                .filter(|x| x.is_finite() && *x >= 0.0)
                .unwrap_or(0.0);
            let pick = match kind {
                Some(k) => v
                    .get(k)
                    .cloned()
                    .with_context(|| format!("{path} has no \"{k}\" model"))?,
                None if v.get("kind").is_some() => v,
                None => ["ubatch", "table", "linear"]
                    .iter()
                    .find_map(|k| v.get(*k).cloned())
                    .with_context(|| {
                        format!("{path}: expected a CostModel (with \"kind\") or an object with \"ubatch\"/\"table\"/\"linear\"")
                    })?,
            };
            let m: CostModel = serde_json::from_value(pick)
                .with_context(|| format!("{path}: not a cost model"))?;
            m.validate()?;
            Ok((m, overhead))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_file_gives_its_ubatch_model_and_overhead_unless_told_otherwise() {
        let fit = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/llama_server_fit.json"
        );
        let (m, overhead) = load_cost(fit).unwrap();
        assert!(matches!(m, CostModel::Ubatch(_)), "{m:?}");
        assert!(overhead > 0.0 && overhead < 0.01, "{overhead}");
        let (l, o) = load_cost(&format!("{fit}#linear")).unwrap();
        assert!(matches!(l, CostModel::Linear(_)) && o == overhead);
        assert!(matches!(
            load_cost(&format!("{fit}#table")).unwrap().0,
            CostModel::Table(_)
        ));
        let e = load_cost(&format!("{fit}#nope")).unwrap_err();
        assert!(format!("{e:#}").contains("no \"nope\" model"), "{e:#}");
        // a bare model file has no overhead
        let bare = fit.replace("fit.json", "fit.linear.json");
        assert_eq!(load_cost(&bare).unwrap().1, 0.0);
    }
}
