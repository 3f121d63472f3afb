//! Terminal setup and teardown: raw mode, alternate screen, mouse; restored on drop, on panic
//! (our panic hook, in place of ratatui's) and on SIGTERM/SIGINT/SIGHUP (a flag the event loop
//! polls). A terminal that hung up is not restored, and nothing more is written to it.
#![allow(unsafe_code)]

use std::io::stdout;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Route SIGTERM, SIGINT and SIGHUP to a flag (async-signal-safe: one atomic store).
pub fn install_signal_flag() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: the handler only performs an atomic store, which is async-signal-safe.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

/// Whether a termination signal arrived.
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// Owns the terminal; restores it when dropped.
pub struct Term {
    pub terminal: DefaultTerminal,
}

impl Term {
    pub fn new() -> anyhow::Result<Term> {
        install_signal_flag();
        RESTORED.store(false, Ordering::SeqCst);
        // ratatui's panic hook restores with `ratatui::restore`, which reports a failure with
        // `eprintln!`: replaced by ours, which cannot fail (see `restore`), whether or not
        // `try_init` succeeds (it installs its hook first).
        let original_hook = std::panic::take_hook();
        let init = ratatui::try_init();
        drop(std::panic::take_hook());
        std::panic::set_hook(Box::new(move |info| {
            restore();
            original_hook(info);
        }));
        let terminal = match init {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e.into());
            }
        };
        let _ = execute!(stdout(), EnableMouseCapture);
        Ok(Term { terminal })
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        restore();
    }
}

/// Whether the terminal was restored already (a panic restores in the hook, then again as
/// `Term` drops: the second `ESC[?1049l`, on the normal screen, could move the cursor back
/// over the panic message).
static RESTORED: AtomicBool = AtomicBool::new(false);

/// Leave mouse capture, raw mode and the alternate screen, once. A terminal that hung up (its
/// window closed, the SSH connection lost) cannot be restored and there is nobody to tell:
/// stdout and stderr are then pointed at /dev/null, so that no later write can fail. Rust's
/// print macros panic on a failed write, and before this a closed terminal made the viewer's
/// teardown panic inside its panic hook and abort (exit 134), so `demo` never stopped its
/// simulator: nine processes ran on for good. Any other failure leaves stdio alone, so a
/// panic's message and the exit error still reach a live terminal.
fn restore() {
    if RESTORED.swap(true, Ordering::SeqCst) {
        return;
    }
    let _ = execute!(stdout(), DisableMouseCapture);
    if let Err(e) = ratatui::try_restore()
        && hung_up(&e)
    {
        silence_stdio();
    }
}

/// Whether an error writing to or configuring the terminal means it is gone.
pub fn hung_up(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::ENXIO | libc::ENOTTY | libc::EBADF)
    )
}

/// Point stdout and stderr at /dev/null.
fn silence_stdio() {
    // SAFETY: open with a valid C string; dup2 and close on descriptors this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            // (It may itself be 1 or 2 if one was closed: keep that one open.)
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// Wait up to `timeout` for terminal input. An error means the terminal hung up.
///
/// When stdin is the terminal, this polls it directly first: after a hangup crossterm's own
/// `poll` sees the tty readable forever, reads 0 bytes and spins at 100 % CPU without returning,
/// so an orphaned viewer would never notice its SIGHUP. crossterm is only asked once there is
/// real input.
pub fn wait_input(timeout: std::time::Duration) -> std::io::Result<bool> {
    // SAFETY: isatty has no preconditions.
    if unsafe { libc::isatty(0) } != 1 {
        return ratatui::crossterm::event::poll(timeout);
    }
    let mut pfd = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    if pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "the terminal hung up",
        ));
    }
    if pfd.revents & libc::POLLIN == 0 {
        return Ok(false);
    }
    ratatui::crossterm::event::poll(std::time::Duration::ZERO)
}
