//! Arrow Flight SQL to the source cluster (docs/doris-protocols.md §3): handshake for a bearer
//! token, `GetFlightInfo` on the FE, `DoGet` at each endpoint's location (the BE needs no auth; the
//! ticket is the credential), errors mapped to what the runner does next.

use std::collections::HashMap;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::{Action, FlightInfo, HandshakeRequest, Ticket};
use base64::Engine as _;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use tonic::transport::{Channel, Endpoint};

use dcs_doris_client::cluster::Refusal;

use super::fe_http::FeHttpClient;
use crate::settings::SourceSettings;
use crate::{Error, Result};

/// gRPC message limit in both directions; Doris batches outgrow tonic's 4 MiB default.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The session time zone the runner reads and writes `@incr` timestamps in.
pub const SESSION_TIME_ZONE_SQL: &str = "SET time_zone = '+00:00'";

/// HTTP/2 pings on every Flight channel, so a peer that is gone is noticed while a call waits.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a ping may go unanswered before the connection counts as dead.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The context of errors from a DoGet stream (its request or its batches); see
/// [`super::resume::is_stream_interruption`].
pub const DO_GET_CONTEXT: &str = "Flight DoGet";

/// A stream of record batches from one statement, across all its endpoints.
pub type BatchStream = BoxStream<'static, Result<RecordBatch>>;

/// `grpc+tcp://host:port` (Doris's endpoint locations) → `http://host:port` for tonic.
pub fn location_to_uri(location: &str) -> String {
    for scheme in ["grpc+tcp://", "grpc://"] {
        if let Some(rest) = location.strip_prefix(scheme) {
            return format!("http://{rest}");
        }
    }
    if let Some(rest) = location.strip_prefix("grpc+tls://") {
        return format!("https://{rest}");
    }
    location.to_owned()
}

/// Map a gRPC status from Doris to a runner error.
///
/// - `UNAVAILABLE` with `doris-error-code` 5100/5101 → [`Error::WindowNotReady`] (retry the window);
/// - `UNAUTHENTICATED` on the handshake → [`Error::SourceCredentials`]; later (an expired or
///   evicted token) → [`Error::FlightSessionLost`], after which the caller reconnects;
/// - `UNAVAILABLE` otherwise → [`Error::SourceUnavailable`];
/// - anything else → [`Error::Doris`] with Doris's message verbatim.
pub fn map_status(context: &str, status: &tonic::Status, handshake: bool) -> Error {
    let message = status.message().to_owned();
    match status.code() {
        tonic::Code::Unavailable => {
            let code = status
                .metadata()
                .get("doris-error-code")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u16>().ok());
            match code {
                Some(code @ (5100 | 5101)) => Error::WindowNotReady { code, message },
                _ => Error::SourceUnavailable {
                    context: context.to_owned(),
                    reason: message,
                },
            }
        }
        tonic::Code::Unauthenticated if handshake => Error::SourceCredentials { detail: message },
        tonic::Code::Unauthenticated => Error::FlightSessionLost { message },
        _ => Error::Doris {
            context: context.to_owned(),
            message,
        },
    }
}

/// Map an arrow-flight error (a gRPC status or a decoding problem).
pub fn map_flight_error(context: &str, e: FlightError) -> Error {
    match e {
        FlightError::Tonic(status) => map_status(context, &status, false),
        other => Error::SourceUnavailable {
            context: context.to_owned(),
            reason: other.to_string(),
        },
    }
}

