//! The FE HTTP API (`/api/...`): Basic auth, failover across FE nodes and Doris's response envelope.
//!
//! Every FE `/api` answer is HTTP 200 with `{"msg","code","data","count"}`, including
//! authentication failures (`code` 401), so the `code` decides, not the HTTP status.

use std::time::Duration;

use dcs_doris_client::fe_api::{EnvelopeError, unwrap_envelope};
use dcs_doris_client::without_url;
use serde_json::Value;

use crate::settings::SourceSettings;
use crate::{Error, Result};

/// The pause before the first FE is asked again, once every FE failed; doubled for each further
/// round of all the FEs, up to [`ROTATION_MAX_DELAY`].
pub const ROTATION_BASE_DELAY: Duration = Duration::from_millis(500);
/// The longest pause between two rounds of the FEs.
pub const ROTATION_MAX_DELAY: Duration = Duration::from_secs(5);

/// The pause before attempt `attempt` (0-based) when the FE requests rotate through `nodes`
/// FEs (pure): none before the next FE not yet tried in this round, a back-off before each new
/// round, so a cluster that is down is not hammered.
pub fn rotation_delay(attempt: u32, nodes: usize) -> Duration {
    let nodes = u32::try_from(nodes.max(1)).unwrap_or(u32::MAX);
    if attempt == 0 || !attempt.is_multiple_of(nodes) {
        return Duration::ZERO;
    }
    let round = attempt / nodes; // 1 before the second round
    ROTATION_BASE_DELAY
        .saturating_mul(1u32 << (round - 1).min(16))
        .min(ROTATION_MAX_DELAY)
}

/// A client for the FE HTTP API of the source cluster.
#[derive(Debug, Clone)]
pub struct FeHttpClient {
    http: reqwest::Client,
    settings: SourceSettings,
}

/// An HTTP method the FE API is called with.
#[derive(Debug, Clone)]
pub enum FeRequest {
    /// `GET path`.
    Get,
    /// `POST path` with this JSON body.
    Post(Value),
}

impl FeHttpClient {
    /// A client for `settings.fe_nodes`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(settings: SourceSettings) -> Result<Self> {
        let http = settings
            .tls
            .http_client(
                reqwest::Client::builder()
                    .timeout(settings.request_timeout)
                    .connect_timeout(Duration::from_secs(10)),
            )
            .map_err(|reason| Error::SourceConfig { reason })?;
        Ok(Self { http, settings })
    }

    /// Waits [`rotation_delay`] before attempt `attempt` of a rotation through the FEs.
    pub async fn pause_before(&self, attempt: u32) {
        let delay = rotation_delay(attempt, self.settings.fe_nodes.len());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }

    /// The settings this client was made with.
    pub fn settings(&self) -> &SourceSettings {
        &self.settings
    }

    /// One request to one FE node; `node` indexes `fe_nodes` (wrapping).
    pub async fn call_once(
        &self,
        node: usize,
        path: &str,
        req: &FeRequest,
    ) -> std::result::Result<Value, AttemptError> {
        let base = &self.settings.fe_nodes[node % self.settings.fe_nodes.len()];
        let url = self.settings.tls.url(base.trim_end_matches('/'), path);
        let node = base
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/');
        let transport = |e: reqwest::Error| {
            AttemptError::Transport(dcs_doris_client::tls::describe_failure(
                "FE",
                node,
                "HTTP",
                &e,
                || format!("{url}: {}", without_url(&e)),
            ))
        };
        let creds = &self.settings.credentials;
        let builder = match req {
            FeRequest::Get => self.http.get(&url),
            FeRequest::Post(body) => self.http.post(&url).json(body),
        };
        let resp = builder
            .basic_auth(&creds.user, Some(&creds.password))
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status();
        let body = dcs_doris_client::read_answer(resp)
            .await
            .map_err(transport)?;
        match unwrap_envelope(&body) {
            Ok(v) => Ok(v),
            Err(EnvelopeError::Unauthorized(m)) => Err(AttemptError::Unauthorized(m)),
            Err(EnvelopeError::Doris(m)) => Err(AttemptError::Doris(m)),
            Err(EnvelopeError::Malformed(m)) => Err(AttemptError::Transport(format!(
                "{url}: HTTP {status}, {m}"
            ))),
        }
    }

    /// Call `path` on the FE nodes in turn, up to `request_retries` attempts, until one answers.
    /// A Doris error or a credentials error is final; only transport failures move on.
    ///
    /// # Errors
    /// [`Error::SourceCredentials`], [`Error::Doris`] with Doris's message, or
    /// [`Error::SourceUnavailable`] with the last transport failure.
    pub async fn call(&self, context: &str, path: &str, req: FeRequest) -> Result<Value> {
        let attempts = self.settings.request_retries.max(1);
        let mut last = String::new();
        for attempt in 0..attempts {
            self.pause_before(attempt).await;
            match self.call_once(attempt as usize, path, &req).await {
                Ok(v) => return Ok(v),
                Err(AttemptError::Transport(m)) => {
                    tracing::warn!(context, attempt, error = %m, "FE request failed; trying the next FE");
                    last = m;
                }
                Err(e) => return Err(e.into_error(context)),
            }
        }
        Err(Error::SourceUnavailable {
            context: format!("{context} (after {attempts} attempts)"),
            reason: last,
        })
    }

    /// Run a statement through `POST /api/query/default_cluster/information_schema` and return
    /// its result set as column names and rows.
    ///
    /// # Errors
    /// As [`FeHttpClient::call`], or when the answer is not a result set.
    pub async fn statement(&self, stmt: &str) -> Result<ResultSet> {
        let data = self
            .call(
                "statement API",
                "/api/query/default_cluster/information_schema",
                FeRequest::Post(serde_json::json!({ "stmt": stmt })),
            )
            .await?;
        ResultSet::from_data(&data).map_err(|reason| Error::SourceUnavailable {
            context: format!("statement API answered `{stmt}` unexpectedly"),
            reason,
        })
    }
}

