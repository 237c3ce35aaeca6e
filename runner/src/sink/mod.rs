//! Sinks: the batcher, Stream Load into Doris, the sink table's DDL and schema, its rebuild after
//! a re-initialisation, and the stdout sink.

pub mod batcher;
pub mod create_table;
mod digits;
pub mod encode;
pub use dcs_crds::label;
pub mod rebuild;
pub mod schema;
pub mod stdout;
