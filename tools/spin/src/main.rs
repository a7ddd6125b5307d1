// SPDX-License-Identifier: GPL-2.0

//! `spin`: what a user of spin runs on the machine.
//!
//! - `spin check [--json] [PATH...]`: GPU memory providers, and for every disk (or the disks of
//!   the given files) whether P2P DMA to each provider is possible and exactly why not.
//! - `spin stat [-i SECS] [-c COUNT]`: the router's counters, system-wide and per disk; as
//!   rates per second when repeated.
//! - `spin calibrate DISK|FILE [--apply] [--png FILE] [--reps N]`: fits the cost model to the
//!   machine and, with `--apply`, sets it for the disk.
//!
//! Errors (bad arguments, a kernel without spin) print one line and exit with status 2.
//! `spin check` exits with 0 if P2P is possible for every named path (or, without paths, for
//! some disk and provider), else 1.

/// The decision core, compiled from the kernel's sources (`rust/spin/sched`), for its
/// parameter validation (the schedulers are unused here).
#[allow(dead_code, unused_imports)]
#[path = "../../../rust/spin/sched/mod.rs"]
mod sched;

/// The calibration fit, shared with the host crate (`tools/testing/spin/core`), which tests it.
#[allow(dead_code)]
mod calib;
mod calibrate;
mod check;
mod json;
mod png;
mod stat;
mod sys;

use std::process::ExitCode;

const USAGE: &str = "usage: spin check [--json] [PATH...]
       spin stat [-i SECS] [-c COUNT]
       spin calibrate DISK|FILE [--apply] [--png FILE] [--reps N] [--provider PCI]";

/// A one-line error for the user; exit status 2.
#[derive(Debug)]
pub struct Fail(pub String);

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(e.to_string())
    }
}

fn run(args: &[String]) -> Result<u8, Fail> {
    match args.first().map(String::as_str) {
        Some("check") => check::main(&args[1..]),
        Some("stat") => stat::main(&args[1..]),
        Some("calibrate") => calibrate::main(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(0)
        }
        Some(other) => Err(Fail(format!("unknown command '{other}'\n{USAGE}"))),
        None => Err(Fail(USAGE.to_string())),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(Fail(msg)) => {
            eprintln!("spin: {msg}");
            ExitCode::from(2)
        }
    }
}
