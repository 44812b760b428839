//! A policy's typed parameters: what each accepts, its default, and the
//! check of what a scenario gives against them.
//!
//! Invariant: a [`Params`] built by [`Params::validate`] holds exactly the
//! entry's parameters, each of its declared kind and within its limits, so
//! a policy's `build` reads them without checking again (an accessor of an
//! undeclared name or the wrong kind is a bug in the policy, and panics).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::PolicyInfo;

/// One parameter of a policy.
#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    /// What it means, with its unit.
    pub doc: &'static str,
    pub kind: ParamKind,
}

/// What a parameter accepts, and its default.
#[derive(Debug, Clone, Copy)]
pub enum ParamKind {
    /// A number from `min` to `max` (integers are numbers too).
    Float {
        min: f64,
        max: f64,
        default: f64,
    },
    /// A whole number from `min` to `max`.
    Int {
        min: i64,
        max: i64,
        default: i64,
    },
    Bool {
        default: bool,
    },
    /// One of `choices`.
    Choice {
        choices: &'static [&'static str],
        default: &'static str,
    },
}

impl ParamKind {
    /// What it accepts, as an error message says it.
    pub fn accepts(&self) -> String {
        match self {
            ParamKind::Float { min, max, .. } => format!("a number from {min} to {max}"),
            ParamKind::Int { min, max, .. } => format!("a whole number from {min} to {max}"),
            ParamKind::Bool { .. } => "true or false".into(),
            ParamKind::Choice { choices, .. } => format!("one of {}", choices.join(", ")),
        }
    }

    pub fn default_value(&self) -> ParamValue {
        match *self {
            ParamKind::Float { default, .. } => ParamValue::Float(default),
            ParamKind::Int { default, .. } => ParamValue::Int(default),
            ParamKind::Bool { default } => ParamValue::Bool(default),
            ParamKind::Choice { default, .. } => ParamValue::Str(default.to_string()),
        }
    }

    /// `v` as this kind, or `None` when it is not one it accepts.
    fn accept(&self, v: &ParamValue) -> Option<ParamValue> {
        match (self, v) {
            (ParamKind::Float { min, max, .. }, ParamValue::Float(x))
                if x.is_finite() && (*min..=*max).contains(x) =>
            {
                Some(ParamValue::Float(*x))
            }
            (ParamKind::Float { min, max, .. }, ParamValue::Int(i))
                if (*min..=*max).contains(&(*i as f64)) =>
            {
                Some(ParamValue::Float(*i as f64))
            }
            (ParamKind::Int { min, max, .. }, ParamValue::Int(i)) if (*min..=*max).contains(i) => {
                Some(ParamValue::Int(*i))
            }
            (ParamKind::Bool { .. }, ParamValue::Bool(b)) => Some(ParamValue::Bool(*b)),
            (ParamKind::Choice { choices, .. }, ParamValue::Str(s)) if choices.contains(&s.as_str()) => {
                Some(ParamValue::Str(s.clone()))
            }
            _ => None,
        }
    }
}

/// A parameter's value as a scenario gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Str(s) => write!(f, "\"{s}\""),
        }
    }
}

/// A parameter that was refused: which (`None`: the policy itself) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    pub param: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.param {
            Some(p) => write!(f, "{p}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ParamError {}

/// A policy's parameters, validated, with every default filled in.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Params(BTreeMap<&'static str, ParamValue>);

impl Params {
    /// `given` checked against `info.params`: each known (else the error
    /// lists the parameters that exist), each of its kind and within its
    /// limits (else the error says what it accepts and what was found);
    /// the rest take their defaults.
    pub fn validate(info: &PolicyInfo, given: &[(String, ParamValue)]) -> Result<Params, ParamError> {
        let mut out = BTreeMap::new();
        for (name, value) in given {
            let Some(p) = info.params.iter().find(|p| p.name == name) else {
                let known: Vec<&str> = info.params.iter().map(|p| p.name).collect();
                let message = if known.is_empty() {
                    format!("unknown parameter `{name}`: policy {} takes none", info.name)
                } else {
                    format!(
                        "unknown parameter `{name}` of policy {}; its parameters: {}",
                        info.name,
                        known.join(", ")
                    )
                };
                return Err(ParamError { param: Some(name.clone()), message });
            };
            let v = p.kind.accept(value).ok_or_else(|| ParamError {
                param: Some(name.clone()),
                message: format!("expected {}; found {value}", p.kind.accepts()),
            })?;
            out.insert(p.name, v);
        }
        for p in info.params {
            out.entry(p.name).or_insert_with(|| p.kind.default_value());
        }
        Ok(Params(out))
    }

    /// Every parameter's defaults, for a policy given none.
    pub fn defaults(info: &PolicyInfo) -> Params {
        Params::validate(info, &[]).expect("no parameter given: nothing to refuse")
    }

    fn get(&self, name: &str) -> &ParamValue {
        self.0.get(name).unwrap_or_else(|| panic!("the policy reads `{name}`, which it does not declare"))
    }

    pub fn f64(&self, name: &str) -> f64 {
        match self.get(name) {
            ParamValue::Float(x) => *x,
            v => panic!("parameter `{name}` is {v}, not a number"),
        }
    }

    pub fn i64(&self, name: &str) -> i64 {
        match self.get(name) {
            ParamValue::Int(i) => *i,
            v => panic!("parameter `{name}` is {v}, not a whole number"),
        }
    }

    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            ParamValue::Bool(b) => *b,
            v => panic!("parameter `{name}` is {v}, not true or false"),
        }
    }

    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            ParamValue::Str(s) => s,
            v => panic!("parameter `{name}` is {v}, not a choice"),
        }
    }

    /// (name, value), by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &ParamValue)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }
}

/// `NAME=VALUE` as a parameter: a boolean, a whole number, a number, or
/// else a word.
pub fn parse_param(text: &str) -> Result<(String, ParamValue), String> {
    let (name, value) = text
        .split_once('=')
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| format!("--param {text}: expected NAME=VALUE"))?;
    let v = match value {
        "true" => ParamValue::Bool(true),
        "false" => ParamValue::Bool(false),
        _ => match (value.parse::<i64>(), value.parse::<f64>()) {
            (Ok(i), _) => ParamValue::Int(i),
            (_, Ok(x)) if x.is_finite() => ParamValue::Float(x),
            _ => ParamValue::Str(value.to_string()),
        },
    };
    Ok((name.to_string(), v))
}
