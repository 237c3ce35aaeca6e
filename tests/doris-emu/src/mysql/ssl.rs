//! The MySQL SSL upgrade on the query port (docs/doris-protocols.md §8), which the MySQL server
//! library (opensrv-mysql 0.7 built without its `tls` feature, whose rustls is older than the
//! workspace's) does not do.
//!
//! The standard exchange: the server's greeting advertises `CLIENT_SSL`; the client answers with
//! an SSLRequest (the first 32 bytes of a HandshakeResponse41, `CLIENT_SSL` set, seq 1), then the
//! TLS handshake, then its HandshakeResponse (seq 2) inside TLS. Here the greeting and the
//! SSLRequest are handled before the library starts; the library then runs on the TLS stream
//! through [`SslStream`], which hides from it what it must not see: its own greeting (already
//! sent, with the same salt) is swallowed, and `CLIENT_SSL` is cleared in the client's
//! HandshakeResponse (the library refuses `CLIENT_SSL` it did not offer). From there on the
//! library speaks as usual, its sequence numbers following the client's.
//!
//! A client that answers the greeting with a plaintext HandshakeResponse is refused with error
//! 3159, as MySQL does under `require_secure_transport=ON`.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::faults::Counters;
use crate::tls::HANDSHAKE_TIMEOUT;

const CLIENT_CONNECT_WITH_DB: u32 = 0x0000_0008;
const CLIENT_PROTOCOL_41: u32 = 0x0000_0200;
const CLIENT_SSL: u32 = 0x0000_0800;
const CLIENT_SECURE_CONNECTION: u32 = 0x0000_8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x0008_0000;
const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 0x0020_0000;
const CLIENT_DEPRECATE_EOF: u32 = 0x0100_0000;

/// What opensrv-mysql offers, plus `CLIENT_SSL`.
const SERVER_CAPABILITIES: u32 = CLIENT_PROTOCOL_41
    | CLIENT_SECURE_CONNECTION
    | CLIENT_PLUGIN_AUTH
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_DEPRECATE_EOF
    | CLIENT_SSL;

/// MySQL's `ER_SECURE_TRANSPORT_REQUIRED`.
pub const SECURE_TRANSPORT_REQUIRED: u16 = 3159;
/// Its message, as MySQL words it.
pub const SECURE_TRANSPORT_REQUIRED_MSG: &str =
    "Connections using insecure transport are prohibited while --require_secure_transport=ON.";

/// The longest first packet read before TLS (an SSLRequest is 32 bytes; a plaintext
/// HandshakeResponse, refused anyway, a few hundred).
const MAX_FIRST_PACKET: usize = 64 * 1024;

/// Why a connection did not get as far as the library.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The client logged in without TLS; it was told so (error 3159).
    #[error("client did not request SSL; refused with error {SECURE_TRANSPORT_REQUIRED}")]
    Plaintext,
    /// The TLS handshake failed or timed out.
    #[error("TLS handshake: {0}")]
    Handshake(String),
    /// The connection broke or the client sent nonsense.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The greeting the emulator sends, byte for byte what opensrv-mysql 0.7 writes
/// (`AsyncMysqlIntermediary::init_before_ssl`) with `CLIENT_SSL` added.
pub fn greeting(version: &str, connection_id: u32, salt: &[u8; 20]) -> Vec<u8> {
    const PLUGIN: &str = "mysql_native_password";
    let caps = SERVER_CAPABILITIES.to_le_bytes();
    let mut p = Vec::with_capacity(80);
    p.push(10); // protocol version
    p.extend_from_slice(version.as_bytes());
    p.push(0);
    p.extend_from_slice(&connection_id.to_le_bytes());
    p.extend_from_slice(&salt[..8]);
    p.push(0);
    p.extend_from_slice(&caps[..2]);
    p.push(0x21); // utf8_general_ci
    p.extend_from_slice(&[0, 0]); // status flags
    p.extend_from_slice(&caps[2..]);
    p.push((salt.len() + 1) as u8);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(&salt[8..]);
    p.push(0);
    p.extend_from_slice(PLUGIN.as_bytes());
    p.push(0);
    p
}

/// An ERR packet payload (`0xff`, code, `#`, SQLSTATE, message).
fn err_payload(code: u16, sqlstate: &str, msg: &str) -> Vec<u8> {
    let mut p = vec![0xff];
    p.extend_from_slice(&code.to_le_bytes());
    p.push(b'#');
    p.extend_from_slice(sqlstate.as_bytes());
    p.extend_from_slice(msg.as_bytes());
    p
}

async fn write_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|n| *n < 1 << 24)
        .ok_or_else(|| std::io::Error::other("packet too long"))?;
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&len.to_le_bytes()[..3]);
    out.push(seq);
    out.extend_from_slice(payload);
    s.write_all(&out).await?;
    s.flush().await
}

async fn read_packet(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut header = [0u8; 4];
    s.read_exact(&mut header).await?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    if len > MAX_FIRST_PACKET {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("first packet of {len} bytes"),
        ));
    }
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await?;
    Ok((header[3], payload))
}

