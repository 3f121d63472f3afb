//! `ncclprof-tui`: the terminal viewer for the ncclprof NCCL profiler plugin.
//!
//! Sources (live rendezvous directories, the demo simulator, files) yield the same frames; the
//! [`model`] ingests them into a compact time-indexed store; the views render window queries.

#![deny(unsafe_code)]

pub mod action;
pub mod app;
pub mod cli;
pub mod commands;
pub mod event_loop;
pub mod keymap;
pub mod model;
pub mod term;
pub mod ui;
