// SPDX-License-Identifier: GPL-2.0

//! The rule SPIN's released code applies instead of the paper's greedy.
//!
//! A cached run goes through the page cache only if it is at least [`MIN_RUN_PAGES`] pages long
//! or at least [`MIN_RUN_PERCENT`] percent of the request; otherwise it is folded into P2P
//! together with its neighbours. Consecutive P2P ranges become one transfer. The rule ignores the
//! device parameters; they are only used to report the cost.

use super::cost::Params;
use super::runs::Runs;
use super::schedule::{additive_cost, Path, SchedError, Schedule, Segment, SegmentBuf};

/// Cached runs of at least this many pages go through the page cache.
pub const MIN_RUN_PAGES: u32 = 256;
/// Cached runs of at least this share of the request (percent) go through the page cache.
pub const MIN_RUN_PERCENT: u32 = 20;

/// Whether the released rule keeps a cached run of `len` pages in a request of `total` pages in
/// the page cache.
pub fn keeps(len: u32, total: u32) -> bool {
    len >= MIN_RUN_PAGES || u64::from(len) * 100 >= u64::from(total) * u64::from(MIN_RUN_PERCENT)
}

/// Runs the released rule over `runs`; `out` needs [`Runs::max_segments`] entries.
///
/// The returned cost is the additive cost of Eq. 1. Linear in the number of runs.
pub fn released<'o>(
    params: &Params,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
) -> Result<Schedule<'o>, SchedError> {
    runs.check_size(params.page_size())?;
    let mut buf = SegmentBuf::new(out);
    let total = runs.pages();
    let mut p2p_start = 0u32;
    let mut p2p_len = 0u32;
    for run in runs.iter() {
        if run.cached && keeps(run.len, total) {
            buf.push(p2p_start, p2p_len, Path::P2p)?;
            buf.push(run.start, run.len, Path::PageCache)?;
            p2p_len = 0;
            continue;
        }
        if p2p_len == 0 {
            p2p_start = run.start;
        }
        p2p_len = p2p_len.saturating_add(run.len);
    }
    buf.push(p2p_start, p2p_len, Path::P2p)?;
    let schedule = buf.finish(0);
    let cost = additive_cost(&params.model(), schedule.segments);
    Ok(Schedule { cost, ..schedule })
}
