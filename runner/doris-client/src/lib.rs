//! Doris as both dcs binaries talk to it (docs/doris-protocols.md §4.1, §4.3): the second
//! phase of a two-phase Stream Load (`PUT /api/{db}/_stream_load_2pc`, commit or abort, by
//! transaction id or by label), and the rules every call to Doris over HTTP follows:
//!
//! - redirects are followed by hand: the FE answers 307 with a `Location` that carries the
//!   credentials, and they are re-sent as a header instead ([`redirect_target`]); a redirect
//!   from `https://` to `http://` is refused ([`is_downgrade`]), and one to a host that is not
//!   a node of the cluster too ([`cluster::ClusterHosts`]);
//! - TLS towards a cluster is set up once and used by its HTTP, MySQL and gRPC connections
//!   ([`tls::Tls`]); every reqwest client is built through it;
//! - error messages never carry a URL ([`without_url`]), which after a redirect may hold them;
//! - an answer's body is read up to [`MAX_ANSWER_BYTES`] ([`read_answer`]), never without end;
//! - a node's host for the FE's other ports is [`host_of`] its `host:port`;
//! - Doris's `/api` envelope and `/api/tso`'s TSO are read one way ([`fe_api`]);
//! - a MySQL connection goes to the first FE that answers, a refused login stopping at once
//!   ([`mysql::connect_first`]);
//! - what an FE answers over MySQL is decoded fallibly ([`mysql`]): an odd answer fails the
//!   operation, never the process; SQL text quotes identifiers and strings one way ([`sql`]);
//! - an FE's MySQL endpoint, for statements and a table's columns and key model, is one client
//!   ([`mysql_target::MysqlTarget`]);
//! - a source table's DDL and properties are read one way ([`table::read_table`]).
//!
//! The runner commits and aborts its own loads; the operator aborts what a deleted or
//! re-initialised sync left pre-committed. What Doris's answer means is decided by the pure
//! [`classify_txn`] and [`classify_label_abort`], so both read it alike.

mod answer;
mod body;
pub mod cluster;
pub mod fe_api;
pub mod mysql;
pub mod mysql_target;
mod node;
mod request;
pub mod sql;
pub mod stream_load;
pub mod table;
pub mod tls;
mod url;

pub use answer::{LabelAbort, TxnOutcome, classify_label_abort, classify_txn, snippet};
pub use body::{MAX_ANSWER_BYTES, read_answer, read_capped};
pub use node::{host_of, port_of};
pub use request::{
    Answer, Error, MAX_REDIRECTS, Reach, TxnKey, TxnOperation, is_downgrade, redirect_target,
    two_phase,
};
pub use url::without_url;