fn grpc_client(channel: Channel) -> FlightSqlServiceClient<Channel> {
    FlightSqlServiceClient::new_from_inner(
        FlightServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

/// Find the FE Flight SQL port: `spec.source.flightSqlPort`, else `SHOW FRONTENDS` through the
/// statement API (column `ArrowFlightSqlPort`, the first value that is a port).
///
/// # Errors
/// When the FE does not answer or no frontend has a Flight port.
pub async fn resolve_flight_port(http: &FeHttpClient) -> Result<u16> {
    if let Some(p) = http.settings().flight_sql_port {
        return Ok(p);
    }
    let rs = http.statement("show frontends").await?;
    let ports = rs
        .column_text("ArrowFlightSqlPort")
        .ok_or_else(|| Error::SourceConfig {
            reason: "SHOW FRONTENDS has no ArrowFlightSqlPort column; set source.flightSqlPort"
                .into(),
        })?;
    pick_flight_port(&ports).ok_or_else(|| Error::SourceConfig {
        reason: format!(
            "no frontend has an Arrow Flight SQL port (ArrowFlightSqlPort {ports:?}); set \
             arrow_flight_sql_port in fe.conf or source.flightSqlPort"
        ),
    })
}

/// The first `ArrowFlightSqlPort` value that is a port (`-1` means off).
pub fn pick_flight_port(values: &[String]) -> Option<u16> {
    values
        .iter()
        .find_map(|v| v.trim().parse::<u16>().ok().filter(|p| *p > 0))
}

/// One authenticated Flight SQL session on an FE, set to UTC.
#[derive(Debug)]
pub struct FlightSession {
    client: FlightSqlServiceClient<Channel>,
    fe_channel: Channel,
    /// How long a DoGet stream may go without a batch before it counts as stalled.
    idle: Duration,
    /// Channels to endpoint locations (the BEs), reused across statements.
    locations: HashMap<String, Channel>,
    /// TLS towards the source cluster, for the BE channels too.
    tls: dcs_doris_client::tls::Tls,
    /// The cluster's hosts: an endpoint location elsewhere gets nothing, the token included.
    cluster: dcs_doris_client::cluster::ClusterHosts,
    /// For asking an FE which BEs the cluster has (`/api/backends`), with `settings`' credentials.
    http: reqwest::Client,
    settings: SourceSettings,
    closed: bool,
}

impl FlightSession {
    /// Connect to the first reachable FE on `port`, hand-shake with the source credentials and
    /// set the session time zone to UTC.
    ///
    /// # Errors
    /// [`Error::SourceCredentials`] for a bad user or password, [`Error::SourceUnavailable`] when no
    /// FE can be reached.
    pub async fn connect(settings: &SourceSettings, port: u16) -> Result<Self> {
        let http = settings
            .tls
            .http_client(
                reqwest::Client::builder()
                    .timeout(settings.request_timeout)
                    .connect_timeout(Duration::from_secs(10)),
            )
            .map_err(|reason| Error::SourceConfig { reason })?;
        let mut last = None;
        for i in 0..settings.fe_nodes.len() {
            let host = settings.fe_host(i);
            let uri = if host.contains(':') {
                format!("http://[{host}]:{port}")
            } else {
                format!("http://{host}:{port}")
            };
            match connect_channel(&uri, &settings.tls).await {
                Ok(channel) => {
                    let mut session = Self {
                        client: grpc_client(channel.clone()),
                        fe_channel: channel,
                        idle: stall_deadline(settings),
                        locations: HashMap::new(),
                        tls: settings.tls.clone(),
                        cluster: dcs_doris_client::cluster::ClusterHosts::new(
                            settings.fe_nodes.clone(),
                            Vec::new(),
                        ),
                        http: http.clone(),
                        settings: settings.clone(),
                        closed: false,
                    };
                    if let Err(e) = session.handshake(settings).await {
                        session.closed = true; // there is no session to close
                        return Err(e);
                    }
                    if let Err(e) = session.statement(SESSION_TIME_ZONE_SQL).await {
                        session.close().await;
                        return Err(e);
                    }
                    return Ok(session);
                }
                Err(e) => {
                    tracing::warn!(uri, error = %e, "cannot reach the FE Flight SQL port");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::SourceConfig {
            reason: "source.feNodes is empty".into(),
        }))
    }

    /// `Handshake` with `authorization: Basic …`; the answer's bearer token authenticates the rest.
    async fn handshake(&mut self, settings: &SourceSettings) -> Result<()> {
        let creds = &settings.credentials;
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", creds.user, creds.password));
        let mut req = tonic::Request::new(futures::stream::iter(vec![HandshakeRequest::default()]));
        let value = format!("Basic {basic}")
            .parse()
            .map_err(|_| Error::SourceCredentials {
                detail: "the user or password cannot be sent in a header".into(),
            })?;
        req.metadata_mut().insert("authorization", value);
        let resp = self
            .client
            .inner_mut()
            .handshake(req)
            .await
            .map_err(|s| map_status("Flight SQL handshake", &s, true))?;
        let token = resp
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned)
            .ok_or_else(|| Error::SourceUnavailable {
                context: "Flight SQL handshake".into(),
                reason: "the FE answered without a bearer token".into(),
            })?;
        // Drain the (empty) response stream.
        let mut stream = resp.into_inner();
        while let Some(r) = stream.next().await {
            r.map_err(|s| map_status("Flight SQL handshake", &s, true))?;
        }
        self.client.set_token(token);
        Ok(())
    }

    /// Plan a statement on the FE (`GetFlightInfo`).
    ///
    /// # Errors
    /// As [`map_status`].
    pub async fn execute(&mut self, sql: &str) -> Result<FlightInfo> {
        self.client
            .execute(sql.to_owned(), None)
            .await
            .map_err(|e| map_flight_error("Flight SQL query", e))
    }

    /// Read every endpoint of `info`, one after the other, as one stream of batches. Every
    /// location must be on a host of the cluster ([`FlightSession::admit`]) before anything is
    /// sent to any of them.
    ///
    /// # Errors
    /// When a location is not a URI or not on a host of the cluster; fetch errors arrive in the
    /// stream.
    pub async fn fetch(&mut self, info: FlightInfo) -> Result<BatchStream> {
        let mut targets = Vec::with_capacity(info.endpoint.len());
        for ep in info.endpoint {
            let ticket = ep.ticket.ok_or_else(|| Error::SourceUnavailable {
                context: "Flight SQL query".into(),
                reason: "an endpoint has no ticket".into(),
            })?;
            let channel = match ep.location.first() {
                Some(loc) => {
                    self.admit(&loc.uri).await?;
                    self.location_channel(&loc.uri)?
                }
                None => self.fe_channel.clone(),
            };
            targets.push((channel, ticket));
        }
        // The bearer token is harmless on a BE and needed for FE-local results.
        let token = self.client.token().cloned();
        let idle = self.idle;
        let stream = futures::stream::iter(targets)
            .then(move |(channel, ticket)| do_get(channel, token.clone(), ticket, idle))
            .try_flatten();
        Ok(Box::pin(stream))
    }

    /// `execute` then `fetch`.
    ///
    /// # Errors
    /// As [`FlightSession::execute`].
    pub async fn query(&mut self, sql: &str) -> Result<BatchStream> {
        let info = self.execute(sql).await?;
        self.fetch(info).await
    }

    /// Run a statement whose result is not needed (e.g. `SET`), reading it to the end.
    ///
    /// # Errors
    /// As [`FlightSession::query`].
    pub async fn statement(&mut self, sql: &str) -> Result<()> {
        let mut stream = self.query(sql).await?;
        while stream.try_next().await?.is_some() {}
        Ok(())
    }

    /// Admit an endpoint location the FE handed out: its host must be a host of the cluster
    /// (`dcs_doris_client::cluster`, the rule a Stream Load redirect follows), or the read fails
    /// naming it and nothing is sent there: the bearer token goes with every `DoGet`.
    async fn admit(&mut self, location: &str) -> Result<()> {
        if self.locations.contains_key(location) {
            return Ok(());
        }
        let uri = location_to_uri(location);
        let host = reqwest::Url::parse(&uri)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .ok_or_else(|| Error::SourceUnavailable {
                context: "Flight SQL endpoint".into(),
                reason: format!("location {location:?} names no host"),
            })?;
        let creds = &self.settings.credentials;
        self.cluster
            .admit_flight_location(
                location,
                &host,
                &self.http,
                self.tls.http_scheme(),
                (&creds.user, &creds.password),
            )
            .await
            .map_err(|refusal| match refusal {
                Refusal::Foreign(reason) => Error::UnexpectedResult {
                    context: "Flight SQL endpoint".into(),
                    reason,
                },
                Refusal::ListUnavailable(reason) => Error::SourceUnavailable {
                    context: "Flight SQL endpoint".into(),
                    reason,
                },
            })
    }

    fn location_channel(&mut self, location: &str) -> Result<Channel> {
        if let Some(c) = self.locations.get(location) {
            return Ok(c.clone());
        }
        let mut uri = location_to_uri(location);
        if self.tls.is_on() {
            // Over TLS every location is dialled with TLS, whatever its scheme says (Doris
            // before PR #67221 said grpc+tcp:// over TLS too): never plaintext.
            uri = uri.replacen("https://", "http://", 1);
        }
        let endpoint =
            Endpoint::from_shared(uri.clone()).map_err(|e| Error::SourceUnavailable {
                context: "Flight SQL endpoint".into(),
                reason: format!("location {location:?} is not a URI: {e}"),
            })?;
        let channel = match tls_connector(&self.tls, "BE")
            .map_err(|reason| Error::SourceConfig { reason })?
        {
            Some(connector) => tuned(endpoint).connect_with_connector_lazy(connector),
            None => tuned(endpoint).connect_lazy(),
        };
        self.locations.insert(location.to_owned(), channel.clone());
        Ok(channel)
    }

    /// End the Doris session (`CloseSession`), freeing its connection slot. Failures are only
    /// logged: the token expires on its own. A session dropped without `close` is closed in the
    /// background.
    pub async fn close(mut self) {
        self.closed = true;
        close_session(&mut self.client).await;
    }
}

impl Drop for FlightSession {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let mut client = self.client.clone();
            runtime.spawn(async move { close_session(&mut client).await });
        }
    }
}

