//! The source side: reading a Doris table's snapshot and its changelog
//! (docs/ARCHITECTURE.md §3.2, §3.3).
//!
//! I/O lives in [`fe_http`] (FE HTTP API), [`flight`] (Arrow Flight SQL), [`properties`] (MySQL)
//! and the readers [`snapshot`] and [`changelog`]; the decisions they take (windows, SQL text,
//! splits, row kinds, property parsing) are pure functions next to them, tested without Doris.

pub mod changelog;
pub mod datetime;
pub mod fe_http;
pub mod flight;
pub mod properties;
pub mod resumable;
pub mod resume;
pub mod retention;
pub mod row_kind;
pub mod seam;
pub mod snapshot;
pub mod tso;
pub mod visibility;
