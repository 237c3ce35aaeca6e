//! The FE Flight SQL service (D fe DorisFlightSqlProducer; docs/doris-protocols.md §3.3).

use std::pin::Pin;
use std::sync::{Arc, LazyLock};

use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementQuery, CommandStatementUpdate, ProstMessageExt,
    SqlInfo, SqlSupportedCaseSensitivity, TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse,
    IpcMessage, SchemaAsIpc, Ticket,
};
use arrow_ipc::writer::IpcWriteOptions;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::{Stream, StreamExt, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::arrow_convert::{ok_result, schema_of, to_batches, to_text_batches};
use super::auth::Peer;
use super::catalog;
use super::ticket::{self, QueryId};
use super::{FlightState, StoredResult};
use crate::Doris;
use crate::error::DorisError;
use crate::sql::{self, Session};
use crate::types::{QueryResult, ResultSet};

type DoGetStream = <FeService as FlightService>::DoGetStream;

/// Flight `CloseSession` action type.
pub const CLOSE_SESSION: &str = "CloseSession";

/// What the FE answers to `GetSqlInfo` (D DorisFlightSqlProducer's SqlInfoBuilder).
static SQL_INFO: LazyLock<SqlInfoData> = LazyLock::new(|| {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "DorisFE");
    b.append(SqlInfo::FlightSqlServerVersion, "1.0");
    b.append(SqlInfo::FlightSqlServerArrowVersion, "18.2.0");
    b.append(SqlInfo::FlightSqlServerReadOnly, false);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "`");
    b.append(SqlInfo::SqlDdlCatalog, true);
    b.append(SqlInfo::SqlDdlSchema, false);
    b.append(SqlInfo::SqlDdlTable, false);
    b.append(
        SqlInfo::SqlIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityCaseInsensitive as i32,
    );
    b.append(
        SqlInfo::SqlQuotedIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityCaseInsensitive as i32,
    );
    b.build().expect("static sql info")
});

