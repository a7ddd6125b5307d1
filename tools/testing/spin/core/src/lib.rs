// SPDX-License-Identifier: GPL-2.0

//! Host build of spin's decision core.
//!
//! [`sched`] is compiled straight from `rust/spin/sched/` (the kernel sources, one copy), in a
//! `no_std` crate so that anything beyond `core` fails to build here as it would in the kernel.
//! [`calib`] is the userspace-only calibration fit (floating point; its source is the user
//! tool's, `tools/spin/src/calib.rs`), [`rng`] a small
//! deterministic generator for tests and the simulator.

#![no_std]

#[deny(missing_docs, clippy::float_arithmetic, unsafe_code)]
#[path = "../../../../../rust/spin/sched/mod.rs"]
pub mod sched;

#[path = "../../../../spin/src/calib.rs"]
pub mod calib;
pub mod rng;