async fn close_session(client: &mut FlightSqlServiceClient<Channel>) {
    let result = async {
        let mut results = client
            .do_action(Action::new("CloseSession", Vec::<u8>::new()))
            .await?;
        while results
            .message()
            .await
            .map_err(|s| FlightError::Tonic(Box::new(s)))?
            .is_some()
        {}
        Ok::<_, FlightError>(())
    }
    .await;
    if let Err(e) = result {
        tracing::debug!(error = %e, "CloseSession failed");
    }
}

/// The connection settings of every Flight channel, to the FE and to the BEs alike: a connect
/// timeout, and HTTP/2 pings so a peer that is gone is noticed while a call waits.
fn tuned(endpoint: Endpoint) -> Endpoint {
    endpoint
        .connect_timeout(Duration::from_secs(10))
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
}

async fn connect_channel(uri: &str, tls: &dcs_doris_client::tls::Tls) -> Result<Channel> {
    let endpoint = Endpoint::from_shared(uri.to_owned()).map_err(|e| Error::SourceConfig {
        reason: format!("{uri} is not a URI: {e}"),
    })?;
    let connected =
        match tls_connector(tls, "FE").map_err(|reason| Error::SourceConfig { reason })? {
            Some(connector) => tuned(endpoint).connect_with_connector(connector).await,
            None => tuned(endpoint).connect().await,
        };
    connected.map_err(|e| Error::SourceUnavailable {
        context: format!("connecting to Flight SQL at {uri}"),
        reason: error_chain(&e),
    })
}

