//! Ticket handles, as Doris builds them (docs/doris-protocols.md §3.3).
//!
//! - BE results: `<queryId hi-hex>-<lo-hex>&<be_host>&<brpc_port>&<base64(sql)>`
//!   (D fe DorisFlightSqlProducer, parsed by D be flight_sql_service.cpp `decode_ticket`).
//! - FE-local results: `<peerIdentity>:<queryId>`.
//!
//! Both travel as `Any(TicketStatementQuery{statement_handle})`.

use std::fmt;

use arrow_flight::sql::{Any, ProstMessageExt, TicketStatementQuery};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use prost::Message;

/// The BE brpc port put into tickets (Doris default; the emulator has no brpc server).
pub const BE_BRPC_PORT: u16 = 8060;

/// A Doris query / fragment instance id (`TUniqueId`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueryId {
    /// High 64 bits.
    pub hi: u64,
    /// Low 64 bits.
    pub lo: u64,
}

impl QueryId {
    /// A random id.
    pub fn random() -> Self {
        Self {
            hi: rand::random(),
            lo: rand::random(),
        }
    }
}

impl fmt::Display for QueryId {
    /// `DebugUtil.printId`: `Long.toHexString(hi) + "-" + Long.toHexString(lo)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}-{:x}", self.hi, self.lo)
    }
}

/// A decoded BE ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeTicket {
    /// The result's query id.
    pub query_id: QueryId,
    /// BE host holding the result.
    pub host: String,
    /// Its brpc port.
    pub brpc_port: u16,
    /// The SQL text.
    pub sql: String,
}

/// Build a BE handle.
pub fn be_handle(query_id: QueryId, be_host: &str, brpc_port: u16, sql: &str) -> String {
    format!(
        "{query_id}&{be_host}&{brpc_port}&{}",
        STANDARD.encode(sql.as_bytes())
    )
}

/// Parse a BE handle; the error is the message the BE answers (gRPC INVALID_ARGUMENT).
pub fn parse_be_handle(handle: &str) -> Result<BeTicket, String> {
    let fields: Vec<&str> = handle.split('&').collect();
    if fields.len() != 4 {
        return Err(format!(
            "Malformed ticket: {handle}, size: {}",
            fields.len()
        ));
    }
    let ids: Vec<&str> = fields[0].split('-').collect();
    let parsed = match ids.as_slice() {
        [hi, lo] => u64::from_str_radix(hi, 16)
            .ok()
            .zip(u64::from_str_radix(lo, 16).ok()),
        _ => None,
    };
    let Some((hi, lo)) = parsed else {
        return Err(format!(
            "Malformed ticket: {handle}, missing query id: {}",
            fields[0]
        ));
    };
    let brpc_port = fields[2]
        .parse()
        .map_err(|_| format!("Malformed ticket: {handle}, bad port: {}", fields[2]))?;
    let sql = STANDARD
        .decode(fields[3])
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| format!("Malformed ticket: {handle}, bad sql"))?;
    Ok(BeTicket {
        query_id: QueryId { hi, lo },
        host: fields[1].to_string(),
        brpc_port,
        sql,
    })
}

/// Build an FE-local handle.
pub fn fe_handle(peer_identity: &str, query_id: &str) -> String {
    format!("{peer_identity}:{query_id}")
}

/// Split an FE-local handle into (peer identity, query id).
pub fn parse_fe_handle(handle: &str) -> Option<(&str, &str)> {
    handle.split_once(':')
}

/// The ticket bytes for a handle: `Any(TicketStatementQuery{statement_handle})`.
pub fn ticket_bytes(handle: &str) -> Vec<u8> {
    TicketStatementQuery {
        statement_handle: handle.to_string().into_bytes().into(),
    }
    .as_any()
    .encode_to_vec()
}

/// Decode ticket bytes back into the handle (for tests and diagnostics).
pub fn handle_of_ticket(ticket: &[u8]) -> Option<String> {
    let any = Any::decode(ticket).ok()?;
    let t: TicketStatementQuery = any.unpack().ok()??;
    String::from_utf8(t.statement_handle.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn be_handle_round_trips() {
        let q = QueryId {
            hi: 0x1a2b,
            lo: u64::MAX,
        };
        let h = be_handle(q, "10.0.0.1", BE_BRPC_PORT, "SELECT 1 /* é */");
        assert!(h.starts_with("1a2b-ffffffffffffffff&10.0.0.1&8060&"), "{h}");
        let t = parse_be_handle(&h).unwrap();
        assert_eq!(t.query_id, q);
        assert_eq!(t.host, "10.0.0.1");
        assert_eq!(t.brpc_port, 8060);
        assert_eq!(t.sql, "SELECT 1 /* é */");
        assert_eq!(handle_of_ticket(&ticket_bytes(&h)).unwrap(), h);
    }

    #[test]
    fn malformed_be_handles() {
        assert_eq!(
            parse_be_handle("a&b").unwrap_err(),
            "Malformed ticket: a&b, size: 2"
        );
        assert_eq!(
            parse_be_handle("zz&h&1&U0VMRUNU").unwrap_err(),
            "Malformed ticket: zz&h&1&U0VMRUNU, missing query id: zz"
        );
        assert!(parse_be_handle("a-b&h&x&U0VMRUNU").is_err());
    }

    #[test]
    fn fe_handle_round_trips() {
        let h = fe_handle("tok123", "5f0c-1");
        assert_eq!(parse_fe_handle(&h), Some(("tok123", "5f0c-1")));
    }
}
