//! Terminal setup and teardown: raw mode, alternate screen, mouse; restored on drop, on panic
//! (ratatui's hook) and on SIGTERM/SIGINT/SIGHUP (a flag the event loop polls).
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
        let terminal = ratatui::try_init()?;
        let _ = execute!(stdout(), EnableMouseCapture);
        Ok(Term { terminal })
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let _ = execute!(stdout(), DisableMouseCapture);
        ratatui::restore();
    }
}
