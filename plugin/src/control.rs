//! The activation mask: NCCL's one process-global `int` (spec §4.8), written atomically by
//! `init`, by the viewer's control messages and by `exampleProfilerStart/Stop` (spec §6.3).

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};

use ncclprof_shared::mask;

pub struct Control {
    /// The core's mask (address from the most recent `init`).
    core_mask: AtomicPtr<c_int>,
    /// The mask the user wants while started.
    wanted: AtomicU32,
    /// Started (mask applied) or stopped (0 written).
    active: AtomicBool,
    /// Bits the API version in use can receive.
    supported: AtomicU32,
    /// Bumped on every change, so the drain thread sends a MaskAck.
    pub changes: AtomicU32,
    /// The mask last written into the core.
    written: AtomicU32,
    /// Bumped when a write turns KernelCh or ProxyOp on or off (see
    /// `completion::SignalsWatch`; `changes` moves on every `init` too).
    pub signal_changes: AtomicU32,
    /// One `apply` at a time (init on several threads, the viewer's SetMask, Start/Stop):
    /// computing the mask, writing it into the core and recording it must not interleave,
    /// or the core could keep a stale mask that `in_force` and `written` do not show. Held
    /// for nanoseconds, and never on a hot path.
    apply_lock: std::sync::Mutex<()>,
}

impl Control {
    pub fn new(initial: u32) -> Control {
        Control {
            core_mask: AtomicPtr::new(std::ptr::null_mut()),
            wanted: AtomicU32::new(initial),
            active: AtomicBool::new(true),
            supported: AtomicU32::new(mask::ALL_V6),
            changes: AtomicU32::new(0),
            written: AtomicU32::new(initial),
            signal_changes: AtomicU32::new(0),
            apply_lock: std::sync::Mutex::new(()),
        }
    }

    /// Called by every `init` with the core's mask pointer: write the mask in force.
    pub fn attach(&self, core_mask: *mut c_int, api_version: u32) {
        self.supported
            .store(mask::supported_by_api(api_version), Ordering::Relaxed);
        if !core_mask.is_null() {
            self.core_mask.store(core_mask, Ordering::Release);
        }
        self.apply();
    }

    fn apply(&self) {
        let _one_at_a_time = self.apply_lock.lock().unwrap_or_else(|e| e.into_inner());
        let m = self.in_force();
        let p = self.core_mask.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: the pointer is the core's global mask int, valid while the core is
            // loaded (it outlives every communicator); the core reads it with relaxed atomic
            // loads, so an atomic store is the right access.
            unsafe { AtomicI32::from_ptr(p) }.store(m as i32, Ordering::Relaxed);
        }
        let children = ncclprof_shared::kind::EventKind::KernelCh.bit()
            | ncclprof_shared::kind::EventKind::ProxyOp.bit();
        if (self.written.swap(m, Ordering::AcqRel) ^ m) & children != 0 {
            self.signal_changes.fetch_add(1, Ordering::Release);
        }
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// The mask written into the core now.
    pub fn in_force(&self) -> u32 {
        if self.active.load(Ordering::Relaxed) {
            self.wanted.load(Ordering::Relaxed) & self.supported.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    pub fn wanted(&self) -> u32 {
        self.wanted.load(Ordering::Relaxed)
    }

    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Viewer `SetMask`: remember the mask; applied at once if started.
    pub fn set_mask(&self, m: u32) {
        self.wanted.store(m & mask::ALL_V6, Ordering::Relaxed);
        self.apply();
    }

    /// `exampleProfilerStart(mask)`.
    pub fn start(&self, m: u32) {
        self.wanted.store(m & mask::ALL_V6, Ordering::Relaxed);
        self.active.store(true, Ordering::Relaxed);
        self.apply();
    }

    /// `exampleProfilerStop()`.
    pub fn stop(&self) {
        self.active.store(false, Ordering::Relaxed);
        self.apply();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_stop_and_clamping() {
        let mut core: c_int = 0;
        let c = Control::new(0x7FFF);
        c.attach(&mut core, 4);
        assert_eq!(core, 0xFF); // v4 knows bits 0–7
        c.stop();
        assert_eq!(core, 0);
        c.set_mask(2);
        assert_eq!(core, 0, "stopped: set_mask only remembers");
        c.start(6);
        assert_eq!(core, 6);
        c.set_mask(0xFFFF_FFFF);
        assert_eq!(core, 0xFF, "never writes bits NCCL doesn't define");
    }
}
