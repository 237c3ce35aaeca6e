//! URLs as the client shows them: the `host:port` a URL points at ([`host_port`]), and a reqwest
//! error without the URL it names ([`without_url`]), which after a Doris redirect may carry
//! credentials.

use reqwest::Url;

/// The `host:port` a URL points at (the scheme's port when it names none), for messages.
pub(crate) fn host_port(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => "?".to_owned(),
    }
}

/// A reqwest error as text, with its causes, and without the URL it names (which after a Doris
/// redirect may carry credentials).
pub fn without_url(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    if let Some(url) = e.url() {
        msg = msg
            .replace(&format!(" for url ({url})"), "")
            .replace(url.as_str(), "<url>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}
