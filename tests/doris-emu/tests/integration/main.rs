//! Integration tests of dcs-doris-emu over its real protocols (MySQL, HTTP, Arrow Flight SQL).
//!
//! One test binary per crate: every file here is a module of it, so the workspace links one
//! executable per crate instead of one per file (link time and disk on CI). Run one file's tests
//! with `cargo test -p dcs-doris-emu --test integration <module>::`.

mod binary;
mod common;
mod flight_sql;
mod http_fe;
mod http_stream_load;
mod mysql_protocol;
mod replace_table;
mod sql_exec;
mod tls;
