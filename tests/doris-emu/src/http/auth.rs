//! HTTP Basic authentication as Doris parses it (`Authorization: <scheme> <base64(user:pass)>`,
//! split at the first `:`; a `user@cluster` suffix is dropped).

use axum::http::HeaderMap;
use base64::Engine as _;

/// Credentials from a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

/// Parse the `Authorization` header; `None` when absent or malformed.
pub fn parse_basic(headers: &HeaderMap) -> Option<Credentials> {
    let raw = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let parts: Vec<&str> = raw.split(' ').collect();
    if parts.len() != 2 {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(parts[1].trim())
        .ok()?;
    let s = String::from_utf8(decoded).ok()?;
    let (user, password) = s.split_once(':')?;
    let user = user.split('@').next().unwrap_or(user).to_string();
    Some(Credentials {
        user,
        password: password.to_string(),
    })
}

/// Doris's access-denied text (`ErrorCode.ERR_ACCESS_DENIED_ERROR`).
pub fn access_denied(user: &str, remote_ip: &str, password: &str) -> String {
    format!(
        "Access denied for user '{user}@{remote_ip}' (using password: {})",
        if password.is_empty() { "NO" } else { "YES" }
    )
}

/// Percent-encode one userinfo component (user or password) the way `java.net.URI` quotes it.
pub fn encode_userinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn h(v: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(
            axum::http::header::AUTHORIZATION,
            HeaderValue::from_str(v).unwrap(),
        );
        m
    }

    #[test]
    fn basic() {
        assert_eq!(
            parse_basic(&h("Basic cm9vdDo=")),
            Some(Credentials {
                user: "root".into(),
                password: String::new()
            })
        );
        // password with a colon
        let enc = base64::engine::general_purpose::STANDARD.encode("u:p:q");
        assert_eq!(
            parse_basic(&h(&format!("Basic {enc}"))).unwrap().password,
            "p:q"
        );
        assert_eq!(parse_basic(&h("Basic !!!")), None);
        assert_eq!(parse_basic(&h("Basic")), None);
        assert_eq!(parse_basic(&HeaderMap::new()), None);
    }

    #[test]
    fn userinfo() {
        assert_eq!(encode_userinfo("a b@c:d/é"), "a%20b%40c%3Ad%2F%C3%A9");
        assert_eq!(encode_userinfo("root"), "root");
    }
}
