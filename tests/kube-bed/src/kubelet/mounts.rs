//! A container's private mount namespace.
//!
//! A fresh thread enters a new mount namespace (`unshare(CLONE_NEWNS)` moves only the calling
//! thread), opens every volume source, then mounts each at its mount path from its descriptor
//! (`/proc/self/fd/N`) and starts the container's process, which inherits the namespace; the
//! thread then ends. Because the sources are opened before anything is mounted, a mount path
//! that hides a source (an emptyDir at `/tmp` while the kubelet's work directory is under
//! `/tmp`) cannot break a later mount, whatever the order of the mounts and wherever the work
//! directory is; a program hidden by a mount is executed from a descriptor opened beforehand
//! too. Mounts are made in the order of the container's `volumeMounts`, and their mount points
//! are created in the container's view (below an earlier mount, inside that volume).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

/// A volume bound into the container: host path, container path, read-only.
pub(super) type Bind = (PathBuf, String, bool);

/// Whether a mount at one of `mount_paths` hides `path` from the container.
pub(super) fn hidden_by<'a>(path: &Path, mut mount_paths: impl Iterator<Item = &'a str>) -> bool {
    mount_paths.any(|m| path.starts_with(m))
}

fn open_path(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH)
        .open(path)
}

fn context(what: String) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn errno(what: String) -> impl FnOnce(nix::errno::Errno) -> io::Error {
    move |e| context(what)(io::Error::from(e))
}

/// In the calling thread's new namespace: the mounts, in order.
fn mount_all(binds: &[Bind]) -> io::Result<()> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(errno("unshare(CLONE_NEWNS)".into()))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(errno("making the mounts private".into()))?;
    // Every source first: no mount below hides them any more once they are open.
    let sources = binds
        .iter()
        .map(|(src, _, _)| {
            open_path(src).map_err(context(format!("volume source {}", src.display())))
        })
        .collect::<io::Result<Vec<File>>>()?;
    for ((src, dst, read_only), fd) in binds.iter().zip(&sources) {
        let is_dir = fd.metadata().map(|m| m.is_dir()).unwrap_or(false);
        let point = Path::new(dst);
        if is_dir {
            std::fs::create_dir_all(point)
        } else {
            point
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    match std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(point)
                    {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
                        _ => Ok(()),
                    }
                })
        }
        .map_err(context(format!("creating mount point {dst}")))?;
        mount(
            Some(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str()),
            point,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(errno(format!("mounting {} at {dst}", src.display())))?;
        if *read_only {
            mount(
                None::<&str>,
                point,
                None::<&str>,
                MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
                None::<&str>,
            )
            .map_err(errno(format!("making {dst} read-only")))?;
        }
    }
    Ok(())
}

/// Keeps a container's starting thread alive: the process gets SIGKILL (`PR_SET_PDEATHSIG`)
/// when that thread ends, which is when this is dropped (or the kubelet's process dies).
pub(super) struct Tie(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

/// Starts a container's process from a thread of its own that lives until the returned [`Tie`]
/// is dropped. With `binds` (and `can_mount`), the thread first enters a new mount namespace,
/// mounts them (then the root mount read-only when `read_only_root`), and calls `start` there
/// with the path to execute `program` by (`/proc/self/fd/N` when a mount hides it); the process
/// `start` spawns lives in that namespace.
pub(super) fn start_tied<T: Send + 'static>(
    binds: Vec<Bind>,
    read_only_root: bool,
    can_mount: bool,
    program: PathBuf,
    start: impl FnOnce(&Path) -> io::Result<T> + Send + 'static,
) -> io::Result<(T, Tie)> {
    let (result_tx, result_rx) = std::sync::mpsc::channel();
    let (tie_tx, tie_rx) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("container".into())
        .spawn(move || {
            let started = (|| {
                if !can_mount || (binds.is_empty() && !read_only_root) {
                    return start(&program);
                }
                // Opened before the mounts; not close-on-exec, so a script's interpreter can
                // read it as /dev/fd/N.
                let program_fd = if hidden_by(&program, binds.iter().map(|(_, d, _)| d.as_str())) {
                    let fd = open_path(&program)
                        .map_err(context(format!("program {}", program.display())))?;
                    fcntl(&fd, FcntlArg::F_SETFD(FdFlag::empty()))
                        .map_err(errno(format!("program {}", program.display())))?;
                    Some(fd)
                } else {
                    None
                };
                mount_all(&binds)?;
                if read_only_root {
                    mount(
                        None::<&str>,
                        "/",
                        None::<&str>,
                        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY,
                        None::<&str>,
                    )
                    .map_err(errno("making the root filesystem read-only".into()))?;
                }
                match &program_fd {
                    Some(fd) => start(Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd()))),
                    None => start(&program),
                }
            })();
            let ok = started.is_ok();
            let _ = result_tx.send(started);
            if ok {
                // Until the tie is dropped: the child's parent-death signal watches this thread.
                let _ = tie_rx.recv();
            }
        })?;
    let value = result_rx
        .recv()
        .map_err(|_| io::Error::other("container thread panicked"))??;
    Ok((value, Tie(tie_tx)))
}

/// Whether this process may create mount namespaces (root, and not forbidden by a sandbox).
pub(super) fn can_unshare_mounts() -> bool {
    nix::unistd::geteuid().is_root()
        && std::thread::spawn(|| unshare(CloneFlags::CLONE_NEWNS).is_ok())
            .join()
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_under_a_mount_path_are_hidden() {
        let bin = Path::new("/tmp/checkout/target/debug/dcs-operator");
        assert!(hidden_by(bin, ["/var/run/secrets", "/tmp"].into_iter()));
        assert!(hidden_by(bin, ["/tmp/checkout/"].into_iter()));
        assert!(!hidden_by(bin, ["/tmp/check", "/var/tmp"].into_iter()));
        assert!(!hidden_by(Path::new("/bin/sh"), ["/tmp"].into_iter()));
    }
}