/// The connector of TLS channels (`None` for plaintext): TCP, then rustls as `tls` says, with
/// ALPN `h2`. The endpoint URI stays `http://` so tonic adds no TLS of its own; a failed
/// handshake reads `TLS to {role} host:port (Arrow Flight SQL): reason`.
fn tls_connector(
    tls: &dcs_doris_client::tls::Tls,
    role: &'static str,
) -> std::result::Result<Option<GrpcTls>, String> {
    let Some(config) = tls.grpc_config().map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    Ok(Some(GrpcTls {
        connector: tokio_rustls::TlsConnector::from(config),
        tls: tls.clone(),
        role,
    }))
}

/// See [`tls_connector`].
#[derive(Clone)]
struct GrpcTls {
    connector: tokio_rustls::TlsConnector,
    tls: dcs_doris_client::tls::Tls,
    role: &'static str,
}

type GrpcTlsStream =
    hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

impl tower::Service<tonic::codegen::http::Uri> for GrpcTls {
    type Response = GrpcTlsStream;
    type Error = std::io::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<GrpcTlsStream>> + Send>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: tonic::codegen::http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let node = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            let _ = tcp.set_nodelay(true);
            let name = this.tls.server_name_for(&host).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
            })?;
            let stream = this.connector.connect(name, tcp).await.map_err(|e| {
                let reason = dcs_doris_client::tls::tls_reason(&e).unwrap_or_else(|| e.to_string());
                std::io::Error::new(
                    e.kind(),
                    format!("TLS to {} {node} (Arrow Flight SQL): {reason}", this.role),
                )
            })?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