/// Greet, take the SSLRequest and do the TLS handshake; the stream returned is where the MySQL
/// library takes over. A client that logs in without TLS is answered with error 3159 (counted as
/// `mysql_plaintext_refused`); a failed handshake is counted as `tls_handshake_failed`.
pub async fn upgrade(
    mut tcp: TcpStream,
    acceptor: &TlsAcceptor,
    greeting: &[u8],
    counters: &Counters,
) -> Result<SslStream, UpgradeError> {
    write_packet(&mut tcp, 0, greeting).await?;
    let (seq, first) = read_packet(&mut tcp).await?;
    let caps = match first.get(..4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "handshake response shorter than its capability flags",
            )
            .into());
        }
    };
    if caps & CLIENT_SSL == 0 {
        counters.hit("mysql_plaintext_refused");
        let err = err_payload(
            SECURE_TRANSPORT_REQUIRED,
            "HY000",
            SECURE_TRANSPORT_REQUIRED_MSG,
        );
        // The client may be gone already; it was refused either way.
        let _ = write_packet(&mut tcp, seq.wrapping_add(1), &err).await;
        return Err(UpgradeError::Plaintext);
    }
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            counters.hit("tls_handshake_failed");
            return Err(UpgradeError::Handshake(e.to_string()));
        }
        Err(_) => {
            counters.hit("tls_handshake_failed");
            return Err(UpgradeError::Handshake("timed out".into()));
        }
    };
    Ok(SslStream {
        inner: tls,
        greeting_skip: Skip::Header {
            have: 0,
            len: [0; 4],
        },
        read: 0,
    })
}

/// Bytes of the library's own greeting still to swallow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// Reading its 4-byte header.
    Header { have: usize, len: [u8; 4] },
    /// Swallowing its payload.
    Payload(usize),
    /// Done: everything written goes to the client.
    Done,
}

impl Skip {
    /// Swallow what belongs to the greeting from the start of `buf`; returns how many bytes.
    fn consume(&mut self, buf: &[u8]) -> usize {
        let mut used = 0;
        while used < buf.len() {
            match *self {
                Skip::Header { mut have, mut len } => {
                    len[have] = buf[used];
                    have += 1;
                    used += 1;
                    *self = if have < 4 {
                        Skip::Header { have, len }
                    } else {
                        match u32::from_le_bytes([len[0], len[1], len[2], 0]) as usize {
                            0 => Skip::Done,
                            n => Skip::Payload(n),
                        }
                    };
                }
                Skip::Payload(n) => {
                    let take = n.min(buf.len() - used);
                    used += take;
                    *self = if take == n {
                        Skip::Done
                    } else {
                        Skip::Payload(n - take)
                    };
                }
                Skip::Done => break,
            }
        }
        used
    }
}

/// The byte of the stream holding `CLIENT_SSL`: the second byte of the HandshakeResponse
/// payload, after the 4-byte packet header.
const SSL_FLAG_OFFSET: u64 = 5;
const SSL_FLAG_BIT: u8 = (CLIENT_SSL >> 8) as u8;

/// The TLS stream as the MySQL library sees it (module docs).
pub struct SslStream {
    inner: TlsStream<TcpStream>,
    greeting_skip: Skip,
    /// Bytes read so far (only the first few matter).
    read: u64,
}

impl AsyncRead for SslStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let fresh = &mut buf.filled_mut()[before..];
            let start = this.read;
            if (start..start + fresh.len() as u64).contains(&SSL_FLAG_OFFSET) {
                fresh[(SSL_FLAG_OFFSET - start) as usize] &= !SSL_FLAG_BIT;
            }
            this.read += fresh.len() as u64;
        }
        r
    }
}

impl AsyncWrite for SslStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.greeting_skip != Skip::Done && !buf.is_empty() {
            return Poll::Ready(Ok(this.greeting_skip.consume(buf)));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_advertises_ssl_and_carries_the_salt() {
        let salt = *b"abcdefghijklmnopqrst";
        let g = greeting("5.7.99", 7, &salt);
        assert_eq!(g[0], 10);
        let after_version = 1 + "5.7.99".len() + 1;
        assert_eq!(&g[after_version..after_version + 4], &7u32.to_le_bytes());
        assert_eq!(&g[after_version + 4..after_version + 12], b"abcdefgh");
        let low = u16::from_le_bytes([g[after_version + 13], g[after_version + 14]]);
        assert_ne!(u32::from(low) & CLIENT_SSL, 0);
        assert!(g.ends_with(b"mysql_native_password\0"));
    }

    #[test]
    fn skip_swallows_exactly_one_packet_however_it_is_split() {
        let packet = [3u8, 0, 0, 0, b'a', b'b', b'c'];
        for split in 0..packet.len() {
            let mut s = Skip::Header {
                have: 0,
                len: [0; 4],
            };
            let (a, b) = packet.split_at(split);
            assert_eq!(s.consume(a), a.len());
            let mut rest = b.to_vec();
            rest.extend_from_slice(b"next");
            assert_eq!(s.consume(&rest), b.len(), "split at {split}");
            assert_eq!(s, Skip::Done);
        }
    }

    #[test]
    fn err_packet_has_code_state_and_message() {
        let p = err_payload(3159, "HY000", "no");
        assert_eq!(
            p,
            [
                0xff, 0x57, 0x0c, b'#', b'H', b'Y', b'0', b'0', b'0', b'n', b'o'
            ]
        );
    }
}
