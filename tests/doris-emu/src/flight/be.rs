//! The BE Flight service (D be service/arrow_flight/flight_sql_service.cpp): no auth, `DoGet` of
//! a `TicketStatementQuery` whose handle names a stored query result.

use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::TicketStatementQuery;
use arrow_flight::sql::server::FlightSqlService;
use arrow_flight::{HandshakeRequest, HandshakeResponse, Ticket};
use futures::{Stream, StreamExt, TryStreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::ticket;
use super::{FlightState, StoredResult};
use crate::Doris;

type DoGetStream = <BeService as FlightService>::DoGetStream;

/// The BE Flight service.
pub(crate) struct BeService {
    pub doris: Arc<Doris>,
    pub state: Arc<FlightState>,
}

/// The message of a stream cut by the `flight_cut_after_batches` fault.
pub fn cut_message(batches: u32) -> String {
    format!(
        "[INTERNAL_ERROR]arrow flight result stream interrupted after {batches} batches (injected fault)"
    )
}

/// Stream `r`, or only its first `cut_after` batches followed by an error.
pub(crate) fn be_stream(
    r: StoredResult,
    cut_after: Option<u32>,
    stall_after: Option<u32>,
) -> DoGetStream {
    let (batches, cut) = match cut_after.or(stall_after) {
        Some(k) => (
            r.batches.into_iter().take(k as usize).collect::<Vec<_>>(),
            Some(k),
        ),
        None => (r.batches, None),
    };
    let input = futures::stream::iter(batches.into_iter().map(Ok));
    let data = FlightDataEncoderBuilder::new()
        .with_schema(r.schema)
        .build(input)
        .map_err(Status::from);
    match cut {
        None => Box::pin(data),
        // A stall: what was sent stays sent; nothing follows while the client waits.
        Some(_) if stall_after.is_some() => Box::pin(data.chain(futures::stream::pending())),
        Some(k) => Box::pin(data.chain(futures::stream::once(async move {
            Err(Status::internal(cut_message(k)))
        }))),
    }
}

#[tonic::async_trait]
impl FlightSqlService for BeService {
    type FlightService = BeService;

    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        // NoOpAuthHandler: any handshake succeeds.
        Ok(Response::new(Box::pin(futures::stream::empty())))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.doris.counters.hit("flight_do_get_be");
        let handle = String::from_utf8_lossy(&ticket.statement_handle).to_string();
        let t = ticket::parse_be_handle(&handle).map_err(Status::invalid_argument)?;
        let Some(result) = self.state.take_be_result(&t.query_id) else {
            return Err(Status::internal(format!(
                "[INTERNAL_ERROR]not found arrow flight schema, maybe query has been canceled, query_id: {}",
                t.query_id
            )));
        };
        let cut = self.doris.faults.take_flight_cut();
        let stall = self.doris.faults.take_flight_stall();
        Ok(Response::new(be_stream(result, cut, stall)))
    }
}