async fn do_get(
    channel: Channel,
    token: Option<String>,
    ticket: Ticket,
    idle: Duration,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let mut client = grpc_client(channel);
    if let Some(t) = token {
        client.set_token(t);
    }
    let stream = tokio::time::timeout(idle, client.do_get(ticket))
        .await
        .map_err(|_| stalled(idle))?
        .map_err(|e| map_flight_error(DO_GET_CONTEXT, e))?;
    let stream = stream
        .map_err(|e| map_flight_error(DO_GET_CONTEXT, e))
        .boxed();
    Ok(until_stalled(stream, idle))
}

/// The idle deadline of a DoGet stream: twice the source's request timeout (60 s by default).
/// Batches come as the BE scans; a stream silent for that long is stalled (a dead peer behind
/// a live connection, or a hung scan) and is read again like a cut one.
fn stall_deadline(settings: &SourceSettings) -> Duration {
    settings.request_timeout.saturating_mul(2)
}

fn stalled(idle: Duration) -> Error {
    Error::SourceUnavailable {
        context: DO_GET_CONTEXT.to_owned(),
        reason: format!("no batch for {}s: the stream stalled", idle.as_secs_f64()),
    }
}

/// `stream`, ended with a [`stalled`] error when no item comes within `idle`.
fn until_stalled(
    stream: BoxStream<'static, Result<RecordBatch>>,
    idle: Duration,
) -> BoxStream<'static, Result<RecordBatch>> {
    futures::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(item)) => Some((item, Some(stream))),
            Ok(None) => None,
            Err(_) => Some((Err(stalled(idle)), None)),
        }
    })
    .boxed()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_become_http_uris() {
        assert_eq!(
            location_to_uri("grpc+tcp://10.0.0.2:8050"),
            "http://10.0.0.2:8050"
        );
        assert_eq!(location_to_uri("grpc://be:8050"), "http://be:8050");
        assert_eq!(location_to_uri("http://be:8050"), "http://be:8050");
    }

    #[test]
    fn window_errors_are_retryable_and_others_keep_the_message() {
        let mut s = tonic::Status::unavailable(
            "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT",
        );
        s.metadata_mut()
            .insert("doris-error-code", "5101".parse().unwrap());
        assert!(matches!(
            map_status("q", &s, false),
            Error::WindowNotReady { code: 5101, ref message } if message.starts_with("ERR_INCR_VISIBLE")
        ));
        let plain = tonic::Status::unavailable("connection refused");
        assert!(matches!(
            map_status("q", &plain, false),
            Error::SourceUnavailable { .. }
        ));
        let internal = tonic::Status::internal(
            "Changelog offset has expired according to changelog.ttl_seconds",
        );
        assert!(
            map_status("q", &internal, false)
                .to_string()
                .ends_with("Changelog offset has expired according to changelog.ttl_seconds")
        );
        let unauth = tonic::Status::unauthenticated("Access denied");
        assert!(matches!(
            map_status("h", &unauth, true),
            Error::SourceCredentials { .. }
        ));
        assert!(matches!(
            map_status("q", &unauth, false),
            Error::FlightSessionLost { .. }
        ));
    }

    #[test]
    fn the_first_real_port_is_picked() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(pick_flight_port(&v(&["-1", "8070"])), Some(8070));
        assert_eq!(pick_flight_port(&v(&["-1"])), None);
    }
}
