//! Deployment ids as operators type them: whole, or any unique start or end of one — what a
//! narrow console shows (`3q9xm2p4v8a`; `060248-384f` for an id before 64 random bits), or what
//! was read aloud (`dep-20261202-0602`). Git's rule for short hashes: one match is the id,
//! several are listed, none is said.

use crate::workflow::StoreError;
use crate::workflow::store::{Store, WorkflowQuery};

/// Fewer characters than this are never taken as part of an id (a stray `a` would match).
pub const SHORTEST: usize = 4;

/// What a typed id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// This deployment.
    One(String),
    /// Several: the newest first.
    Many(Vec<String>),
    /// None.
    Nothing,
}

/// The deployment `typed` names, among those in `store`.
pub async fn resolve(store: &dyn Store, typed: &str) -> Result<Found, StoreError> {
    let typed = typed.trim();
    if store.workflow(typed).await?.is_some() {
        return Ok(Found::One(typed.to_owned()));
    }
    if typed.chars().count() < SHORTEST {
        return Ok(Found::Nothing);
    }
    let rows = store
        .workflows(WorkflowQuery {
            subject: None,
            live_only: false,
            limit: 0,
            heads: true,
        })
        .await?;
    let ids: Vec<String> = rows.into_iter().map(|r| r.id).collect();
    Ok(pick(&ids, typed))
}

/// The ids `typed` is the start or the end of.
pub fn pick(ids: &[String], typed: &str) -> Found {
    let mut hits: Vec<String> = ids
        .iter()
        .filter(|id| id.starts_with(typed) || id.ends_with(typed))
        .cloned()
        .collect();
    hits.dedup();
    match hits.len() {
        0 => Found::Nothing,
        1 => Found::One(hits.remove(0)),
        _ => Found::Many(hits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_start_or_end_names_one_and_an_ambiguous_one_lists_them() {
        let ids: Vec<String> = [
            "dep-20261202-060248-384f",
            "dep-20261202-060311-9a0c",
            "dep-20261201-230000-384f",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            pick(&ids, "060248-384f"),
            Found::One("dep-20261202-060248-384f".into())
        );
        assert_eq!(
            pick(&ids, "dep-20261202-0603"),
            Found::One("dep-20261202-060311-9a0c".into())
        );
        assert_eq!(
            pick(&ids, "384f"),
            Found::Many(vec![
                "dep-20261202-060248-384f".into(),
                "dep-20261201-230000-384f".into()
            ])
        );
        assert_eq!(pick(&ids, "zzzz"), Found::Nothing);
    }
}
