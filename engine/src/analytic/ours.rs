//! Our model (placeholder while it is written).
use super::{AnalyticError, Prediction};
use crate::config::SimConfig;

/// Our model.
#[derive(Clone, Debug, PartialEq)]
pub struct Ours {
    cfg: SimConfig,
}

impl Ours {
    /// # Errors
    /// Never yet.
    pub fn from_config(cfg: &SimConfig) -> Result<Ours, AnalyticError> {
        Ok(Ours { cfg: cfg.clone() })
    }

    /// # Errors
    /// Unsupported for now.
    pub fn prediction(&self) -> Result<Prediction, AnalyticError> {
        Err(AnalyticError::Unsupported { model: "ours", what: format!("{:?}", self.cfg.server.policy) })
    }
}
