//! Child processes that never outlive the test run.
//!
//! Three layers: every child asks the kernel for SIGKILL when the thread that started it ends
//! (`PR_SET_PDEATHSIG`), so a test binary killed with SIGKILL takes them along; every child leads
//! its own process group, registered here, and an `atexit` hook kills those groups (a
//! container's shell and what it started) and removes the registered work directories when the
//! process exits normally, which is how test binaries end (statics are never dropped); and the
//! owners stop them gracefully on drop or shutdown. `PR_SET_PDEATHSIG` watches the *thread*, so
//! children are started from threads that live as long as they do: one keeper thread for the
//! control plane ([`spawn`]), one thread per container process (`kubelet::mounts`).

use std::collections::BTreeSet;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock, mpsc};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static HOOK: OnceLock<()> = OnceLock::new();

extern "C" fn at_exit() {
    if let Ok(groups) = GROUPS.lock() {
        for g in groups.iter() {
            let _ = killpg(Pid::from_raw(*g), Signal::SIGKILL);
        }
    }
    if let Ok(dirs) = DIRS.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn install_hook() {
    HOOK.get_or_init(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` that only takes locks and makes syscalls.
        unsafe {
            nix::libc::atexit(at_exit);
        }
    });
}

/// Kill process group `pgid` when this process exits, unless [`forget_group`] was called.
pub fn kill_group_at_exit(pgid: u32) {
    install_hook();
    GROUPS.lock().expect("lock").insert(pgid as i32);
}

/// The group has ended: no kill at exit (the id could be reused).
pub fn forget_group(pgid: u32) {
    GROUPS.lock().expect("lock").remove(&(pgid as i32));
}

/// Remove `dir` when this process exits.
pub fn remove_at_exit(dir: PathBuf) {
    install_hook();
    DIRS.lock().expect("lock").push(dir);
}

/// Makes `cmd`'s process its own process group leader that gets SIGKILL when the thread
/// spawning it ends.
pub fn die_with_spawner(cmd: &mut Command) {
    cmd.process_group(0);
    // SAFETY: between fork and exec only the async-signal-safe prctl(2) runs.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            Ok(())
        });
    }
}

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts `cmd` from the keeper thread, which lives as long as the process: the child dies with
/// this process, however it ends.
pub fn spawn(mut cmd: Command) -> io::Result<Child> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("child-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // Never reached while the sender lives in the static: the thread (and with it
                // the children's parent-death signal) ends with the process.
                loop {
                    std::thread::park();
                }
            })
            .expect("spawning the child-keeper thread");
        Mutex::new(tx)
    });
    die_with_spawner(&mut cmd);
    let (tx, rx) = mpsc::channel();
    keeper
        .lock()
        .expect("lock")
        .send((cmd, tx))
        .map_err(|_| io::Error::other("child-keeper thread gone"))?;
    let child = rx
        .recv()
        .map_err(|_| io::Error::other("child-keeper thread gone"))??;
    kill_group_at_exit(child.id());
    Ok(child)
}
