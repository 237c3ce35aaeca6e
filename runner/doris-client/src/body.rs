//! Reading an HTTP answer's body with a cap, so a server that answers without end (or a hostile
//! one a spec points at) costs at most the cap in memory.

/// The most of an answer body that is read. Doris's JSON answers (Stream Load, 2PC, `/api/tso`,
/// `_schema`, `query_plan`) are a few KiB; a longer body is cut there and fails to parse as what
/// it should be, which fails the call, never the process.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// The body of `resp`, at most `cap` bytes of it (the rest is not read), as text (invalid UTF-8
/// replaced).
///
/// # Errors
/// The transport's error while reading (a timeout, a reset).
pub async fn read_capped(
    mut resp: reqwest::Response,
    cap: usize,
) -> Result<String, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = cap - body.len();
        if chunk.len() >= room {
            body.extend_from_slice(&chunk[..room]);
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(body) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The body of a Doris answer, at most [`MAX_ANSWER_BYTES`] of it ([`read_capped`]).
///
/// # Errors
/// As [`read_capped`].
pub async fn read_answer(resp: reqwest::Response) -> Result<String, reqwest::Error> {
    read_capped(resp, MAX_ANSWER_BYTES).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers 200 with an endless body.
    async fn endless() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                .await;
            let chunk = format!("{:x}\r\n{}\r\n", 4096, "x".repeat(4096));
            while s.write_all(chunk.as_bytes()).await.is_ok() {}
        });
        addr
    }

    #[tokio::test]
    async fn an_endless_body_is_read_up_to_the_cap_only() {
        let addr = endless().await;
        let http = crate::tls::plain_http_client(reqwest::Client::builder()).unwrap();
        let resp = http.get(format!("http://{addr}/")).send().await.unwrap();
        let body = read_capped(resp, 10_000).await.unwrap();
        assert_eq!(body.len(), 10_000);
        assert!(body.bytes().all(|b| b == b'x'));
    }
}
