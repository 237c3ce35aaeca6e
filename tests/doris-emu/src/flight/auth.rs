//! Flight auth, as Doris does it (docs/doris-protocols.md §3.2).
//!
//! FE: an Arrow auth2 header authenticator (D FlightBearerTokenAuthenticator) in front of every
//! call. `authorization: Bearer <t>` must name a live token; otherwise `authorization: Basic
//! b64(user:pass)` is checked and a new token (and session) is created. Each answer carries
//! `authorization: Bearer <token>`.
//!
//! BE: no auth. Like the BE's NoOp middleware, every answer carries `authorization: Bearer
//! bearertoken`.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;

use super::{FlightState, TokenEntry};
use crate::Doris;
use crate::sql::Session;

/// `arrow_flight_token_cache_size` quoted in token errors.
pub const TOKEN_CACHE_SIZE: u32 = 512;
/// `arrow_flight_token_alive_time` (minutes) quoted in token errors.
pub const TOKEN_ALIVE_MINUTES: u32 = 4320;
/// Tokens kept per user: `max_user_connections` (100) / 2; older ones are evicted LRU.
pub const TOKENS_PER_USER: usize = 50;
/// The fixed `authorization` answer of the BE's NoOp middleware.
pub const BE_BEARER_HEADER: &str = "Bearer bearertoken";

/// The authenticated peer identity (the bearer token), put into request extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer(pub String);

/// A new token like D FlightTokenManagerImpl: 130 random bits in base 32.
pub fn new_token() -> String {
    const DIGITS: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let mut v: u128 = rand::random();
    let top: u8 = rand::random::<u8>() & 0b11;
    let mut out = Vec::with_capacity(26);
    for _ in 0..25 {
        out.push(DIGITS[(v & 31) as usize]);
        v >>= 5;
    }
    // 125 bits emitted; the last digit takes the remaining 3 + 2 extra bits.
    out.push(DIGITS[((v as u8) | (top << 3)) as usize & 31]);
    while out.len() > 1 && out.last() == Some(&b'0') {
        out.pop();
    }
    out.reverse();
    String::from_utf8(out).expect("ascii")
}

/// The message for an unknown token (D FlightTokenManagerImpl.validateToken).
pub fn invalid_token_message(token: &str) -> String {
    format!(
        "invalid bearer token: {token}, try reconnect, bearer token may not be created, or may have been evict, \
         search for this token in fe.log to see the evict reason. currently in fe.conf, \
         `arrow_flight_token_cache_size`={TOKEN_CACHE_SIZE}, `arrow_flight_token_alive_time`={TOKEN_ALIVE_MINUTES}"
    )
}

/// The message for an expired token (D FlightTokenManagerImpl.validateToken).
pub fn expired_token_message(token: &str) -> String {
    format!(
        "bearer token expired: {token}, try reconnect, currently in fe.conf, \
         `arrow_flight_token_alive_time`={TOKEN_ALIVE_MINUTES}"
    )
}

/// The message for a wrong user or password (D FlightAuthUtils.authenticateCredentials).
pub fn access_denied_message(user: &str, remote_ip: &str, has_password: bool) -> String {
    format!(
        "Unable to authenticate user {user}, exception: errCode = 2, detailMessage = Access denied for user \
         '{user}@{remote_ip}' (using password: {})",
        if has_password { "YES" } else { "NO" }
    )
}

/// The value after `prefix` (case-insensitive) of the first `authorization` header that has it.
fn auth_value<'a>(headers: &'a HeaderMap, prefix: &str) -> Option<&'a str> {
    headers
        .get_all(AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            (v.len() >= prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix))
                .then(|| &v[prefix.len()..])
        })
}

