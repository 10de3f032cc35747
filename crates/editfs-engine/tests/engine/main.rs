//! The edit engine tested through its public API alone: a payload and the file's
//! bytes in, new bytes and a report out. No mount, no process, no privileges, so
//! these tests go with the engine wherever it is built.
//!
//! One binary for all of them, each former test file a module: the crate is linked
//! once, not once per file.

mod agent_payloads;
mod budget_rules;
mod diagnose_bounds;
mod engine_rules;
mod peer_cases;
mod properties;
