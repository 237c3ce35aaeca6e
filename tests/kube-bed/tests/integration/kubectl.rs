//! Runs `conformance/kubectl.sh` (kubectl against a fresh `dcs-kube-bed --kubelet`) when
//! kubectl is installed.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn kubectl_conformance_script_passes() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        // CI machines have kubectl; there a missing one is a broken set-up, not a reason to pass.
        assert!(
            std::env::var_os("CI").is_none(),
            "kubectl is not installed, and CI needs it"
        );
        eprintln!("kubectl is not installed; skipping the kubectl conformance script");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance/kubectl.sh");
    let mut child = Command::new("bash")
        .arg(script)
        .env_remove("KUBECONFIG")
        .env("KUBE_BED_BIN", env!("CARGO_BIN_EXE_dcs-kube-bed"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("bash runs");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if child.try_wait().expect("waitable").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kubectl.sh did not finish in 300 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(out.status.success(), "kubectl.sh failed:\n{text}");
    assert!(
        text.lines().any(|l| l.ends_with(" passed, 0 failed")),
        "{text}"
    );
}
