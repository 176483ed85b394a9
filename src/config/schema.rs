//! The JSON Schema of `manent.yml` and of application files, from the loader's own types
//! (`schemars` derives on every type the YAML is read into), so it cannot drift from what
//! manent accepts: `manent schema config|app` prints it for an editor (yaml-language-server).
//! The types read by hand-written deserializers — durations, sizes, rates, steps, hooks, the
//! `plugins:` map — say here which forms they take. What a schema cannot say (a plugin or secret
//! that must be declared elsewhere, names unique across a list, weights that rise) is checked by
//! `manent validate`, which names file:line:col.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::canary::{AnalysisSpec, CanarySpec, Empty, PauseSpec, StepSpec, Steps, WeightSpec};
use super::descriptor::DescriptorFile;
use super::hooks::{
    EVENTS, Event, EventSpec, HookSpec, HooksSpec, OnFailureSpec, POLICIES, PolicySpec, WEIGHTS,
};
use super::manent_file::{ExternalDecl, ManentFile, Plugins, SecretSpec, Sha256Hex};
use super::strategy::{RollingSpec, StrategySpec};
use super::values::{
    Dur, HeaderName, HeaderValue, ParamsSpec, PluginRef, Rate, SecretName, Size, VersionSpec,
};

/// The schema of `manent.yml`.
pub fn config() -> Schema {
    titled::<ManentFile>("manent.yml: manent's engine configuration")
}

/// The schema of an application file (`apps/*.yml`).
pub fn app() -> Schema {
    titled::<DescriptorFile>("a manent application file")
}

/// Draft 7: what editors read in full (yaml-language-server and VS Code's JSON service
/// support later drafts only in part).
fn titled<T: JsonSchema>(title: &str) -> Schema {
    let mut s = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    s.insert("title".into(), title.into());
    s
}

/// A type whose YAML is a string of one form.
macro_rules! string_schema {
    ($t:ty, $name:literal, $schema:tt) => {
        impl JsonSchema for $t {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

string_schema!(Dur, "Duration", {
    "type": "string",
    "pattern": "^\\s*([0-9]+\\s*[a-zA-Zµ]+\\s*)+$",
    "description": "A duration: 500ms, 30s, 5m, 1h30m.",
    "examples": ["30s", "5m", "1h30m"]
});
string_schema!(VersionSpec, "Version", {
    "type": "string",
    "pattern": "^[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}$",
    "description": "A version, as the artifact is named (`2.4.0`); quote one YAML would read as a number (\"1.10\")."
});
string_schema!(PluginRef, "PluginName", {
    "type": "string",
    "minLength": 1,
    "description": "A plugin: built in, declared under `plugins:` in manent.yml, or installed as `manent-plugin-NAME` (manent validate checks which)."
});
string_schema!(SecretName, "SecretName", {
    "type": "string",
    "minLength": 1,
    "description": "A secret declared under `secrets:` in manent.yml (manent validate checks it is)."
});
string_schema!(HeaderName, "HeaderName", {
    "type": "string",
    "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
    "description": "An HTTP header's name."
});
string_schema!(HeaderValue, "HeaderValue", {
    "type": "string",
    "pattern": "^[^\\r\\n]*$",
    "description": "An HTTP header's value, on one line; `${secret:NAME}` is read from `secrets:` when sent."
});
string_schema!(SecretSpec, "SecretSource", {
    "type": "string",
    "pattern": "^(env:[A-Za-z_][A-Za-z0-9_]*|file:.+|value:.*)$",
    "description": "Where a secret is read: env:NAME or file:/path."
});
string_schema!(Sha256Hex, "Sha256", {
    "type": "string",
    "pattern": "^[0-9a-fA-F]{64}$",
    "description": "A sha256 digest, 64 hex digits, as `sha256sum` prints it."
});
impl JsonSchema for EventSpec {
    fn schema_name() -> Cow<'static, str> {
        "HookEvent".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let events = EVENTS.map(Event::as_str);
        json_schema!({"type": "string", "enum": events, "description": "When a hook runs."})
    }
}

impl JsonSchema for PolicySpec {
    fn schema_name() -> Cow<'static, str> {
        "DeletePolicy".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "enum": POLICIES})
    }
}

