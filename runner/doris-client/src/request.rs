//! One `_stream_load_2pc` request, and the rules of every HTTP call to Doris.

use reqwest::{StatusCode, Url};

use crate::url::{host_port, without_url};

/// How many 307s one request follows (FE → BE is one).
pub const MAX_REDIRECTS: usize = 3;

/// The second phase of a two-phase load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOperation {
    /// Make the pre-committed rows visible.
    Commit,
    /// Drop them.
    Abort,
}

impl TxnOperation {
    /// The `txn_operation` header's value.
    pub fn as_header(self) -> &'static str {
        match self {
            Self::Commit => "commit",
            Self::Abort => "abort",
        }
    }
}

/// Which transaction a 2PC request addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnKey<'a> {
    /// The transaction id the load's answer reported (`TxnId`).
    Id(i64),
    /// The load's label (Doris finds its transaction; only `abort` is accepted this way).
    Label(&'a str),
}

impl std::fmt::Display for TxnKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Id(id) => write!(f, "transaction {id}"),
            Self::Label(label) => write!(f, "load {label}"),
        }
    }
}

/// Doris's answer: the HTTP status and the body (JSON when Doris got that far).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Response body.
    pub body: String,
}

/// Why a request got no usable answer. Messages carry `host:port`s, never a URL or credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No answer from `node` (connection refused, timeout, reset).
    #[error("cannot reach {node}: {message}")]
    Unreachable {
        /// `host:port` asked.
        node: String,
        /// What the HTTP client said, without URLs.
        message: String,
    },
    /// A 307 whose `Location` is missing or no URL.
    #[error("{node} redirected without a usable Location")]
    BadRedirect {
        /// `host:port` that redirected.
        node: String,
    },
    /// A redirect from `https://` to `http://`: following it would send the credentials in clear.
    #[error(
        "{node} redirected from https to http, which would send the credentials in clear; refused (turn TLS on for every node of the cluster)"
    )]
    Downgrade {
        /// `host:port` that redirected.
        node: String,
    },
    /// A redirect to a host that is not a node of the cluster ([`crate::cluster::ClusterHosts`]):
    /// the credentials were not sent there.
    #[error("{message}")]
    NotInCluster {
        /// `host:port` that redirected.
        node: String,
        /// Where it pointed and what to do.
        message: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects in a row.
    #[error("{node} redirected more than {MAX_REDIRECTS} times")]
    TooManyRedirects {
        /// `host:port` of the last redirect.
        node: String,
    },
    /// A MySQL answer whose row does not read as what was asked for ([`crate::mysql::decode`]).
    #[error("{what}: the server answered {detail}")]
    BadRow {
        /// What was being read.
        what: String,
        /// The row's shape (kinds of values, never the values).
        detail: String,
    },
}

/// How a request reaches a cluster: the client (which must not follow redirects itself), `http`
/// or `https`, and the cluster's hosts a redirect may lead to.
#[derive(Clone, Copy)]
pub struct Reach<'a> {
    /// The HTTP client.
    pub http: &'a reqwest::Client,
    /// `http` or `https` ([`crate::tls::Tls::http_scheme`]).
    pub scheme: &'a str,
    /// The hosts credentials may follow a redirect to.
    pub cluster: &'a crate::cluster::ClusterHosts,
}

/// Sends one `PUT /api/{db}/_stream_load_2pc` for `key` to `node` (`host:port`, an FE or a BE),
/// following an FE's 307 by hand with the credentials re-sent ([`Reach`]); a redirect from
/// `https` to `http` is refused ([`Error::Downgrade`]), and one to a host that is not of the
/// cluster ([`Error::NotInCluster`]).
///
/// # Errors
/// [`Error`] when no answer came; an answer of any status is `Ok`, for [`crate::classify_txn`] or
/// [`crate::classify_label_abort`] to read.
pub async fn two_phase(
    Reach {
        http,
        scheme,
        cluster,
    }: Reach<'_>,
    node: &str,
    (user, password): (&str, &str),
    db: &str,
    key: TxnKey<'_>,
    operation: TxnOperation,
) -> Result<Answer, Error> {
    let (key_header, key_value) = match key {
        TxnKey::Id(id) => ("txn_id", id.to_string()),
        TxnKey::Label(label) => ("label", label.to_owned()),
    };
    let mut at = node.to_owned();
    let mut url = format!("{scheme}://{node}/api/{db}/_stream_load_2pc");
    for _ in 0..=MAX_REDIRECTS {
        let resp = http
            .put(&url)
            .basic_auth(user, Some(password))
            .header(key_header, key_value.as_str())
            .header("txn_operation", operation.as_header())
            .header(reqwest::header::CONTENT_LENGTH, "0")
            .send()
            .await
            .map_err(|e| Error::Unreachable {
                node: at.clone(),
                message: without_url(&e),
            })?;
        if resp.status() == StatusCode::TEMPORARY_REDIRECT {
            let next =
                redirect_target(&resp).ok_or_else(|| Error::BadRedirect { node: at.clone() })?;
            if is_downgrade(&url, &next) {
                return Err(Error::Downgrade { node: at });
            }
            cluster
                .admit(&at, &next, http, scheme, (user, password))
                .await
                .map_err(|refusal| Error::NotInCluster {
                    node: at.clone(),
                    message: refusal.to_string(),
                })?;
            at = host_port(&next);
            url = next.to_string();
            continue;
        }
        let status = resp.status().as_u16();
        let body = crate::read_answer(resp)
            .await
            .map_err(|e| Error::Unreachable {
                node: at.clone(),
                message: without_url(&e),
            })?;
        return Ok(Answer { status, body });
    }
    Err(Error::TooManyRedirects { node: at })
}

/// Where a 307 points, without the credentials Doris puts into the `Location` (the caller re-sends
/// them as a header); `None` when there is no usable `Location`.
pub fn redirect_target(resp: &reqwest::Response) -> Option<Url> {
    let mut url = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Url::parse(v).ok())?;
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Some(url)
}

/// Whether following a redirect from `from` to `to` leaves TLS (`https` → anything else).
pub fn is_downgrade(from: &str, to: &Url) -> bool {
    from.starts_with("https://") && to.scheme() != "https"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_leaving_https_is_a_downgrade() {
        let http = Url::parse("http://be:8040/x").unwrap();
        let https = Url::parse("https://be:8040/x").unwrap();
        assert!(is_downgrade("https://fe:8030/x", &http));
        assert!(!is_downgrade("https://fe:8030/x", &https));
        assert!(!is_downgrade("http://fe:8030/x", &http));
        assert!(!is_downgrade("http://fe:8030/x", &https));
    }

    #[tokio::test]
    async fn unreachable_nodes_are_named_without_url_or_credentials() {
        // A port nothing listens on (bound, then closed).
        let node = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        let http = crate::tls::plain_http_client(
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()),
        )
        .expect("client");
        let err = two_phase(
            Reach {
                http: &http,
                scheme: "http",
                cluster: &crate::cluster::ClusterHosts::new(vec![node.clone()], Vec::new()),
            },
            &node,
            ("root", "s3cret"),
            "db",
            TxnKey::Id(7),
            TxnOperation::Abort,
        )
        .await
        .expect_err("nothing listens");
        let Error::Unreachable {
            node: named,
            message,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(named, &node);
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("cannot reach {node}: error sending request")),
            "{text}"
        );
        assert!(
            !text.contains("http://") && !text.contains("s3cret"),
            "{text}"
        );
        assert!(!message.is_empty());
    }
}