/// `CloseSessionResult` (Flight.proto): `status` 1 = CLOSED.
#[derive(Clone, PartialEq, Message)]
pub struct CloseSessionResult {
    /// Close status.
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// The FE Flight SQL service.
pub(crate) struct FeService {
    pub doris: Arc<Doris>,
    pub state: Arc<FlightState>,
}

/// The first SQL keyword, upper-cased, after comments, blanks and opening parentheses.
pub(crate) fn first_keyword(sql: &str) -> String {
    let mut s = sql;
    loop {
        let t = s.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(rest) = t.strip_prefix("/*") {
            s = rest.split_once("*/").map(|(_, r)| r).unwrap_or("");
        } else if let Some(rest) = t.strip_prefix("--").or_else(|| t.strip_prefix('#')) {
            s = rest.split_once('\n').map(|(_, r)| r).unwrap_or("");
        } else {
            s = t;
            break;
        }
    }
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect::<String>()
        .to_ascii_uppercase()
}

/// True when Doris would run the statement on a BE and stream the result from there.
pub(crate) fn runs_on_be(sql: &str) -> bool {
    matches!(first_keyword(sql).as_str(), "SELECT" | "WITH")
}

/// How a failed statement is reported over Flight (docs/doris-protocols.md §3.3, and §1.6 for the
/// @incr window errors).
pub(crate) fn statement_error(e: &DorisError) -> Status {
    if let Some(name) = e.error_name() {
        let mut s = Status::unavailable(e.message.clone());
        s.metadata_mut()
            .insert("doris-error-code", MetadataValue::from(e.code as u32));
        if let Ok(v) = MetadataValue::try_from(name) {
            s.metadata_mut().insert("doris-error-name", v);
        }
        return s;
    }
    Status::internal(format!(
        "get flight info statement failed, after executeQueryStatement handleQuery, error code: {}, error msg: {}",
        e.code, e.message
    ))
}

fn peer<T>(req: &Request<T>) -> Result<String, Status> {
    req.extensions()
        .get::<Peer>()
        .map(|p| p.0.clone())
        .ok_or_else(|| Status::unauthenticated(""))
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

/// A DoGet stream of `schema` then `batches`.
/// A DoGet stream of one batch (the catalog and SqlInfo answers).
fn single_batch_stream(batch: arrow_array::RecordBatch) -> DoGetStream {
    result_stream(StoredResult::new(batch.schema(), vec![batch]))
}

pub(crate) fn result_stream(r: StoredResult) -> DoGetStream {
    let input = futures::stream::iter(r.batches.into_iter().map(Ok));
    Box::pin(
        FlightDataEncoderBuilder::new()
            .with_schema(r.schema)
            .build(input)
            .map_err(Status::from),
    )
}

fn schema_bytes(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let IpcMessage(b) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(internal)?;
    Ok(b)
}

impl FeService {
    fn location(&self, port: u16) -> String {
        if let Some(rogue) = self.doris.faults.flight_location_to() {
            return format!("{}://{rogue}", self.doris.flight_scheme());
        }
        format!(
            "{}://{}:{}",
            self.doris.flight_scheme(),
            self.doris.config.host,
            port
        )
    }

    fn flight_info(
        &self,
        schema: &SchemaRef,
        handle: &str,
        port: u16,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let endpoint = FlightEndpoint::new()
            .with_ticket(Ticket::new(ticket::ticket_bytes(handle)))
            .with_location(self.location(port));
        Ok(FlightInfo::new()
            .try_with_schema(schema)
            .map_err(internal)?
            .with_descriptor(descriptor)
            .with_endpoint(endpoint)
            .with_total_records(-1)
            .with_total_bytes(-1))
    }

    /// FlightInfo of a catalog command answered by the FE itself (ticket = the command).
    fn command_info(
        &self,
        ticket: Vec<u8>,
        schema: &Schema,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let endpoint = FlightEndpoint::new()
            .with_ticket(Ticket::new(ticket))
            .with_location(self.location(self.doris.ports.fe_flight_port));
        Ok(FlightInfo::new()
            .try_with_schema(schema)
            .map_err(internal)?
            .with_descriptor(descriptor)
            .with_endpoint(endpoint))
    }

    /// Run `query` in `peer`'s session and describe where its result waits.
    async fn execute(
        &self,
        peer: &str,
        query: &str,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let entry = self
            .state
            .token(peer)
            .ok_or_else(|| Status::unauthenticated(super::auth::invalid_token_message(peer)))?;
        if query.trim().is_empty() {
            return Err(Status::internal(
                "get flight info statement failed, query is empty",
            ));
        }
        // After the previous statement, unfetched FE-local results are dropped.
        self.state.reset_fe_results(peer);
        // A query that runs on a BE is converted to Arrow as its rows are made, a part at a
        // time: the whole result is never held as values as well as batches.
        let on_be = runs_on_be(query);
        let mut schema: Option<SchemaRef> = None;
        let mut batches = Vec::new();
        let mut convert_error = None;
        let result = {
            let mut session = entry.session.lock().await;
            if on_be {
                let mut sink = |rs: ResultSet| match to_batches(&rs) {
                    Ok((s, b)) => {
                        schema.get_or_insert(s);
                        batches.extend(b);
                        Ok(())
                    }
                    Err(e) => {
                        let message = e.to_string();
                        convert_error = Some(e);
                        Err(DorisError::analysis(message))
                    }
                };
                sql::execute_streamed(&self.doris, &mut session, query, Some(&mut sink)).await
            } else {
                sql::execute(&self.doris, &mut session, query).await
            }
        };
        if let Some(e) = convert_error {
            return Err(Status::internal(format!(
                "get flight info statement failed, fetch arrow flight schema failed: {e}"
            )));
        }
        let result = result.map_err(|e| statement_error(&e))?;
        let fe_port = self.doris.ports.fe_flight_port;
        match result {
            QueryResult::Ok { .. } => {
                let query_id = uuid::Uuid::new_v4().to_string();
                let (schema, batches) = ok_result();
                let info = self.flight_info(
                    &schema,
                    &ticket::fe_handle(peer, &query_id),
                    fe_port,
                    descriptor,
                )?;
                self.state
                    .put_fe_result(peer, &query_id, StoredResult::new(schema, batches));
                Ok(info)
            }
            QueryResult::Rows(rs) if on_be => {
                // Every part went to the sink, which saw at least one.
                let schema = schema.unwrap_or_else(|| Arc::new(schema_of(&rs.columns)));
                let query_id = QueryId::random();
                let handle = ticket::be_handle(
                    query_id,
                    &self.doris.config.host,
                    ticket::BE_BRPC_PORT,
                    query,
                );
                let info = self.flight_info(
                    &schema,
                    &handle,
                    self.doris.ports.be_flight_port,
                    descriptor,
                )?;
                self.state
                    .put_be_result(query_id, StoredResult::new(schema, batches));
                Ok(info)
            }
            QueryResult::Rows(rs) => {
                let query_id = QueryId::random().to_string();
                let (schema, batches) = to_text_batches(&rs).map_err(internal)?;
                let info = self.flight_info(
                    &schema,
                    &ticket::fe_handle(peer, &query_id),
                    fe_port,
                    descriptor,
                )?;
                self.state
                    .put_fe_result(peer, &query_id, StoredResult::new(schema, batches));
                Ok(info)
            }
        }
    }
}

#[tonic::async_trait]
impl FlightSqlService for FeService {
    type FlightService = FeService;

    async fn do_handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        // The auth2 header authenticator in front has already checked the credentials and adds
        // the bearer token to the response headers.
        self.doris.counters.hit("flight_handshake");
        Ok(Response::new(Box::pin(futures::stream::empty())))
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.doris.counters.hit("flight_get_flight_info");
        let peer = peer(&request)?;
        let info = self
            .execute(&peer, &query.query, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.doris.counters.hit("flight_get_flight_info");
        let handle = String::from_utf8_lossy(&cmd.prepared_statement_handle).to_string();
        let sql = self.state.prepared.lock().get(&handle).cloned();
        let (Some(sql), Some((executed_peer, _))) = (sql, ticket::parse_fe_handle(&handle)) else {
            return Err(Status::internal(format!(
                "get flight info statement failed, prepared statement not found: {handle}"
            )));
        };
        let info = self
            .execute(executed_peer, &sql, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let endpoint =
            FlightEndpoint::new().with_ticket(Ticket::new(query.as_any().encode_to_vec()));
        let info = FlightInfo::new()
            .try_with_schema(query.into_builder(&SQL_INFO).schema().as_ref())
            .map_err(internal)?
            .with_endpoint(endpoint)
            .with_descriptor(request.into_inner());
        Ok(Response::new(info))
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = query.into_builder(&SQL_INFO).build().map_err(internal)?;
        Ok(Response::new(single_batch_stream(batch)))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        Ok(Response::new(self.command_info(
            ticket,
            &schema,
            request.into_inner(),
        )?))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        Ok(Response::new(self.command_info(
            ticket,
            &schema,
            request.into_inner(),
        )?))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = query.as_any().encode_to_vec();
        let schema = query.into_builder().schema();
        Ok(Response::new(self.command_info(
            ticket,
            &schema,
            request.into_inner(),
        )?))
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = catalog::catalogs(query).map_err(internal)?;
        Ok(Response::new(single_batch_stream(batch)))
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = catalog::db_schemas(&self.doris, query).map_err(internal)?;
        Ok(Response::new(single_batch_stream(batch)))
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let batch = catalog::tables(&self.doris, query).map_err(internal)?;
        Ok(Response::new(single_batch_stream(batch)))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.doris.counters.hit("flight_do_get_fe");
        let handle = String::from_utf8_lossy(&ticket.statement_handle).to_string();
        // The handle names the session that ran the statement (the caller's token may differ).
        let found =
            ticket::parse_fe_handle(&handle).and_then(|(p, q)| self.state.take_fe_result(p, q));
        let Some(result) = found else {
            return Err(Status::internal(format!(
                "get stream statement failed, result not found, it may have been fetched or dropped by a later \
                 statement, handle: {handle}"
            )));
        };
        Ok(Response::new(result_stream(result)))
    }

    async fn do_put_statement_update(
        &self,
        _ticket: CommandStatementUpdate,
        _request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.doris.counters.hit("flight_do_put");
        Err(Status::unimplemented("acceptPutStatement unimplemented"))
    }

    async fn do_put_prepared_statement_update(
        &self,
        _query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        // Doris acknowledges each (empty) parameter batch with record count -1 and runs nothing.
        self.doris.counters.hit("flight_do_put");
        let mut stream = request.into_inner();
        while let Some(item) = stream.next().await {
            item?;
        }
        Ok(-1)
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let peer = peer(&request)?;
        let handle = ticket::fe_handle(&peer, &uuid::Uuid::new_v4().to_string());
        self.state
            .prepared
            .lock()
            .insert(handle.clone(), query.query);
        // The FE cannot describe the result yet: a dummy one-column schema, no parameters.
        let dataset = Schema::new(vec![Field::new("ResultMeta", DataType::Utf8, true)]);
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into_bytes().into(),
            dataset_schema: schema_bytes(&dataset)?,
            parameter_schema: schema_bytes(&Schema::empty())?,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        let handle = String::from_utf8_lossy(&query.prepared_statement_handle).to_string();
        self.state.prepared.lock().remove(&handle);
        Ok(())
    }

    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<Response<<Self as FlightService>::DoActionStream>, Status> {
        if request.get_ref().r#type == CLOSE_SESSION {
            self.doris.counters.hit("flight_close_session");
            let peer = peer(&request)?;
            if let Some(entry) = self.state.token(&peer) {
                // The session (current db, variables, results) goes; the token stays valid and
                // the next call starts a fresh session.
                *entry.session.lock().await = Session::on(&self.doris, entry.user.clone());
                self.state.reset_fe_results(&peer);
                self.state
                    .prepared
                    .lock()
                    .retain(|h, _| ticket::parse_fe_handle(h).map(|(p, _)| p) != Some(&peer));
            }
            let body = CloseSessionResult { status: 1 }.encode_to_vec();
            let out = arrow_flight::Result { body: body.into() };
            return Ok(Response::new(Box::pin(futures::stream::iter(vec![Ok(
                out,
            )]))));
        }
        Err(Status::invalid_argument(format!(
            "do_action: The defined request is invalid: {:?}",
            request.get_ref().r#type
        )))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ER_UNKNOWN, ERR_INCR_VISIBLE_WAIT_TIMEOUT};

    #[test]
    fn statement_classification() {
        assert!(runs_on_be("SELECT 1"));
        assert!(runs_on_be(
            "  /* ApplicationName=Flink ArrowFlightSQL Query */ select * from t"
        ));
        assert!(runs_on_be("-- c\n(select 1)"));
        assert!(runs_on_be("with x as (select 1) select * from x"));
        assert!(!runs_on_be("SHOW TABLES"));
        assert!(!runs_on_be("set time_zone = '+08:00'"));
        assert!(!runs_on_be("INSERT INTO t SELECT 1"));
        assert!(!runs_on_be("selection"));
        assert_eq!(first_keyword("/* a */ /* b */ use db"), "USE");
    }

    #[test]
    fn error_mapping() {
        let s = statement_error(&DorisError::analysis("Unknown table 'x'"));
        assert_eq!(s.code(), tonic::Code::Internal);
        assert_eq!(
            s.message(),
            format!(
                "get flight info statement failed, after executeQueryStatement handleQuery, error code: {ER_UNKNOWN}, \
                 error msg: errCode = 2, detailMessage = Unknown table 'x'"
            )
        );
        let s = statement_error(&DorisError::new(
            ERR_INCR_VISIBLE_WAIT_TIMEOUT,
            "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=x",
        ));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert_eq!(s.message(), "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=x");
        assert_eq!(s.metadata().get("doris-error-code").unwrap(), "5101");
        assert_eq!(
            s.metadata().get("doris-error-name").unwrap(),
            "ERR_INCR_VISIBLE_WAIT_TIMEOUT"
        );
    }
}