string_schema!(OnFailureSpec, "OnFailure", {
    "type": "string",
    "enum": ["fail", "continue"],
    "description": "What a failed hook does to the deployment (default fail)."
});

impl JsonSchema for Size {
    fn schema_name() -> Cow<'static, str> {
        "Size".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A size: a number of bytes, or 512KB, 64MB, 1GB (KiB, MiB, GiB too).",
            "oneOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^\\s*[0-9]+\\s*([bB]|[kKmMgG]([iI]?[bB])?)?\\s*$"}
            ]
        })
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A share: a percentage (1%, 0.5%) or a fraction (0.01).",
            "oneOf": [
                {"type": "number", "minimum": 0, "maximum": 1},
                {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*%?\\s*$"}
            ]
        })
    }
}

impl JsonSchema for ParamsSpec {
    fn schema_name() -> Cow<'static, str> {
        "PluginParams".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The plugin's parameters: what each plugin takes is its own (manent validate asks it)."
        })
    }
}

impl JsonSchema for StrategySpec {
    fn schema_name() -> Cow<'static, str> {
        "Strategy".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let rolling = g.subschema_for::<RollingSpec>();
        let canary = g.subschema_for::<CanarySpec>();
        json_schema!({
            "description": "How targets are batched: all at once, rolling, or a canary behind a router.",
            "oneOf": [
                {"type": "string", "enum": ["all", "rolling"]},
                {"type": "object", "properties": {"all": {}}, "required": ["all"], "additionalProperties": false},
                {"type": "object", "properties": {"rolling": rolling}, "required": ["rolling"], "additionalProperties": false},
                {"type": "object", "properties": {"canary": canary}, "required": ["canary"], "additionalProperties": false}
            ]
        })
    }
}

impl JsonSchema for Steps {
    fn schema_name() -> Cow<'static, str> {
        "CanarySteps".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let step = g.subschema_for::<StepSpec>();
        json_schema!({
            "type": "array",
            "items": step,
            "description": "The canary's steps in order; weights rise unless a step says `down: true`."
        })
    }
}

impl JsonSchema for StepSpec {
    fn schema_name() -> Cow<'static, str> {
        "CanaryStep".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let weight = g.subschema_for::<WeightSpec>();
        let pause = g.subschema_for::<PauseSpec>();
        let empty = g.subschema_for::<Empty>();
        let analysis = g.subschema_for::<AnalysisSpec>();
        let one = |key: &str, value: Schema| {
            json_schema!({
                "type": "object",
                "properties": {key: value},
                "required": [key],
                "additionalProperties": false
            })
        };
        json_schema!({
            "description": "One step: weight, pause, scale, testers or analysis.",
            "oneOf": [
                one("weight", weight),
                one("pause", pause),
                one("scale", json_schema!({"type": "integer", "minimum": 0, "maximum": 100})),
                one("testers", empty),
                one("analysis", analysis)
            ]
        })
    }
}

impl JsonSchema for HooksSpec {
    fn schema_name() -> Cow<'static, str> {
        "Hooks".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let hook = g.subschema_for::<HookSpec>();
        json_schema!({
            "type": "array",
            "items": hook,
            "description": "Lifecycle hooks, run in weight order at their events (names unique)."
        })
    }
}

impl JsonSchema for super::hooks::WeightSpec {
    fn schema_name() -> Cow<'static, str> {
        "HookWeight".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let (min, max) = (*WEIGHTS.start(), *WEIGHTS.end());
        json_schema!({
            "description": "The hook's order among its event's hooks, lower first (Helm's weight; a string holding an integer too).",
            "oneOf": [
                {"type": "integer", "minimum": min, "maximum": max},
                {"type": "string", "pattern": "^\\s*-?[0-9]+\\s*$"}
            ]
        })
    }
}

impl JsonSchema for Plugins {
    fn schema_name() -> Cow<'static, str> {
        "Plugins".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let external = g.subschema_for::<ExternalDecl>();
        json_schema!({
            "description": "Plugins by the name applications use: a built-in's options, `builtin: NAME` for another instance of one, or `external: {command: …}` for a plugin binary; other keys are the plugin's options.",
            "type": ["object", "null"],
            "additionalProperties": {
                "type": ["object", "null"],
                "properties": {
                    "builtin": {"type": "string"},
                    "external": external
                }
            }
        })
    }
}
