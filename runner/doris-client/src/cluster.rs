//! Which hosts belong to a Doris cluster, so credentials follow a redirect only to one of them:
//! the FEs given (`feNodes`), the BEs given (`beNodes`), and the live BEs an FE lists
//! (`GET /api/backends?is_alive=true`, docs/doris-protocols.md §4.1). An FE that redirects
//! elsewhere (a compromised or misconfigured FE, or a `Location` rewritten on the way) gets no
//! credentials sent on its behalf.
//!
//! The list an FE gives is asked for only when a redirect names a host that is not known yet,
//! and then at most once per [`LIST_REFRESH`], so a BE added to the cluster is admitted and a
//! stream of foreign redirects does not become a stream of requests to the FE.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde_json::Value;

use crate::fe_api;

/// The least time between two reads of an FE's BE list.
pub const LIST_REFRESH: Duration = Duration::from_secs(10);

/// The hosts of one cluster. Cheap to clone (clones share the BE list read from the FE).
#[derive(Clone, Debug)]
pub struct ClusterHosts {
    fe_nodes: Vec<String>,
    be_nodes: Vec<String>,
    listed: Arc<Mutex<Listed>>,
}

#[derive(Debug, Default)]
struct Listed {
    /// `host:http_port` of each live BE the FE listed.
    nodes: Vec<String>,
    /// When the FE was last asked.
    asked_at: Option<Instant>,
}

/// Why a redirect target was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The target is no host of the cluster: following would hand the credentials to a stranger.
    Foreign(String),
    /// The FEs could not say which BEs the cluster has; asking again later may admit the target.
    ListUnavailable(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Foreign(m) | Self::ListUnavailable(m) => f.write_str(m),
        }
    }
}

impl ClusterHosts {
    /// The cluster of the FEs and BEs given (`host:port` each).
    pub fn new(fe_nodes: Vec<String>, be_nodes: Vec<String>) -> Self {
        Self {
            fe_nodes,
            be_nodes,
            listed: Arc::default(),
        }
    }

    /// The FEs given.
    pub fn fe_nodes(&self) -> &[String] {
        &self.fe_nodes
    }

    /// The BEs given.
    pub fn be_nodes(&self) -> &[String] {
        &self.be_nodes
    }

    /// Whether `target` is a host of the cluster ([`belongs`]); when it is none of the known
    /// ones, the FEs are asked for their live BEs (once per [`LIST_REFRESH`]) with `http` over
    /// `scheme` and `credentials`. `from` names the node that redirected, for the message.
    ///
    /// # Errors
    /// [`Refusal::Foreign`] when `target` is no host of the cluster; [`Refusal::ListUnavailable`]
    /// when it is not known and no FE could list the BEs.
    pub async fn admit(
        &self,
        from: &str,
        target: &Url,
        http: &reqwest::Client,
        scheme: &str,
        credentials: (&str, &str),
    ) -> Result<(), Refusal> {
        let matches = |nodes: &[String]| belongs(target, nodes);
        let target = crate::url::host_port(target);
        self.admit_where(&matches, http, scheme, credentials)
            .await
            .map_err(|unavailable| match unavailable {
                Some(why) => Refusal::ListUnavailable(format!(
                    "{from} redirected to {target}, which is neither in feNodes nor in beNodes, and \
                     the FEs could not list the cluster's BEs ({why}); the credentials were not sent \
                     there: list the cluster's BEs in beNodes if its FEs do not serve /api/backends"
                )),
                None => Refusal::Foreign(format!(
                    "{from} redirected to {target}, which is not a node of the cluster (neither in \
                     feNodes nor in beNodes, nor a live BE the FE lists at /api/backends); the \
                     credentials were not sent there: if it is a BE of this cluster, add it to \
                     beNodes"
                )),
            })
    }

    /// Whether `host`, the host of an Arrow Flight endpoint location an FE handed out, is a host
    /// of the cluster: the same FEs and BEs as [`ClusterHosts::admit`], compared by host alone
    /// (a BE's Flight port is not its HTTP port). Nothing, the Flight bearer token included, is
    /// to be sent to a location that is not admitted.
    ///
    /// # Errors
    /// As [`ClusterHosts::admit`].
    pub async fn admit_flight_location(
        &self,
        location: &str,
        host: &str,
        http: &reqwest::Client,
        scheme: &str,
        credentials: (&str, &str),
    ) -> Result<(), Refusal> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let matches = |nodes: &[String]| {
            nodes
                .iter()
                .any(|n| crate::host_of(n).eq_ignore_ascii_case(host))
        };
        self.admit_where(&matches, http, scheme, credentials)
            .await
            .map_err(|unavailable| match unavailable {
                Some(why) => Refusal::ListUnavailable(format!(
                    "the FE handed out the Flight endpoint location {location}, whose host {host} \
                     is not in feNodes, and the FEs could not list the cluster's BEs ({why}); \
                     nothing was sent there"
                )),
                None => Refusal::Foreign(format!(
                    "the FE handed out the Flight endpoint location {location}, whose host {host} \
                     is not a node of the cluster (neither in feNodes nor a live BE the FE lists \
                     at /api/backends); nothing, the Flight bearer token included, was sent there"
                )),
            })
    }

    /// Whether one of the known nodes, or else of the live BEs an FE lists (asked at most once
    /// per [`LIST_REFRESH`]), `matches`. `Err(None)`: none does; `Err(Some(why))`: not known and
    /// the FEs could not list their BEs.
    async fn admit_where(
        &self,
        matches: &(dyn Fn(&[String]) -> bool + Sync),
        http: &reqwest::Client,
        scheme: &str,
        credentials: (&str, &str),
    ) -> Result<(), Option<String>> {
        if matches(&self.fe_nodes) || matches(&self.be_nodes) {
            return Ok(());
        }
        let ask = {
            let listed = self
                .listed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if matches(&listed.nodes) {
                return Ok(());
            }
            listed
                .asked_at
                .is_none_or(|at| at.elapsed() >= LIST_REFRESH)
        };
        if !ask {
            return Err(None);
        }
        match self.read_list(http, scheme, credentials).await {
            Ok(nodes) => {
                let found = matches(&nodes);
                let mut listed = self
                    .listed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *listed = Listed {
                    nodes,
                    asked_at: Some(Instant::now()),
                };
                if found { Ok(()) } else { Err(None) }
            }
            Err(why) => Err(Some(why)),
        }
    }

    /// The live BEs the first FE that answers lists.
    async fn read_list(
        &self,
        http: &reqwest::Client,
        scheme: &str,
        (user, password): (&str, &str),
    ) -> Result<Vec<String>, String> {
        let mut last = "no FE is given".to_owned();
        for fe in &self.fe_nodes {
            let url = format!("{scheme}://{fe}/api/backends?is_alive=true");
            let answer = match http.get(&url).basic_auth(user, Some(password)).send().await {
                Ok(resp) if resp.status().is_success() => crate::read_answer(resp).await,
                Ok(resp) => {
                    last = format!("FE {fe} answered HTTP {}", resp.status().as_u16());
                    continue;
                }
                Err(e) => Err(e),
            };
            match answer {
                Ok(text) => match parse_backends(&text) {
                    Ok(nodes) => return Ok(nodes),
                    Err(e) => last = format!("FE {fe}: {e}"),
                },
                Err(e) => last = format!("FE {fe}: {}", crate::url::without_url(&e)),
            }
        }
        Err(last)
    }
}

