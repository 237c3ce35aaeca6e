//! The fault-injecting proxy: a request it dooms is applied by the API server, and the client
//! never hears so (the ambiguous answer).

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test]
async fn a_dropped_response_leaves_the_write_applied_and_the_client_in_the_dark() -> Result<()> {
    let ns = dcs_kube_bed::namespace("proxy").await?;
    let proxy = dcs_kube_bed::FaultProxy::start(ns.cp.address).await?;
    let via = dcs_kube_bed::control_plane::client_from_kubeconfig(
        &ns.cp.kubeconfig_via(&ns.name, proxy.address),
    )
    .await?;
    let through: Api<ConfigMap> = Api::default_namespaced(via);
    let direct: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let cm = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
    };

    // Untouched, the proxy is transparent (TLS verifies against the cluster CA through it).
    through
        .create(&PostParams::default(), &cm("before"))
        .await?;
    assert!(direct.get_opt("before").await?.is_some());

    proxy.drop_next_response();
    let lost = through
        .create(&PostParams::default(), &cm("ambiguous"))
        .await;
    assert!(lost.is_err(), "the client got an answer: {lost:?}");
    assert!(!proxy.armed());
    assert_eq!(proxy.dropped(), 1);
    // ... and yet the server applied it: a retry of the same create is a conflict.
    assert!(direct.get_opt("ambiguous").await?.is_some());
    match through
        .create(&PostParams::default(), &cm("ambiguous"))
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    Ok(())
}

/// One request to the proxy's control endpoint (plain HTTP/1.1): the status and the JSON state.
async fn control(
    at: std::net::SocketAddr,
    method: &str,
    path: &str,
) -> Result<(u16, serde_json::Value)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(at).await?;
    tcp.write_all(
        format!("{method} {path} HTTP/1.1\r\nHost: control\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await?;
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).unwrap_or_default().parse()?;
    Ok((status, serde_json::from_str(body)?))
}

/// What the e2e suite does through `dcs-kube-bed --pod-api-proxy`: a hold armed over HTTP
/// catches the next request, says when the server applied it while the client still waits, and
/// the release loses the answer; between the two the object is there for anyone to change.
#[tokio::test]
async fn a_hold_armed_over_http_keeps_the_client_waiting_until_released() -> Result<()> {
    let ns = dcs_kube_bed::namespace("proxy-control").await?;
    let proxy = dcs_kube_bed::FaultProxy::start(ns.cp.address).await?;
    let via = dcs_kube_bed::control_plane::client_from_kubeconfig(
        &ns.cp.kubeconfig_via(&ns.name, proxy.address),
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let at = listener.local_addr()?;
    let server = tokio::spawn(dcs_kube_bed::ProxyControl::serve(proxy, listener));
    let through: Api<ConfigMap> = Api::default_namespaced(via);
    let direct: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held"}, "data": {"k": "v"}}))?;

    assert_eq!(
        control(at, "POST", "/release").await?.0,
        409,
        "nothing is held yet"
    );
    // The connection is open before the hold (a new one's TLS handshake would be held instead).
    let warm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "warm"}}))?;
    through.create(&PostParams::default(), &warm).await?;
    let (status, state) = control(at, "POST", "/hold").await?;
    assert_eq!(
        (status, &state["armed"], &state["applied"]),
        (200, &json!(true), &json!(false))
    );
    let create = tokio::spawn(async move { through.create(&PostParams::default(), &cm).await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while control(at, "GET", "/").await?.1["applied"] != json!(true) {
        assert!(
            std::time::Instant::now() < deadline,
            "the held request was never applied"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Applied, and the client still waits: someone else writes meanwhile.
    assert!(!create.is_finished());
    let mut fenced = direct.get("held").await?;
    fenced
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("dcs.dev/fenced".into(), "by the test".into());
    direct
        .replace("held", &PostParams::default(), &fenced)
        .await?;
    assert_eq!(control(at, "POST", "/release").await?.0, 200);
    let lost = create.await?;
    assert!(lost.is_err(), "the client got an answer: {lost:?}");
    let state = control(at, "GET", "/").await?.1;
    assert_eq!(
        (&state["armed"], &state["dropped"]),
        (&json!(false), &json!(1))
    );
    // The object holds both writes: the client's, then the other one.
    let stored = direct.get("held").await?;
    assert_eq!(
        (
            stored.data.unwrap_or_default()["k"].as_str(),
            stored.metadata.annotations.unwrap_or_default()["dcs.dev/fenced"].as_str()
        ),
        ("v", "by the test")
    );
    server.abort();
    Ok(())
}
