//! The tools of a turn: each with its compiled argument validator, found by name.

use std::sync::Arc;

use serde_json::Value;

use crate::truncate::clip;

/// Validator messages reported per call at most (a huge array can fail item by item).
const MAX_ERRORS: usize = 20;
/// Bytes of one validator message kept.
const MAX_ERROR_BYTES: usize = 1024;
use crate::model::ToolSpec;
use crate::tool::{ShownArgument, ToolRef};

/// A tool with its compiled argument validator (a solve tool has no implementation here:
/// the spine runs it).
pub(crate) struct Mounted {
    pub(crate) spec: ToolSpec,
    pub(crate) tool: Option<ToolRef>,
    validator: jsonschema::Validator,
}

/// A tool whose parameters are not a valid JSON Schema (the engine refuses to be built with
/// it: `EngineError::InvalidSchema`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidSchema {
    pub(crate) tool: String,
    pub(crate) message: String,
}

impl Mounted {
    pub(crate) fn new(spec: ToolSpec, tool: Option<ToolRef>) -> Result<Self, InvalidSchema> {
        let validator = jsonschema::validator_for(&spec.parameters).map_err(|e| InvalidSchema {
            tool: spec.name.clone(),
            message: e.to_string(),
        })?;
        Ok(Mounted {
            spec,
            tool,
            validator,
        })
    }

    /// The validator's messages, joined, when the arguments do not fit the schema. Each is
    /// verbatim up to [`MAX_ERROR_BYTES`]: a message quotes the offending value, which may be
    /// megabytes of model output.
    pub(crate) fn validate(&self, args: &Value) -> Result<(), String> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(args)
            .take(MAX_ERRORS)
            .map(|e| {
                let path = e.instance_path().to_string();
                let message = clip(e.to_string(), MAX_ERROR_BYTES);
                if path.is_empty() {
                    message
                } else {
                    format!("{message} at {}", clip(path, MAX_ERROR_BYTES))
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// The tools offered in one turn, by name.
pub(crate) struct Toolbox {
    mounted: Vec<Arc<Mounted>>,
}

impl Toolbox {
    pub(crate) fn new(mounted: Vec<Arc<Mounted>>) -> Self {
        Toolbox { mounted }
    }

    /// The tools as the model is offered them ([`ToolSpec::as_offered`]); calls are checked
    /// against the tools' whole schemas.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        self.mounted.iter().map(|m| m.spec.as_offered()).collect()
    }

    /// The work tools' implementations (for turn start/finish hooks).
    pub(crate) fn work_tools(&self) -> impl Iterator<Item = &ToolRef> {
        self.mounted.iter().filter_map(|m| m.tool.as_ref())
    }

    /// The names of the tools that have an implementation here (not the solve tools).
    pub(crate) fn work_tool_names(&self) -> impl Iterator<Item = &str> {
        self.mounted
            .iter()
            .filter(|m| m.tool.is_some())
            .map(|m| m.spec.name.as_str())
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.mounted.iter().map(|m| m.spec.name.clone()).collect()
    }

    /// Exact name first, then a unique case-insensitive match.
    pub(crate) fn resolve(&self, name: &str) -> Option<&Arc<Mounted>> {
        let name = name.trim();
        if let Some(m) = self.mounted.iter().find(|m| m.spec.name == name) {
            return Some(m);
        }
        let mut ci = self
            .mounted
            .iter()
            .filter(|m| m.spec.name.eq_ignore_ascii_case(name));
        match (ci.next(), ci.next()) {
            (Some(m), None) => Some(m),
            _ => None,
        }
    }

    /// The argument a front end shows first of a call to `name` (its tool says).
    pub(crate) fn shown_argument(&self, name: &str) -> Option<ShownArgument> {
        self.resolve(name)?.tool.as_ref()?.shown_argument()
    }

    /// A call names a work tool (not a solve tool) this turn offers.
    pub(crate) fn is_work_tool(&self, name: &str) -> bool {
        self.resolve(name)
            .is_some_and(|m| !crate::solve::is_solve_tool(&m.spec.name))
    }
}
