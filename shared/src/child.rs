//! Child processes that cannot outlive the process that started them: the viewer's `demo`
//! simulator and the simulator's per-rank processes run until told to stop, so a parent that
//! dies without stopping them (SIGKILL, an abort, a closed terminal) must not leave them
//! spinning for good.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Have the kernel send `sig` to the child started from `cmd` when the thread that starts it
/// exits (`PR_SET_PDEATHSIG`; Linux). Start it from a thread that lives as long as the child
/// should: the main thread, or one that waits for the child.
pub fn die_with_parent(cmd: &mut Command, sig: i32) -> &mut Command {
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal will come.
            // (An errno, not a message: nothing may allocate here, and std hands only the
            // errno back to the parent.)
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The signal comes when the starting thread ends, as it does when a parent dies: a
    /// `sleep` started from a thread that then exits is killed.
    #[test]
    fn the_child_gets_the_signal_when_its_parent_dies() {
        let mut child = std::thread::spawn(|| {
            die_with_parent(&mut Command::new("sleep"), libc::SIGKILL)
                .arg("30")
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let t0 = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(st.signal(), Some(libc::SIGKILL));
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "still running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
