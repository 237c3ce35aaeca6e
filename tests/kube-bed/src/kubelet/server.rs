//! The kubelet's HTTPS endpoint, as the API server uses it: `/containerLogs/{ns}/{pod}/{container}`
//! for `kubectl logs`, and `/healthz`. Only clients with a certificate of the cluster CA get in
//! (the API server presents `kube-apiserver-kubelet-client`).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::net::TcpListener;

use super::Shared;
use super::logs::{Answer, answer};
use crate::Error;
use crate::pki::CertKey;

type Body = BoxBody<Bytes, std::convert::Infallible>;

/// TLS with the kubelet's serving certificate, requiring a client certificate of `ca_pem`.
pub(super) fn tls_config(
    serving: &CertKey,
    ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, Error> {
    let tls = |e: String| Error::Tls(e);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| tls(e.to_string()))?)
            .map_err(|e| tls(e.to_string()))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| tls(e.to_string()))?;
    let certs = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())
        .map_err(|e| tls(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(body.into()).boxed())
        .expect("valid response")
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn handle(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    if path == "/healthz" {
        return text(StatusCode::OK, "ok");
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["containerLogs", ns, pod, container] => {
            match answer(shared, ns, pod, container, &query(&req)) {
                Answer::Text(t) => text(StatusCode::OK, t),
                Answer::Error(code, message) => text(
                    StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
                    message,
                ),
                Answer::Stream(rx) => {
                    let stream = futures::stream::unfold(rx, |mut rx| async move {
                        rx.recv()
                            .await
                            .map(|b| (Ok::<_, std::convert::Infallible>(Frame::data(b)), rx))
                    });
                    Response::builder()
                        .status(200)
                        .header("content-type", "text/plain")
                        .body(BodyExt::boxed(StreamBody::new(stream)))
                        .expect("valid response")
                }
            }
        }
        _ => text(
            StatusCode::NOT_FOUND,
            format!("{path}: not served by the process kubelet"),
        ),
    }
}

/// Accepts connections until aborted.
pub(super) async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let svc = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&shared, req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), svc)
                .await;
        });
    }
}