/// Why one FE request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// Not reached, timed out, or answered something that is not the envelope.
    Transport(String),
    /// `code` 401.
    Unauthorized(String),
    /// Another non-zero `code`.
    Doris(String),
}

impl AttemptError {
    /// The runner error for this failure.
    pub fn into_error(self, context: &str) -> Error {
        match self {
            Self::Transport(reason) => Error::SourceUnavailable {
                context: context.to_owned(),
                reason,
            },
            Self::Unauthorized(detail) => Error::SourceCredentials { detail },
            Self::Doris(message) => Error::Doris {
                context: context.to_owned(),
                message,
            },
        }
    }
}

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(m) | Self::Doris(m) => f.write_str(m),
            Self::Unauthorized(m) => write!(f, "unauthorized: {m}"),
        }
    }
}

/// A statement API result set: `{"type":"result_set","meta":[{"name","type"}],"data":[[...]]}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSet {
    /// Column names in order.
    pub columns: Vec<String>,
    /// Rows, one JSON value per column.
    pub rows: Vec<Vec<Value>>,
}

impl ResultSet {
    /// Parse the envelope's `data`.
    ///
    /// # Errors
    /// When `data` is not a result set.
    pub fn from_data(data: &Value) -> std::result::Result<Self, String> {
        let meta = data
            .get("meta")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("no meta in {data}"))?;
        let columns = meta
            .iter()
            .map(|m| m.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("a meta entry has no name: {data}"))?;
        let rows = data
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("no data in {data}"))?
            .iter()
            .map(|r| {
                r.as_array()
                    .cloned()
                    .ok_or_else(|| format!("row is not an array: {r}"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Self { columns, rows })
    }

    /// The values of the named column (case-insensitive), as text.
    pub fn column_text(&self, name: &str) -> Option<Vec<String>> {
        let i = self
            .columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))?;
        Some(
            self.rows
                .iter()
                .map(|r| match r.get(i) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(v) => v.to_string(),
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_backs_off_only_between_rounds_of_all_the_fes() {
        let ms = Duration::from_millis;
        // Three FEs: the second and third are tried at once, then 0.5 s, 1 s, ... up to 5 s.
        let delays: Vec<Duration> = (0..12).map(|a| rotation_delay(a, 3)).collect();
        assert_eq!(
            delays,
            [0, 0, 0, 500, 0, 0, 1000, 0, 0, 2000, 0, 0]
                .map(ms)
                .to_vec()
        );
        // One FE: every retry is a new round.
        let one: Vec<Duration> = (0..7).map(|a| rotation_delay(a, 1)).collect();
        assert_eq!(one, [0, 500, 1000, 2000, 4000, 5000, 5000].map(ms).to_vec());
        assert_eq!(rotation_delay(40, 1), ROTATION_MAX_DELAY);
        assert_eq!(rotation_delay(1, 0), ms(500), "no FE counts as one");
    }

    #[test]
    fn result_sets_are_read_by_column_name() {
        let data = serde_json::json!({"type":"result_set","meta":[{"name":"Host","type":"CHAR"},{"name":"ArrowFlightSqlPort","type":"CHAR"}],"data":[["fe",8070]]});
        let rs = ResultSet::from_data(&data).unwrap();
        assert_eq!(rs.column_text("arrowflightsqlport").unwrap(), vec!["8070"]);
        assert_eq!(rs.column_text("nope"), None);
    }
}
