//! gRPC over TLS on the FE Flight SQL and BE Flight ports, through arrow-flight's Flight SQL
//! client on tonic's TLS channel: locations say `grpc+tls://`, DoGet works there.

use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use super::{tls_emu, wrong_ca};
use crate::common::{STUDENT_DDL, setup_sql};

/// A TLS channel to `127.0.0.1:port`, verifying the server as `localhost` against `ca_pem`.
async fn tls_channel(port: u16, ca_pem: &str) -> Result<Channel, tonic::transport::Error> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    Endpoint::from_shared(format!("https://127.0.0.1:{port}"))?
        .tls_config(tls)?
        .connect()
        .await
}

/// Connect and handshake; the failure as text.
async fn login(port: u16, ca_pem: Option<&str>) -> Result<FlightSqlServiceClient<Channel>, String> {
    let channel = match ca_pem {
        Some(ca) => tls_channel(port, ca).await,
        None => {
            Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
                .unwrap()
                .connect()
                .await
        }
    }
    .map_err(|e| format!("connect: {e:?}"))?;
    let mut c = FlightSqlServiceClient::new(channel);
    c.handshake("root", "")
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    Ok(c)
}

#[tokio::test]
async fn queries_hand_out_tls_locations_that_serve_over_tls() {
    let (emu, pki) = tls_emu().await;
    setup_sql(
        &emu,
        &[
            "CREATE DATABASE test",
            STUDENT_DDL,
            "INSERT INTO test.student (id, name) VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        ],
    )
    .await;
    let (fe, be) = (emu.ports().fe_flight_port, emu.ports().be_flight_port);
    let mut c = login(fe, Some(&pki.ca_pem)).await.unwrap();

    let info = c
        .execute("SELECT id FROM test.student".into(), None)
        .await
        .unwrap();
    let ep = &info.endpoint[0];
    assert_eq!(ep.location[0].uri, format!("grpc+tls://127.0.0.1:{be}"));
    let mut be_client = FlightSqlServiceClient::new(tls_channel(be, &pki.ca_pem).await.unwrap());
    let batches: Vec<_> = be_client
        .do_get(ep.ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3);

    // FE-local results are served by the FE itself, at a TLS location too.
    let info = c.execute("SHOW DATABASES".into(), None).await.unwrap();
    assert_eq!(
        info.endpoint[0].location[0].uri,
        format!("grpc+tls://127.0.0.1:{fe}")
    );
    let batches: Vec<_> = c
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(batches.iter().map(|b| b.num_rows()).sum::<usize>() >= 1);
}

#[tokio::test]
async fn a_wrong_ca_is_refused_on_both_flight_ports() {
    let (emu, pki) = tls_emu().await;
    let other = wrong_ca();
    for port in [emu.ports().fe_flight_port, emu.ports().be_flight_port] {
        let err = tls_channel(port, &other).await.expect_err("refused");
        let text = format!("{err:?}");
        assert!(text.contains("UnknownIssuer"), "{text}");
    }
    login(emu.ports().fe_flight_port, Some(&pki.ca_pem))
        .await
        .expect("the right CA still works");
}

#[tokio::test]
async fn a_plaintext_grpc_client_gets_nothing_from_a_tls_port() {
    let (emu, _pki) = tls_emu().await;
    let err = login(emu.ports().fe_flight_port, None)
        .await
        .expect_err("plaintext refused");
    assert!(
        err.starts_with("connect: ") || err.starts_with("handshake: "),
        "{err}"
    );
    assert!(emu.doris.counters.get("tls_handshake_failed") >= 1);
}
