//! Loading a term agent: compile (or load from the cache), tell term2 from term1 by what the
//! component exports, and pre-instantiate it with the term linker. A component that exports
//! neither world is refused here, with a message naming both, not at its first task.

use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;

use super::TermVersion;
use super::context::{TermHost, add_to_linker};
use crate::agent;
use crate::bindings::{term1, term2};
use crate::host::HostState;
use crate::runtime::Runtime;

pub(super) enum Pre {
    Term2(term2::AgentPre<HostState<TermHost>>),
    Term1(term1::AgentPre<HostState<TermHost>>),
}

/// A loaded (compiled, linked) term agent component. Cheap to clone.
#[derive(Clone)]
pub struct TermAgent {
    pub(super) name: String,
    pub(super) pre: Arc<Pre>,
}

impl Runtime {
    /// Loads a term agent component (compiled once and cached like every program) and
    /// finds which SDK it was written for. A component that exports neither world is
    /// refused.
    pub async fn term_agent(&self, name: &str, wasm: impl Into<Bytes>) -> Result<TermAgent> {
        let component = agent::compile(self, name, wasm.into(), None).await?;
        let version =
            version_of(&agent::exported_functions(self, &component)).with_context(|| {
                format!(
                    "`{name}` is not a term agent: it must export the functions of world \
                 `wasbox:term/agent@2.0.0` (setup, run, cleanup) or of world \
                 `wasbox:term/agent@1.0.0` (setup, solve, cleanup)"
                )
            })?;
        let pre = agent::prepare(
            self,
            name,
            &component,
            add_to_linker,
            version.world(),
            |pre| match version {
                TermVersion::Term2 => term2::AgentPre::new(pre).map(Pre::Term2),
                TermVersion::Term1 => term1::AgentPre::new(pre).map(Pre::Term1),
            },
        )?;
        Ok(TermAgent {
            name: name.to_string(),
            pre: Arc::new(pre),
        })
    }
}

/// term2 exports `run`, term1 `solve`.
fn version_of(funcs: &[String]) -> Result<TermVersion> {
    let has = |n: &str| funcs.iter().any(|f| f == n);
    match (has("run"), has("solve")) {
        (true, false) => Ok(TermVersion::Term2),
        (false, true) => Ok(TermVersion::Term1),
        (true, true) => bail!("it exports both `run` and `solve`"),
        (false, false) if funcs.is_empty() => bail!("it exports no functions"),
        (false, false) => bail!("it exports only {}", funcs.join(", ")),
    }
}

impl TermAgent {
    pub fn version(&self) -> TermVersion {
        match &*self.pre {
            Pre::Term2(_) => TermVersion::Term2,
            Pre::Term1(_) => TermVersion::Term1,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_told_by_exports() {
        let v = |names: &[&str]| {
            version_of(&names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(|e| e.to_string())
        };
        assert_eq!(v(&["setup", "run", "cleanup"]), Ok(TermVersion::Term2));
        assert_eq!(v(&["setup", "solve", "cleanup"]), Ok(TermVersion::Term1));
        assert_eq!(
            v(&["run", "solve"]).unwrap_err(),
            "it exports both `run` and `solve`"
        );
        assert_eq!(v(&[]).unwrap_err(), "it exports no functions");
        assert_eq!(v(&["main"]).unwrap_err(), "it exports only main");
    }
}