/// `host:port` of each live BE in `/api/backends`' answer (pure).
///
/// # Errors
/// When the answer is not the envelope with `data.backends[]` of `ip` and `http_port`.
pub fn parse_backends(text: &str) -> Result<Vec<String>, String> {
    let data = fe_api::unwrap_envelope(text).map_err(|e| match e {
        fe_api::EnvelopeError::Unauthorized(m) => format!("refused the credentials: {m}"),
        fe_api::EnvelopeError::Doris(m) => format!("answered an error: {m}"),
        fe_api::EnvelopeError::Malformed(m) => format!("answered no BE list: {m}"),
    })?;
    let backends = data
        .get("backends")
        .and_then(Value::as_array)
        .ok_or("answered no data.backends list")?;
    backends
        .iter()
        .filter(|b| b.get("is_alive").and_then(Value::as_bool) != Some(false))
        .map(|b| {
            let ip = b
                .get("ip")
                .and_then(Value::as_str)
                .filter(|ip| !ip.is_empty())
                .ok_or("listed a BE without an ip")?;
            let port = b
                .get("http_port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or("listed a BE without a valid http_port")?;
            Ok(if ip.contains(':') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            })
        })
        .collect()
}

/// Whether `target`'s host and port are those of one of `nodes` (`host:port`; a node without
/// a port matches any port of its host). Hosts compare without case (pure).
pub fn belongs(target: &Url, nodes: &[String]) -> bool {
    let Some(host) = target.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = target.port_or_known_default();
    nodes.iter().any(|node| {
        let node_host = crate::host_of(node);
        let node_port = crate::node::port_of(node);
        node_host.eq_ignore_ascii_case(host) && (node_port.is_none() || node_port == port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn nodes(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_target_belongs_by_host_and_port() {
        let n = nodes(&["BE-0.doris:8040", "10.0.0.2:8040", "[fd00::7]:8040", "be-9"]);
        assert!(belongs(&url("http://be-0.doris:8040/api/x"), &n));
        assert!(belongs(&url("https://10.0.0.2:8040/api/x"), &n));
        assert!(belongs(&url("http://[fd00::7]:8040/x"), &n));
        // A node without a port is all of its host.
        assert!(belongs(&url("http://be-9:1234/x"), &n));
        // Another port of a known host is not the node.
        assert!(!belongs(&url("http://10.0.0.2:8041/x"), &n));
        // Nor is a host whose name only contains a known one.
        assert!(!belongs(&url("http://10.0.0.2.evil:8040/x"), &n));
        assert!(!belongs(&url("http://evil:8040/x"), &n));
        // An http URL without a port is port 80.
        assert!(!belongs(&url("http://10.0.0.2/x"), &n));
    }

    #[test]
    fn the_be_list_is_read_from_the_envelope() {
        let text = r#"{"msg":"success","code":0,"data":{"backends":[
            {"ip":"10.0.0.5","http_port":8040,"is_alive":true},
            {"ip":"fd00::9","http_port":8040,"is_alive":true},
            {"ip":"10.0.0.6","http_port":8040,"is_alive":false}]},"count":0}"#;
        assert_eq!(
            parse_backends(text).unwrap(),
            nodes(&["10.0.0.5:8040", "[fd00::9]:8040"])
        );
        let refused = r#"{"msg":"Unauthorized","code":401,"data":"Access denied","count":0}"#;
        assert_eq!(
            parse_backends(refused).unwrap_err(),
            "refused the credentials: Access denied"
        );
        assert!(parse_backends(r#"{"code":0,"data":{}}"#).is_err());
        assert!(parse_backends(r#"{"code":0,"data":{"backends":[{"ip":"x"}]}}"#).is_err());
        assert!(
            parse_backends(r#"{"code":0,"data":{"backends":[{"ip":"x","http_port":70000}]}}"#)
                .is_err()
        );
        assert!(parse_backends("<html>").is_err());
    }
}
