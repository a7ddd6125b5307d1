// SPDX-License-Identifier: GPL-2.0

//! The pure decision core of spin: how to split a GPU read between the page cache and NVMe
//! peer-to-peer DMA.
//!
//! A read of `N` pages, some of them in the page cache, is served by a sequence of segments,
//! each copied from the page cache (cached pages only) or read by the device straight into GPU
//! memory. The cost model is Eq. 1 of the SPIN paper (USENIX ATC'17, §4.3.1):
//!
//! ```text
//! T_p2p(s) = C_p2p                               if s <  S_cutoff
//!          = C_p2p + (s - S_cutoff) / BW_p2p     if s >= S_cutoff
//! T_pc(s)  = s / BW_pc
//! ```
//!
//! [`cost`] validates device parameters (including the physical-consistency rule
//! `C_p2p >= S_cutoff / BW_p2p`) and turns them into an integer model in picoseconds and pages.
//! [`runs`] holds the residency of a request as alternating runs. The schedulers all write a
//! [`Segment`] sequence into a caller-provided slice and never allocate:
//!
//! * [`greedy`]: the paper's heuristic, with its interpretations documented;
//! * [`released`]: the rule of SPIN's released code (a cached run is copied only if it is at
//!   least 256 pages or 20% of the request);
//! * [`optimal`]: the exact minimum of the additive cost at page granularity, linear in runs;
//! * [`overlap`]: the makespan objective `max(device time, CPU time)` for a router that keeps
//!   P2P I/O in flight while the CPU copies, with a certified lower bound.
//!
//! [`readahead`] decides when a small sequential read takes the page cache with read-ahead
//! (SPIN's P-readahead) and keeps the books of the bounded GPU read-ahead partition.
//!
//! [`plan`] turns a byte request into legs: the unaligned head and tail through the page cache,
//! the schedule of the pages in between clipped to the direct-I/O alignment.
//!
//! Only `core` is used, so the same files build into the kernel (`rust/spin/`) and into the host
//! crate `tools/testing/spin/core` (tests, property tests, simulator, benchmark). [`cases`]
//! holds the unit tests both run. The router uses [`overlap`] (built on [`optimal`]'s search),
//! [`plan`] and [`readahead`]; the research baselines [`greedy`] and [`released`] are built into
//! the kernel only with its KUnit tests (`CONFIG_SPIN_KUNIT_TEST`), which compare them. See
//! Documentation/spin/sched.rst for the model, the proofs and the measured numbers.

pub mod cost;
#[cfg(any(not(CONFIG_RUST), CONFIG_SPIN_KUNIT_TEST))]
pub mod greedy;
pub mod optimal;
pub mod overlap;
pub mod plan;
pub mod readahead;
#[cfg(any(not(CONFIG_RUST), CONFIG_SPIN_KUNIT_TEST))]
pub mod released;
pub mod runs;
pub mod schedule;

#[cfg(any(not(CONFIG_RUST), CONFIG_SPIN_KUNIT_TEST))]
pub mod cases;

pub use cost::{Model, ParamError, Params, Picos, MAX_OVERLAP, NO_OVERLAP};
#[cfg(any(not(CONFIG_RUST), CONFIG_SPIN_KUNIT_TEST))]
pub use greedy::greedy;
pub use optimal::{optimal, optimal_model, scratch_len, Slot};
pub use overlap::{cached_wants_p2p, gap_scratch_len, overlap, overlap_model, Overlap};
#[cfg(any(not(CONFIG_RUST), CONFIG_SPIN_KUNIT_TEST))]
pub use released::released;
pub use runs::{Run, Runs, RunsBuilder, RunsError};
pub use schedule::{
    additive_cost, check, makespan, split_cost, CheckError, Path, SchedError, Schedule, Segment,
    SegmentBuf,
};