/// Decode `b64(user:pass)`, padded or not (Go clients send it unpadded).
pub fn decode_basic(encoded: &str) -> Option<(String, String)> {
    let encoded = encoded.trim();
    let bytes = STANDARD
        .decode(encoded)
        .or_else(|_| STANDARD_NO_PAD.decode(encoded.trim_end_matches('=')))
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

impl FlightState {
    /// Authenticate one FE call; the peer identity (token) on success.
    pub fn authenticate(
        &self,
        doris: &Doris,
        headers: &HeaderMap,
        remote: Option<IpAddr>,
    ) -> Result<String, Status> {
        if let Some(token) = auth_value(headers, "Bearer ") {
            let token = token.trim();
            let Some(entry) = self.token(token) else {
                return Err(Status::unauthenticated(invalid_token_message(token)));
            };
            if doris.clock.now_ms() >= entry.created_ms + TOKEN_ALIVE_MINUTES as i64 * 60_000 {
                self.evict(token);
                return Err(Status::unauthenticated(expired_token_message(token)));
            }
            entry.last_used.store(
                self.use_clock.fetch_add(1, Ordering::SeqCst) + 1,
                Ordering::SeqCst,
            );
            return Ok(token.to_string());
        }
        let Some(encoded) = auth_value(headers, "Basic ") else {
            // Arrow's BasicCallHeaderAuthenticator: UNAUTHENTICATED without a description.
            return Err(Status::unauthenticated(""));
        };
        let Some((user, password)) = decode_basic(encoded) else {
            return Err(Status::unauthenticated(""));
        };
        if !doris.authenticate(&user, &password) {
            let ip = remote
                .map(|ip| ip.to_string())
                .unwrap_or_else(|| "%".into());
            return Err(Status::unauthenticated(access_denied_message(
                &user,
                &ip,
                !password.is_empty(),
            )));
        }
        let token = new_token();
        let entry = TokenEntry {
            user: user.clone(),
            session: tokio::sync::Mutex::new(Session::on(doris, user.clone())),
            created_ms: doris.clock.now_ms(),
            last_used: AtomicU64::new(self.use_clock.fetch_add(1, Ordering::SeqCst) + 1),
        };
        let evicted = {
            let mut tokens = self.tokens.lock();
            tokens.insert(token.clone(), Arc::new(entry));
            let mut evicted = Vec::new();
            // The user's LRU beyond max_user_connections / 2, then the global cache size.
            loop {
                let mine: Vec<_> = tokens.iter().filter(|(_, e)| e.user == user).collect();
                let victim = if mine.len() > TOKENS_PER_USER {
                    mine.iter()
                        .min_by_key(|(_, e)| e.last_used.load(Ordering::SeqCst))
                        .map(|(t, _)| (*t).clone())
                } else if tokens.len() > TOKEN_CACHE_SIZE as usize {
                    tokens
                        .iter()
                        .min_by_key(|(_, e)| e.last_used.load(Ordering::SeqCst))
                        .map(|(t, _)| t.clone())
                } else {
                    None
                };
                let Some(v) = victim else { break };
                tokens.remove(&v);
                evicted.push(v);
            }
            evicted
        };
        for t in evicted {
            tracing::info!("evict bearer token: {t} from usersTokenLRU, reason: SIZE");
            self.evict(&t);
        }
        Ok(token)
    }

    /// Forget a token and everything its session holds.
    pub fn evict(&self, token: &str) {
        self.tokens.lock().remove(token);
        self.reset_fe_results(token);
        self.prepared
            .lock()
            .retain(|h, _| super::ticket::parse_fe_handle(h).map(|(p, _)| p) != Some(token));
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The FE's auth2 header authenticator around the Flight service.
#[derive(Clone)]
pub(crate) struct FeAuth<S> {
    pub inner: S,
    pub doris: Arc<Doris>,
    pub state: Arc<FlightState>,
}

impl<S> Service<http::Request<Body>> for FeAuth<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let remote = req
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(|i| i.remote_addr())
            .map(|a| a.ip());
        match self.state.authenticate(&self.doris, req.headers(), remote) {
            Err(status) => Box::pin(async move { Ok(status.into_http()) }),
            Ok(token) => {
                req.extensions_mut().insert(Peer(token.clone()));
                let fut = self.inner.call(req);
                Box::pin(async move {
                    let mut resp = fut.await?;
                    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                        resp.headers_mut().insert(AUTHORIZATION, v);
                    }
                    Ok(resp)
                })
            }
        }
    }
}

impl<S: NamedService> NamedService for FeAuth<S> {
    const NAME: &'static str = S::NAME;
}

/// The BE's NoOp auth: accept everything, answer `authorization: Bearer bearertoken`.
#[derive(Clone)]
pub(crate) struct BeNoAuth<S> {
    pub inner: S,
}

impl<S> Service<http::Request<Body>> for BeNoAuth<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut resp = fut.await?;
            resp.headers_mut()
                .insert(AUTHORIZATION, HeaderValue::from_static(BE_BEARER_HEADER));
            Ok(resp)
        })
    }
}

impl<S: NamedService> NamedService for BeNoAuth<S> {
    const NAME: &'static str = S::NAME;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_look_like_doris_tokens() {
        for _ in 0..100 {
            let t = new_token();
            assert!(!t.is_empty() && t.len() <= 26, "{t}");
            assert!(
                t.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'v').contains(&b)),
                "{t}"
            );
        }
        assert_ne!(new_token(), new_token());
    }

    #[test]
    fn basic_decoding() {
        assert_eq!(
            decode_basic("cm9vdDo="),
            Some(("root".into(), String::new()))
        );
        assert_eq!(
            decode_basic("cm9vdDo"),
            Some(("root".into(), String::new()))
        );
        assert_eq!(
            decode_basic(&STANDARD.encode("u:p:q")),
            Some(("u".into(), "p:q".into()))
        );
        assert_eq!(decode_basic(&STANDARD.encode("nocolon")), None);
        assert_eq!(decode_basic("!!!"), None);
    }

    #[test]
    fn header_lookup_is_case_insensitive() {
        let mut h = HeaderMap::new();
        h.append(AUTHORIZATION, HeaderValue::from_static("bearer abc"));
        assert_eq!(auth_value(&h, "Bearer "), Some("abc"));
        assert_eq!(auth_value(&h, "Basic "), None);
    }

    #[test]
    fn messages() {
        assert_eq!(
            expired_token_message("t"),
            "bearer token expired: t, try reconnect, currently in fe.conf, `arrow_flight_token_alive_time`=4320"
        );
        assert!(invalid_token_message("x").starts_with("invalid bearer token: x, try reconnect"));
        assert!(invalid_token_message("x").contains("may have been evict"));
        assert_eq!(
            access_denied_message("root", "127.0.0.1", true),
            "Unable to authenticate user root, exception: errCode = 2, detailMessage = Access denied for user \
             'root@127.0.0.1' (using password: YES)"
        );
    }
}
