// SPDX-License-Identifier: GPL-2.0

//! The greedy heuristic of the SPIN paper (§4.3.1), as literally as the text allows.
//!
//! "For each three consecutive data ranges a, b, c, where b is in the page cache, if
//! |a| + |b| < S_cutoff, always choose P2P for b. Otherwise, choose P2P for b if
//! T_p2p(|a| + |b| + |c|) < T_p2p(|a|) + T_pc(|b|) + T_p2p(|c|)."
//!
//! Interpretations (see Documentation/spin/sched.rst):
//!
//! 1. The cached runs are visited once, left to right. `a` is the P2P range that `b` would join:
//!    the uncached run before `b` together with everything already folded into it (earlier
//!    cached runs chosen for P2P and the uncached runs they joined). `c` is the uncached run
//!    right after `b`, as it is in the residency map.
//! 2. A missing neighbour (a request that starts or ends with a cached run, or `a` right after a
//!    cached run that went to the page cache) is an empty range: `|x| = 0` and
//!    `T_p2p(0) = 0`, since no transfer is issued. Both rules are then applied unchanged, so a
//!    leading cached run shorter than `S_cutoff` goes to P2P by the first rule.
//! 3. A fully cached request goes to the page cache, as §4.3.1 states before the heuristic.
//! 4. Sizes in the first rule are bytes (`pages * page_size` against `S_cutoff`); both
//!    comparisons are strict, so ties keep `b` in the page cache.

use super::cost::Params;
use super::runs::Runs;
use super::schedule::{additive_cost, Path, SchedError, Schedule, Segment, SegmentBuf};

/// Whether the greedy folds cached range `b` (pages) into P2P between `a` and `c` (pages).
pub fn folds(params: &Params, a: u64, b: u64, c: u64) -> bool {
    let page = u64::from(params.page_size());
    let ab_bytes = a.saturating_add(b).saturating_mul(page);
    if ab_bytes < params.s_cutoff() {
        return true;
    }
    let m = params.model();
    let merged = m.t_p2p(a.saturating_add(b).saturating_add(c));
    let split = m
        .t_p2p(a)
        .saturating_add(m.t_pc(b))
        .saturating_add(m.t_p2p(c));
    merged < split
}

/// Runs the paper's greedy over `runs`; `out` needs [`Runs::max_segments`] entries.
///
/// The returned cost is the additive cost of Eq. 1. Linear in the number of runs.
pub fn greedy<'o>(
    params: &Params,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
) -> Result<Schedule<'o>, SchedError> {
    runs.check_size(params.page_size())?;
    let mut buf = SegmentBuf::new(out);
    if runs.all_cached() {
        buf.push(0, runs.pages(), Path::PageCache)?;
    } else {
        emit(params, runs, &mut buf)?;
    }
    let schedule = buf.finish(0);
    let cost = additive_cost(&params.model(), schedule.segments);
    Ok(Schedule { cost, ..schedule })
}

/// The left-to-right pass: keeps the open P2P range `a` and decides each cached run.
fn emit(params: &Params, runs: &Runs<'_>, buf: &mut SegmentBuf<'_>) -> Result<(), SchedError> {
    let lens = runs.lens();
    // Open P2P range `a`: [a_start, a_start + a_len).
    let mut a_start = 0u32;
    let mut a_len = 0u32;
    for (i, run) in runs.iter().enumerate() {
        if !run.cached {
            if a_len == 0 {
                a_start = run.start;
            }
            a_len = a_len.saturating_add(run.len);
            continue;
        }
        let c = lens.get(i + 1).copied().unwrap_or(0);
        if folds(params, a_len.into(), run.len.into(), c.into()) {
            if a_len == 0 {
                a_start = run.start;
            }
            a_len = a_len.saturating_add(run.len);
        } else {
            buf.push(a_start, a_len, Path::P2p)?;
            buf.push(run.start, run.len, Path::PageCache)?;
            a_len = 0;
        }
    }
    buf.push(a_start, a_len, Path::P2p)
}
