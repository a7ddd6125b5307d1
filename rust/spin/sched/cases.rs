// SPDX-License-Identifier: GPL-2.0

//! Unit-test cases shared by the host crate (`cargo test`) and KUnit.
//!
//! Each case is a plain `pub fn name() -> Result<(), CaseError>` that never panics: a failed
//! check returns the line and the text of the condition. The host wraps each one as
//! `#[test] fn name() { cases::name().unwrap() }`, the kernel as a `#[test]` returning the
//! `Result` inside a `#[kunit_tests(rust_spin_sched)]` module. [`CASES`] lists them all.
//! Every case runs in well under a millisecond and uses less than 4 KiB of stack.

use super::cost::{Model, ParamError, Params, MAX_OVERLAP, NO_OVERLAP};
use super::greedy::greedy;
use super::optimal::{optimal, Slot};
use super::overlap::{cached_wants_p2p, overlap};
use super::plan::{self, Leg, PlanError, Window};
use super::readahead::{self, Consumed, Partition, Reserve, Stream, Watermarks, Weighted, STREAMS};
use super::released::{keeps, released};
use super::runs::{Runs, RunsBuilder, RunsError};
use super::schedule::{
    additive_cost, check as check_schedule, makespan, CheckError, Path, SchedError, Segment,
};

/// A failed check: where and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseError {
    /// Line in this file.
    pub line: u32,
    /// The condition that failed, as written.
    pub what: &'static str,
}

/// Returns `Err(CaseError)` from the enclosing case if the condition is false.
macro_rules! check {
    ($cond:expr) => {
        if !$cond {
            return Err(CaseError {
                line: line!(),
                what: stringify!($cond),
            });
        }
    };
}

/// Evaluates a `Result`, turning an `Err` into a [`CaseError`] at this line.
macro_rules! ok {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(_) => {
                return Err(CaseError {
                    line: line!(),
                    what: stringify!($e),
                })
            }
        }
    };
}

/// A case: its name and function.
pub type Case = (&'static str, fn() -> Result<(), CaseError>);

/// Every case, in the order they are listed in the module documentation.
pub const CASES: &[Case] = &[
    ("params_paper_and_gen4", params_paper_and_gen4),
    ("params_reject_inconsistent", params_reject_inconsistent),
    ("params_copy_first_max", params_copy_first_max),
    ("params_reject_out_of_range", params_reject_out_of_range),
    ("t_p2p_is_a_subadditive_hinge", t_p2p_is_a_subadditive_hinge),
    (
        "runs_builder_merges_and_bounds",
        runs_builder_merges_and_bounds,
    ),
    ("runs_reject_bad_input", runs_reject_bad_input),
    ("check_detects_bad_schedules", check_detects_bad_schedules),
    ("greedy_paper_example", greedy_paper_example),
    (
        "greedy_fully_cached_uses_page_cache",
        greedy_fully_cached_uses_page_cache,
    ),
    ("greedy_edges_and_large_run", greedy_edges_and_large_run),
    ("released_rule_thresholds", released_rule_thresholds),
    (
        "optimal_paper_params_one_transfer",
        optimal_paper_params_one_transfer,
    ),
    (
        "optimal_extends_into_cached_run",
        optimal_extends_into_cached_run,
    ),
    (
        "optimal_matches_page_reference",
        optimal_matches_page_reference,
    ),
    (
        "optimal_reports_small_buffers",
        optimal_reports_small_buffers,
    ),
    ("optimal_bridges_short_gaps", optimal_bridges_short_gaps),
    (
        "optimal_exact_beyond_validated_ranges",
        optimal_exact_beyond_validated_ranges,
    ),
    (
        "overlap_splits_cached_request",
        overlap_splits_cached_request,
    ),
    (
        "overlap_not_worse_than_additive",
        overlap_not_worse_than_additive,
    ),
    ("overlap_queue_depth", overlap_queue_depth),
    ("overlap_cached_wants_p2p", overlap_cached_wants_p2p),
    ("plan_window_rounds_inwards", plan_window_rounds_inwards),
    ("plan_bitmap_to_runs", plan_bitmap_to_runs),
    ("plan_legs_cover_the_request", plan_legs_cover_the_request),
    ("readahead_sequential_rule", readahead_sequential_rule),
    ("readahead_prefetch_rule", readahead_prefetch_rule),
    ("partition_bounds_pages_fifo", partition_bounds_pages_fifo),
    ("partition_rebuilt_smaller", partition_rebuilt_smaller),
    ("partition_holds_busy_pages", partition_holds_busy_pages),
    ("partition_watermarks_order", partition_watermarks_order),
    ("partition_reserves_windows", partition_reserves_windows),
    ("partition_consumed_streams", partition_consumed_streams),
    ("readahead_leg_reserve", readahead_leg_reserve),
    ("readahead_leg_in_window", readahead_leg_in_window),
    ("readahead_bridge_range", readahead_bridge_range),
    ("readahead_same_page", readahead_same_page),
    ("readahead_streaming_rule", readahead_streaming_rule),
    ("readahead_ahead_wins", readahead_ahead_wins),
    ("readahead_leg_fits", readahead_leg_fits),
];

fn gen4() -> Result<Params, CaseError> {
    Ok(ok!(Params::gen4()))
}

fn paper() -> Result<Params, CaseError> {
    Ok(ok!(Params::paper()))
}

/// A PCIe 5 drive beside a GPU whose copy is slower than the drive: `S_cutoff` 0, `C_p2p`
/// 52 us, `BW_p2p` 13 GB/s, `BW_pc` 10.4 GB/s (315 and 394 ns per page).
fn copy_slower() -> Result<Params, CaseError> {
    Ok(ok!(Params::new(
        4096,
        0,
        52_000,
        13_000_000_000,
        10_400_000_000
    )))
}

/// Paper and Gen4 sets are valid and their models have the expected terms.
pub fn params_paper_and_gen4() -> Result<(), CaseError> {
    let p = paper()?.model();
    // 249 pages through the page cache take C_p2p = 584 us, to within a nanosecond.
    check!(p.t_pc(249).abs_diff(584_000_000) < 1_000);
    check!(p.a() < p.pc());
    check!(p.flat_pages() == 128);
    let g = gen4()?.model();
    check!(g.c() == 80_000_000);
    check!(g.pc() == 409_600);
    check!(g.a() == 630_154);
    check!(g.flat_pages() == 31);
    check!(g.t_p2p(32) == g.c() + 32 * g.a() - g.b());
    Ok(())
}

/// The copy-first bound is `S_cutoff`, or the whole pages copied in `C_p2p / 8` when more.
pub fn params_copy_first_max() -> Result<(), CaseError> {
    // Gen4: 80 us / 8 copies 24.4 pages (409.6 ns each), below S_cutoff = 128 KiB.
    check!(gen4()?.copy_first_max() == 128 * 1024);
    check!(paper()?.copy_first_max() == 512 * 1024);
    // A fit with no flat region (S_cutoff 0): 267 us / 8 copies 5.18 pages at 636 MB/s.
    let fit = ok!(Params::new(4096, 0, 266_999, 184_546_156, 636_364_392));
    check!(fit.copy_first_max() == 5 * 4096);
    // The queue-depth term does not change it: one leg still pays all of C_p2p alone.
    check!(ok!(fit.with_overlap(MAX_OVERLAP)).copy_first_max() == 5 * 4096);
    // A copy slower than C_p2p / 8 per page: no whole page.
    let slow = ok!(Params::new(4096, 0, 1_000, 1_000_000_000, 1_000_000_000));
    check!(slow.copy_first_max() == 0);
    Ok(())
}

/// `C_p2p < S_cutoff / BW_p2p` is refused; equality is accepted.
pub fn params_reject_inconsistent() -> Result<(), CaseError> {
    // 512 KiB at 2.65 GB/s takes 197.8 us.
    check!(
        Params::new(4096, 512 * 1024, 197_000, 2_650_000_000, 10_000_000_000)
            == Err(ParamError::Inconsistent)
    );
    // 1 MB at 1 GB/s takes exactly 1 ms.
    check!(Params::new(4096, 1_000_000, 1_000_000, 1_000_000_000, 10_000_000_000).is_ok());
    check!(
        Params::new(4096, 1_000_001, 1_000_000, 1_000_000_000, 10_000_000_000)
            == Err(ParamError::Inconsistent)
    );
    Ok(())
}

/// Values outside the documented ranges are refused.
pub fn params_reject_out_of_range() -> Result<(), CaseError> {
    let bw = 1_000_000_000;
    check!(Params::new(3000, 0, 1, bw, bw) == Err(ParamError::PageSize));
    check!(Params::new(4096, 0, 0, bw, bw) == Err(ParamError::Overhead));
    check!(Params::new(4096, 0, 1, 0, bw) == Err(ParamError::Bandwidth));
    check!(Params::new(4096, 1 << 30, 1_000_000_000, bw, bw) == Err(ParamError::Cutoff));
    check!(Model::from_terms(1, 1, 2, 1) == Err(ParamError::Inconsistent));
    Ok(())
}

/// `T_p2p` is flat below the cutoff, linear above, zero for no pages, and subadditive.
pub fn t_p2p_is_a_subadditive_hinge() -> Result<(), CaseError> {
    let m = gen4()?.model();
    check!(m.t_p2p(0) == 0);
    check!(m.t_p2p(1) == m.c() && m.t_p2p(31) == m.c());
    check!(m.t_p2p(100) - m.t_p2p(99) == m.a());
    for x in 1..70u64 {
        for y in 1..70u64 {
            check!(m.t_p2p(x + y) <= m.t_p2p(x) + m.t_p2p(y));
        }
    }
    Ok(())
}

/// The builder merges equal states and reports a full buffer.
pub fn runs_builder_merges_and_bounds() -> Result<(), CaseError> {
    let mut buf = [0u32; 4];
    let mut b = RunsBuilder::new(&mut buf);
    ok!(b.push_bits([true, true, false, true]));
    ok!(b.push(true, 3));
    ok!(b.push(false, 0));
    let runs = ok!(b.finish());
    check!(runs.first_cached() && runs.lens() == [2, 1, 4]);
    check!(runs.pages() == 7 && runs.cached_pages() == 6);
    check!(runs.is_cached(0) && !runs.is_cached(2) && runs.is_cached(6) && !runs.is_cached(7));
    let mut small = [0u32; 1];
    let mut b = RunsBuilder::new(&mut small);
    ok!(b.push(false, 5));
    check!(b.push(true, 1) == Err(RunsError::Full));
    Ok(())
}

/// Empty requests and zero-length runs are refused.
pub fn runs_reject_bad_input() -> Result<(), CaseError> {
    check!(Runs::new(true, &[]).err() == Some(RunsError::Empty));
    check!(Runs::new(true, &[3, 0, 2]).err() == Some(RunsError::ZeroRun));
    check!(Runs::new(false, &[u32::MAX, 1]).err() == Some(RunsError::TooLong));
    let mut b = RunsBuilder::new(&mut []);
    check!(b.push(true, 1) == Err(RunsError::Full));
    Ok(())
}

fn seg(start: u32, len: u32, path: Path) -> Segment {
    Segment { start, len, path }
}

/// The checker finds gaps, overlaps, short covers and page-cache reads of uncached pages.
pub fn check_detects_bad_schedules() -> Result<(), CaseError> {
    let runs = ok!(Runs::new(false, &[2, 3, 2]));
    let (pc, p2p) = (Path::PageCache, Path::P2p);
    let good = [seg(0, 2, p2p), seg(2, 3, pc), seg(5, 2, p2p)];
    check!(check_schedule(&runs, &good).is_ok());
    check!(check_schedule(&runs, &[seg(0, 7, p2p)]).is_ok());
    let gap = [seg(0, 2, p2p), seg(3, 4, p2p)];
    check!(check_schedule(&runs, &gap) == Err(CheckError::NotContiguous));
    let short = [seg(0, 6, p2p)];
    check!(check_schedule(&runs, &short) == Err(CheckError::WrongLength));
    let uncached = [seg(0, 1, p2p), seg(1, 4, pc), seg(5, 2, p2p)];
    check!(check_schedule(&runs, &uncached) == Err(CheckError::UncachedPageCache));
    let empty = [seg(0, 0, p2p), seg(0, 7, p2p)];
    check!(check_schedule(&runs, &empty) == Err(CheckError::EmptySegment));
    Ok(())
}

/// §4.3.1's example: 5 pages, the second and fourth cached. With the paper's parameters both
/// cached pages are far below `S_cutoff`, so the greedy issues one P2P transfer.
pub fn greedy_paper_example() -> Result<(), CaseError> {
    let params = paper()?;
    let runs = ok!(Runs::new(false, &[1, 1, 1, 1, 1]));
    let mut out = [Segment::EMPTY; 6];
    let s = ok!(greedy(&params, &runs, &mut out));
    check!(s.segments == [seg(0, 5, Path::P2p)]);
    check!(s.cost == params.model().c());
    Ok(())
}

/// A fully cached request goes to the page cache, as the paper states.
pub fn greedy_fully_cached_uses_page_cache() -> Result<(), CaseError> {
    let params = gen4()?;
    let runs = ok!(Runs::new(true, &[10]));
    let mut out = [Segment::EMPTY; 2];
    let s = ok!(greedy(&params, &runs, &mut out));
    check!(s.segments == [seg(0, 10, Path::PageCache)]);
    check!(s.cost == params.model().t_pc(10));
    Ok(())
}

/// Leading and trailing cached runs, and a cached run worth keeping, under Gen4 parameters
/// (`S_cutoff` = 32 pages).
pub fn greedy_edges_and_large_run() -> Result<(), CaseError> {
    let params = gen4()?;
    let (pc, p2p) = (Path::PageCache, Path::P2p);
    let mut out = [Segment::EMPTY; 8];
    // Leading cached run of 10 pages: |a| = 0, 10 pages < S_cutoff, folded by the first rule.
    // Trailing cached run of 500 pages after a 64-page P2P range: the second rule keeps it,
    // since extending the transfer costs 500 * a > 500 * pc.
    let runs = ok!(Runs::new(true, &[10, 64, 500]));
    let s = ok!(greedy(&params, &runs, &mut out));
    check!(s.segments == [seg(0, 74, p2p), seg(74, 500, pc)]);
    // A 1-page cached run between two 64-page uncached runs is folded (saves one C_p2p).
    let runs = ok!(Runs::new(false, &[64, 1, 64]));
    let s = ok!(greedy(&params, &runs, &mut out));
    check!(s.segments == [seg(0, 129, p2p)]);
    // A 512-page cached run in the same place is kept.
    let runs = ok!(Runs::new(false, &[64, 512, 64]));
    let s = ok!(greedy(&params, &runs, &mut out));
    check!(s.segments == [seg(0, 64, p2p), seg(64, 512, pc), seg(576, 64, p2p)]);
    check!(s.cost == additive_cost(&params.model(), s.segments));
    Ok(())
}

/// The released rule keeps runs of >= 256 pages or >= 20% of the request.
pub fn released_rule_thresholds() -> Result<(), CaseError> {
    check!(keeps(256, 10_000) && !keeps(255, 10_000));
    check!(keeps(20, 100) && !keeps(19, 100));
    let params = gen4()?;
    let (pc, p2p) = (Path::PageCache, Path::P2p);
    let mut out = [Segment::EMPTY; 8];
    // 2048 pages: 300 cached kept, 100 cached folded (< 256 and < 20%).
    let runs = ok!(Runs::new(false, &[100, 300, 1000, 100, 548]));
    let s = ok!(released(&params, &runs, &mut out));
    check!(s.segments == [seg(0, 100, p2p), seg(100, 300, pc), seg(400, 1648, p2p)]);
    Ok(())
}

/// With the paper's parameters a P2P page is cheaper than a page-cache page (2.65 GB/s against
/// 1.75 GB/s), so the optimum of any partly cached request is one P2P transfer.
pub fn optimal_paper_params_one_transfer() -> Result<(), CaseError> {
    let params = paper()?;
    let runs = ok!(Runs::new(true, &[600, 3, 900, 1, 544]));
    let mut out = [Segment::EMPTY; 6];
    let mut ws = [Slot::EMPTY; 4];
    let s = ok!(optimal(&params, &runs, &mut out, &mut ws));
    check!(s.segments == [seg(0, 2048, Path::P2p)]);
    check!(s.cost == params.model().t_p2p(2048));
    Ok(())
}

/// Gen4: 4 uncached pages then 100 cached. The optimum stretches the P2P transfer to 32 pages
/// (nearly free below the cutoff) and copies the remaining 72; the greedy, deciding whole runs
/// only, copies all 100.
pub fn optimal_extends_into_cached_run() -> Result<(), CaseError> {
    let params = gen4()?;
    let m = params.model();
    let runs = ok!(Runs::new(false, &[4, 100]));
    let mut out = [Segment::EMPTY; 3];
    let mut ws = [Slot::EMPTY; 2];
    let s = ok!(optimal(&params, &runs, &mut out, &mut ws));
    check!(s.segments == [seg(0, 32, Path::P2p), seg(32, 72, Path::PageCache)]);
    check!(s.cost == m.t_p2p(32) + m.t_pc(72));
    let mut out2 = [Segment::EMPTY; 3];
    let g = ok!(greedy(&params, &runs, &mut out2));
    check!(g.cost == m.t_p2p(4) + m.t_pc(100) && s.cost < g.cost);
    Ok(())
}

/// Page-level reference: `dp[i] = min_j dp[j] + min(T_p2p(i - j), T_pc(i - j) if cached)`,
/// which enumerates every segmentation implicitly. `bits` bit `i` set = page `i` cached.
fn reference(m: &Model, bits: u64, n: usize) -> u64 {
    let n = n.min(64);
    let mut dp = [u64::MAX; 65];
    if let Some(d) = dp.get_mut(0) {
        *d = 0;
    }
    for i in 1..=n {
        let mut best = u64::MAX;
        let mut all_cached = true;
        for j in (0..i).rev() {
            all_cached &= bits >> j & 1 == 1;
            let len = (i - j) as u64;
            let prev = dp.get(j).copied().unwrap_or(u64::MAX);
            let mut c = prev.saturating_add(m.t_p2p(len));
            if all_cached {
                c = c.min(prev.saturating_add(m.t_pc(len)));
            }
            best = best.min(c);
        }
        if let Some(d) = dp.get_mut(i) {
            *d = best;
        }
    }
    dp.get(n).copied().unwrap_or(u64::MAX)
}

/// The exact scheduler equals the page-level reference on patterns around the cutoff, for a
/// model with `a >= pc` and a short cutoff (`n* = 3`).
pub fn optimal_matches_page_reference() -> Result<(), CaseError> {
    // c = 10, a = 4, b = 8 (flat up to 2 pages), pc = 3: n* = 3 since 3a - b = 4 >= pc.
    let m = ok!(Model::from_terms(10, 4, 8, 3));
    let patterns: [(u64, usize); 6] = [
        (0b0110_1101_1011, 12),
        (0b1111_0000_1111_0001, 16),
        (0b1000_0001_1000_0001, 16),
        (0b0111_1110_0111_1110, 16),
        (0xF0F0_F0F0_F0F0_F0F0, 64),
        (0x8421_0842_1084_2108, 64),
    ];
    matches_reference(&m, &patterns)
}

/// The exact scheduler on each residency bitmap `(bits, n)` (page `i` cached if bit `i` is set):
/// a valid schedule whose reported cost is real and equals the page-level reference.
fn matches_reference(m: &Model, patterns: &[(u64, usize)]) -> Result<(), CaseError> {
    for &(bits, n) in patterns {
        let mut lens = [0u32; 64];
        let mut b = RunsBuilder::new(&mut lens);
        ok!(b.push_bits((0..n).map(|i| bits >> i & 1 == 1)));
        let runs = ok!(b.finish());
        let mut out = [Segment::EMPTY; 65];
        let mut ws = [Slot::EMPTY; 33];
        let s = ok!(super::optimal::optimal_model(m, &runs, &mut out, &mut ws));
        check!(check_schedule(&runs, s.segments).is_ok());
        check!(s.cost == additive_cost(m, s.segments));
        check!(s.cost == reference(m, bits, n));
    }
    Ok(())
}

/// Too small output or workspace is an error, not a panic.
pub fn optimal_reports_small_buffers() -> Result<(), CaseError> {
    let params = gen4()?;
    let runs = ok!(Runs::new(false, &[40, 2, 40, 2, 40]));
    let mut out = [Segment::EMPTY; 6];
    let mut ws = [Slot::EMPTY; 3];
    let r = optimal(&params, &runs, &mut out, &mut ws);
    check!(matches!(r, Err(SchedError::ScratchTooSmall)));
    let mut ws = [Slot::EMPTY; 4];
    let mut short = [Segment::EMPTY; 5];
    let r = optimal(&params, &runs, &mut short, &mut ws);
    check!(matches!(r, Err(SchedError::OutputTooSmall)));
    let r = greedy(&params, &runs, &mut short[..0]);
    check!(matches!(r, Err(SchedError::OutputTooSmall)));
    Ok(())
}

/// Gen4: bridging a cached run of `g` pages costs `g * (a - pc)` and saves `c - b`, so the
/// optimum bridges gaps of up to 271 pages and splits at longer ones (here 271 and 300 pages).
pub fn optimal_bridges_short_gaps() -> Result<(), CaseError> {
    let params = gen4()?;
    let m = params.model();
    let (pc, p2p) = (Path::PageCache, Path::P2p);
    let runs = ok!(Runs::new(false, &[40, 271, 40, 300, 40, 1357]));
    let mut out = [Segment::EMPTY; 7];
    let mut ws = [Slot::EMPTY; 4];
    let s = ok!(optimal(&params, &runs, &mut out, &mut ws));
    check!(
        s.segments
            == [
                seg(0, 351, p2p),
                seg(351, 300, pc),
                seg(651, 40, p2p),
                seg(691, 1357, pc)
            ]
    );
    check!(s.cost == m.t_p2p(351) + m.t_pc(300) + m.t_p2p(40) + m.t_pc(1357));
    // Not bridging the shorter gap, or bridging the longer one, costs more.
    check!(s.cost < m.t_p2p(40) * 2 + m.t_pc(271 + 300) + m.t_p2p(40) + m.t_pc(1357));
    check!(s.cost < m.t_p2p(691) + m.t_pc(1357));
    Ok(())
}

/// Terms of 2^59 to 2^61 ps, beyond the validated ranges, take the checked arithmetic; it stays
/// exact even where comparing two runs 61 pages apart does not fit a `u64`.
pub fn optimal_exact_beyond_validated_ranges() -> Result<(), CaseError> {
    // c = 2^61, a = 2^59, b = 2a (flat up to 2 pages), pc = 1: n* = 2, gaps of up to 2 pages
    // are bridged, and a group is flat up to 2 pages.
    let m = ok!(Model::from_terms(1 << 61, 1 << 59, 1 << 60, 1));
    let patterns: [(u64, usize); 3] = [
        // Uncached page 0, 60 cached pages, 3 uncached pages.
        (((1 << 61) - 1) ^ 1, 64),
        (0x0FFF_FFFF_FFFF_F0F0, 64),
        (0x00FF_FF0F_FFFF_FF00, 64),
    ];
    matches_reference(&m, &patterns)
}

/// A fully cached 8 MB request under Gen4: copying takes 839 us, one P2P 1350 us; letting the
/// device read part of it while the CPU copies the rest finishes in about 532 us.
pub fn overlap_splits_cached_request() -> Result<(), CaseError> {
    let params = gen4()?;
    let m = params.model();
    let runs = ok!(Runs::new(true, &[2048]));
    let mut out = [Segment::EMPTY; 2];
    let mut ws = [Slot::EMPTY; 1];
    let o = ok!(overlap(&params, &runs, &mut out, &mut ws, &mut []));
    check!(check_schedule(&runs, o.schedule.segments).is_ok());
    check!(o.schedule.cost == makespan(&m, o.schedule.segments));
    check!(o.schedule.cost < m.t_pc(2048) * 2 / 3);
    // Fully cached requests are solved exactly: the bound is the makespan itself, and one more
    // or one fewer P2P page would not be better.
    check!(o.bound == o.schedule.cost);
    let p2p = o
        .schedule
        .segments
        .iter()
        .find(|s| s.path == Path::P2p)
        .map_or(0, |s| s.len);
    check!(p2p > 0);
    let span = |len: u32| m.t_p2p(len.into()).max(m.t_pc((2048 - len).into()));
    check!(span(p2p - 1) >= o.schedule.cost && span(p2p + 1) >= o.schedule.cost);
    Ok(())
}

/// A device whose queue overlaps legs: the model charges `m` small legs `C_p2p + (m - 1) *
/// C_p2p / O`, goes back to Eq. 1 with no overlap, and its schedules use more, shorter legs
/// where that pays.
pub fn overlap_queue_depth() -> Result<(), CaseError> {
    let serial = gen4()?;
    check!(ok!(serial.with_overlap(NO_OVERLAP)) == serial);
    check!(serial.with_overlap(NO_OVERLAP - 1) == Err(ParamError::Overlap));
    check!(serial.with_overlap(MAX_OVERLAP + 1) == Err(ParamError::Overlap));
    check!(ok!(serial.with_overlap(MAX_OVERLAP)).overlap() == MAX_OVERLAP);
    let queued = ok!(serial.with_overlap(800));
    check!(queued.overlap() == 800 && queued.serial() == serial);
    let (s, q) = (serial.model(), queued.model());
    check!(s.batch() == 0 && q.c() == 10_000_000 && q.batch() == 70_000_000);
    check!(q.b() <= q.c() && q.c() + q.batch() == s.c() && q.a() == s.a());
    check!(queued.serial().model() == s);
    // Eight legs of one page: C_p2p + 7 * C_p2p / 8; one leg costs C_p2p as before.
    let one = Segment {
        start: 0,
        len: 1,
        path: Path::P2p,
    };
    let legs = [one; 8];
    check!(makespan(&q, &legs) == 80_000_000 + 7 * 10_000_000);
    check!(makespan(&q, &legs[..1]) == makespan(&s, &legs[..1]));
    check!(makespan(&q, &[]) == 0);
    // Nine uncached pages 20 cached pages apart: one bridging leg serially, several legs
    // when eight more legs cost only 8 * 10 us.
    let lens = [1, 20, 1, 20, 1, 20, 1, 20, 1, 20, 1, 20, 1, 20, 1, 20, 1];
    let runs = ok!(Runs::new(false, &lens));
    let (mut ws, mut gaps) = ([Slot::EMPTY; 16], [0u32; 16]);
    let mut out_s = [Segment::EMPTY; 32];
    let o_s = ok!(overlap(&serial, &runs, &mut out_s, &mut ws, &mut gaps));
    let mut out_q = [Segment::EMPTY; 32];
    let o_q = ok!(overlap(&queued, &runs, &mut out_q, &mut ws, &mut gaps));
    let p2p_legs = |segs: &[Segment]| segs.iter().filter(|s| s.path == Path::P2p).count();
    check!(check_schedule(&runs, o_q.schedule.segments).is_ok());
    check!(p2p_legs(o_s.schedule.segments) == 1 && p2p_legs(o_q.schedule.segments) > 1);
    check!(o_q.schedule.cost == makespan(&q, o_q.schedule.segments));
    check!(o_q.bound <= o_q.schedule.cost);
    // On the overlapping device the queue-aware schedule is faster than the serial one.
    check!(o_q.schedule.cost < makespan(&q, o_s.schedule.segments));
    // The additive optimum pays the batch term once.
    let add = ok!(optimal(&queued, &runs, &mut out_q, &mut ws));
    check!(add.cost == additive_cost(&q, add.segments));
    Ok(())
}

/// The overlap scheduler's makespan is at most that of the additive optimum and of the greedy.
pub fn overlap_not_worse_than_additive() -> Result<(), CaseError> {
    let params = gen4()?;
    let m = params.model();
    let runs = ok!(Runs::new(false, &[40, 300, 8, 1, 3, 700, 200]));
    let mut out = [Segment::EMPTY; 8];
    let mut ws = [Slot::EMPTY; 5];
    let add = ok!(optimal(&params, &runs, &mut out, &mut ws));
    let add_makespan = makespan(&m, add.segments);
    let mut out2 = [Segment::EMPTY; 8];
    let g = ok!(greedy(&params, &runs, &mut out2));
    let g_makespan = makespan(&m, g.segments);
    let mut out3 = [Segment::EMPTY; 8];
    let mut gaps = [0u32; 4];
    let o = ok!(overlap(&params, &runs, &mut out3, &mut ws, &mut gaps));
    check!(check_schedule(&runs, o.schedule.segments).is_ok());
    check!(o.schedule.cost == makespan(&m, o.schedule.segments));
    check!(o.schedule.cost <= add_makespan && o.schedule.cost <= g_makespan);
    check!(o.bound <= o.schedule.cost);
    Ok(())
}

/// The P2P window is the request rounded inwards to the alignment; no whole block, no window.
pub fn plan_window_rounds_inwards() -> Result<(), CaseError> {
    // The alignment helpers: masks for powers of two, the same answers otherwise.
    for (x, a, up) in [
        (0, 512, 0),
        (1, 512, 512),
        (512, 512, 512),
        (513, 4096, 4096),
    ] {
        check!(plan::align_up(x, a) == Some(up) && plan::is_aligned(up, a));
    }
    check!(plan::align_up(7, 0) == Some(7) && plan::is_aligned(7, 0) && plan::is_aligned(7, 1));
    check!(plan::align_up(7, 6) == Some(12) && plan::is_aligned(12, 6) && !plan::is_aligned(8, 6));
    check!(!plan::is_aligned(513, 512) && !plan::is_aligned(4097, 4096));
    check!(plan::align_up(u64::MAX, 512).is_none() && plan::align_up(u64::MAX, 6).is_none());
    check!(plan::align_up(u64::MAX - 511, 512) == Some(u64::MAX - 511));
    check!(ok!(plan::window(0, 1, 512, 4096)).is_none());
    check!(ok!(plan::window(100, 900, 512, 4096)).is_none());
    check!(ok!(plan::window(0, 0, 512, 4096)).is_none());
    let w = ok!(plan::window(100, 8192, 512, 4096));
    check!(
        w == Some(Window {
            start: 512,
            end: 8192,
            first_page: 0,
            pages: 2
        })
    );
    // A window starting mid-page touches that page; an aligned end does not touch the next.
    let w = ok!(plan::window(4096 + 512, 8192, 512, 4096));
    check!(
        w == Some(Window {
            start: 4608,
            end: 12800,
            first_page: 1,
            pages: 3
        })
    );
    let w = ok!(plan::window(8192, 8192, 4096, 4096));
    check!(w.is_some_and(|w| w.first_page == 2 && w.pages == 2));
    check!(plan::window(0, 1, 3, 4096) == Err(PlanError::Geometry));
    check!(plan::window(0, 1, 8192, 4096) == Err(PlanError::Geometry));
    check!(plan::window(u64::MAX, 2, 512, 4096) == Err(PlanError::Overflow));
    Ok(())
}

/// A kernel bitmap becomes the runs of its bits, across word boundaries.
pub fn plan_bitmap_to_runs() -> Result<(), CaseError> {
    const B: u32 = usize::BITS;
    // Bits 0-2 set, 3-(B+4) clear, B+5.. set up to 2B+3 (exclusive end 2B+4).
    let words: [usize; 3] = [0b111, !0 << 5, 0b1111];
    let mut buf = [0u32; 8];
    let mut b = RunsBuilder::new(&mut buf);
    ok!(plan::push_bitmap(&mut b, &words, 2 * B + 4));
    let runs = ok!(b.finish());
    check!(runs.first_cached());
    check!(runs.lens() == [3, B + 2, B - 1]);
    // Past nbits nothing is read; a short bitmap is an error, not a panic.
    let mut buf = [0u32; 8];
    let mut b = RunsBuilder::new(&mut buf);
    check!(plan::push_bitmap(&mut b, &words[..1], B + 1) == Err(RunsError::Full));
    let mut buf = [0u32; 2];
    let mut b = RunsBuilder::new(&mut buf);
    ok!(plan::push_bitmap(&mut b, &[0usize], 7));
    let runs = ok!(b.finish());
    check!(!runs.first_cached() && runs.lens() == [7]);
    Ok(())
}

/// Legs cover the request once and in order, P2P legs are aligned and inside the window, and
/// neighbours of the same path merge.
pub fn plan_legs_cover_the_request() -> Result<(), CaseError> {
    let (pos, len) = (1000u64, 5 * 4096u64);
    let w = ok!(plan::window(pos, len, 512, 4096));
    let wr = ok!(w.ok_or(()));
    check!(wr.pages == 6);
    // Pages: P2P [0,2), cache [2,3), P2P [3,6).
    let segs = [
        Segment {
            start: 0,
            len: 2,
            path: Path::P2p,
        },
        Segment {
            start: 2,
            len: 1,
            path: Path::PageCache,
        },
        Segment {
            start: 3,
            len: 3,
            path: Path::P2p,
        },
    ];
    let mut out = [Leg::EMPTY; 5];
    let n = ok!(plan::legs(pos, len, w.as_ref(), &segs, 4096, &mut out));
    let got = &out[..n];
    check!(n == 5);
    check!(
        got[0]
            == Leg {
                off: 0,
                len: 24,
                path: Path::PageCache
            }
    );
    check!(
        got[1]
            == Leg {
                off: 24,
                len: 8192 - 1024,
                path: Path::P2p
            }
    );
    check!(
        got[2]
            == Leg {
                off: 8192 - 1000,
                len: 4096,
                path: Path::PageCache
            }
    );
    check!(got[3].path == Path::P2p && got[3].off + pos == 12288);
    check!(got[4].path == Path::PageCache);
    let mut next = 0;
    for leg in got {
        check!(leg.off == next && leg.len > 0);
        if leg.path == Path::P2p {
            check!((pos + leg.off) % 512 == 0 && leg.len % 512 == 0);
            check!(pos + leg.off >= wr.start && pos + leg.off + leg.len <= wr.end);
        }
        next += leg.len;
    }
    check!(next == len);
    // Everything through the page cache merges into one leg; no window, one leg.
    let all = [ok!(plan::whole(&wr, Path::PageCache).ok_or(()))];
    check!(ok!(plan::legs(pos, len, w.as_ref(), &all, 4096, &mut out)) == 1);
    check!(
        out[0]
            == Leg {
                off: 0,
                len,
                path: Path::PageCache
            }
    );
    check!(ok!(plan::legs(5, 10, None, &[], 4096, &mut out)) == 1);
    check!(
        out[0]
            == Leg {
                off: 0,
                len: 10,
                path: Path::PageCache
            }
    );
    // Too small an output is an error.
    check!(
        plan::legs(pos, len, w.as_ref(), &segs, 4096, &mut out[..4])
            == Err(PlanError::OutputTooSmall)
    );
    Ok(())
}

/// A sequential read starts in the page where the previous one ended or the next one.
pub fn readahead_sequential_rule() -> Result<(), CaseError> {
    check!(readahead::is_sequential(-1, 0, 4096));
    check!(!readahead::is_sequential(-1, 4096, 4096));
    check!(readahead::is_sequential(512, 512, 4096));
    check!(readahead::is_sequential(4096, 4096, 4096));
    check!(readahead::is_sequential(4096, 8191, 4096));
    check!(readahead::is_sequential(4000, 4096, 4096));
    check!(readahead::is_sequential(4096, 8192, 4096));
    check!(!readahead::is_sequential(4096, 12288, 4096));
    check!(!readahead::is_sequential(1 << 20, 4096, 4096));
    check!(!readahead::is_sequential(i64::MAX, u64::MAX, 4096));
    check!(readahead::is_sequential(i64::MAX, i64::MAX as u64, 4096));
    // Pages of other sizes, powers of two (shifts) or not (divisions), agree.
    check!(readahead::is_sequential(65535, 65536, 65536));
    check!(!readahead::is_sequential(65535, 131072, 65536));
    check!(readahead::is_sequential(2999, 3000, 3000));
    check!(readahead::is_sequential(2999, 5999, 3000));
    check!(!readahead::is_sequential(2999, 6000, 3000));
    Ok(())
}

/// A read inside the page where the stream's previous read ended, and only such a read, is in
/// the same page.
pub fn readahead_same_page() -> Result<(), CaseError> {
    check!(readahead::same_page(512, 512, 512, 4096));
    check!(readahead::same_page(512, 0, 4096, 4096));
    check!(readahead::same_page(4095, 4000, 96, 4096));
    check!(readahead::same_page(8192 + 1, 8192 + 100, 3996, 4096));
    // The read runs into the next page.
    check!(!readahead::same_page(512, 512, 3585, 4096));
    // The previous read ended on a page boundary: the next page is new.
    check!(!readahead::same_page(4096, 4096, 512, 4096));
    check!(!readahead::same_page(4096, 3584, 512, 4096));
    // Another page, no previous read, an empty read, offsets at the limits.
    check!(!readahead::same_page(512, 4096, 512, 4096));
    check!(!readahead::same_page(-1, 0, 512, 4096));
    check!(!readahead::same_page(512, 512, 0, 4096));
    check!(!readahead::same_page(512, u64::MAX, 2, 4096));
    check!(readahead::same_page(i64::MAX, i64::MAX as u64 - 1, 1, 4096));
    // Pages of other sizes, powers of two (shifts) or not (divisions), agree.
    check!(readahead::same_page(70000, 70000, 1000, 65536));
    check!(!readahead::same_page(65536, 65536, 1000, 65536));
    check!(readahead::same_page(100, 200, 100, 3000));
    check!(!readahead::same_page(3000, 3100, 10, 3000));
    check!(!readahead::same_page(100, 2900, 101, 3000));
    check!(readahead::same_page(6001, 8999, 1, 3000));
    Ok(())
}

/// P-readahead takes small sequential reads only, and honours random advice and a zero window.
pub fn readahead_prefetch_rule() -> Result<(), CaseError> {
    let s = Stream {
        prev_pos: 65536,
        ra_pages: 32,
        random: false,
        ra_start: 0,
        ra_size: 0,
    };
    check!(readahead::prefetch(&s, 65536, 512, 4096));
    check!(readahead::prefetch(&s, 65536, (128 << 10) - 1, 4096));
    // At or above the window: P2P serves it well (SPIN's threshold).
    check!(!readahead::prefetch(&s, 65536, 128 << 10, 4096));
    // Random: not the next page.
    check!(!readahead::prefetch(&s, 1 << 20, 512, 4096));
    check!(!readahead::prefetch(
        &Stream { random: true, ..s },
        65536,
        512,
        4096
    ));
    check!(!readahead::prefetch(
        &Stream { ra_pages: 0, ..s },
        65536,
        512,
        4096
    ));
    // POSIX_FADV_SEQUENTIAL doubles the window.
    check!(readahead::prefetch(
        &Stream { ra_pages: 64, ..s },
        65536,
        128 << 10,
        4096
    ));
    check!(!readahead::prefetch(
        &Stream {
            ra_pages: u32::MAX,
            prev_pos: -1,
            ..s
        },
        4096,
        1,
        4096
    ));
    Ok(())
}

/// A test entry of the partition: an id and its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry(u32, u64);

impl Weighted for Entry {
    fn pages(&self) -> u64 {
        self.1
    }
}

/// The partition evicts its oldest entries to stay within its page limit and its slots.
pub fn partition_bounds_pages_fifo() -> Result<(), CaseError> {
    let mut slots = [Entry(0, 1); 8];
    let mut p = Partition::new(8);
    let mut evicted = [0u32; 16];
    let mut n = 0;
    for id in 1..=6 {
        check!(p.push(&mut slots, Entry(id, 1), |e| {
            evicted[n] = e.0;
            n += 1;
            0
        }));
    }
    check!(n == 0 && p.len() == 6 && p.pages() == 6);
    // A 4-page folio needs two pages: entries 1 and 2 go, oldest first.
    check!(p.push(&mut slots, Entry(7, 4), |e| {
        evicted[n] = e.0;
        n += 1;
        0
    }));
    check!(n == 2 && evicted[..2] == [1, 2]);
    check!(p.pages() == 8 && p.len() == 5);
    // Larger than the whole limit: refused, nothing evicted.
    check!(!p.push(&mut slots, Entry(8, 9), |_| {
        n += 100;
        0
    }));
    check!(n == 2 && p.pages() == 8);
    // Eight one-page entries: the older ones go, in order, and the ring wraps.
    for id in 10..18 {
        check!(p.push(&mut slots, Entry(id, 1), |e| {
            evicted[n] = e.0;
            n += 1;
            0
        }));
        check!(p.pages() <= p.limit());
    }
    check!(evicted[..n] == [1, 2, 3, 4, 5, 6, 7]);
    check!(p.len() == 8 && p.pages() == 8);
    // A ninth needs a slot as well as a page.
    check!(p.push(&mut slots, Entry(18, 1), |e| {
        evicted[n] = e.0;
        n += 1;
        0
    }));
    check!(n == 8 && evicted[7] == 10);
    for want in 11..19 {
        check!(p.pop(&slots) == Some(Entry(want, 1)));
    }
    check!(p.pop(&slots).is_none() && p.is_empty() && p.pages() == 0);
    // No slots: nothing is admitted.
    check!(!Partition::new(8).push(&mut [] as &mut [Entry], Entry(1, 1), |_| 0));
    Ok(())
}

/// A partition rebuilt with a smaller limit keeps the newest entries, oldest evicted first.
pub fn partition_rebuilt_smaller() -> Result<(), CaseError> {
    let mut old_slots = [Entry(0, 1); 6];
    let mut old = Partition::new(6);
    for id in 1..=6 {
        check!(old.push(&mut old_slots, Entry(id, 1), |_| 0));
    }
    let mut new_slots = [Entry(0, 1); 2];
    let mut new = Partition::new(2);
    let mut evicted = [0u32; 6];
    let mut n = 0;
    while let Some(e) = old.pop(&old_slots) {
        new.push(&mut new_slots, e, |v| {
            evicted[n] = v.0;
            n += 1;
            0
        });
    }
    check!(evicted[..n] == [1, 2, 3, 4]);
    check!(new.pop(&new_slots) == Some(Entry(5, 1)));
    check!(new.pop(&new_slots) == Some(Entry(6, 1)));
    Ok(())
}

/// Pages that eviction found busy stay counted against the limit until released: the
/// partition evicts more to make room for them, and admits nothing that would not fit.
pub fn partition_holds_busy_pages() -> Result<(), CaseError> {
    let mut slots = [Entry(0, 1); 8];
    let mut p = Partition::new(8);
    for id in 1..=8 {
        check!(p.push(&mut slots, Entry(id, 1), |_| 0));
    }
    // Entry 1 is busy (held), so entry 2 goes as well to make room for a 2-page folio.
    let mut evicted = [0u32; 8];
    let mut n = 0;
    check!(p.push(&mut slots, Entry(9, 2), |e| {
        evicted[n] = e.0;
        n += 1;
        if e.0 == 1 {
            e.1
        } else {
            0
        }
    }));
    check!(evicted[..n] == [1, 2, 3]);
    check!(p.held() == 1 && p.queued() == 7 && p.pages() == 8);
    // The held page is released: room for one more without evicting.
    p.release(1);
    check!(p.push(&mut slots, Entry(10, 1), |_| 100));
    check!(p.pages() == 8 && p.held() == 0);
    // An evictor takes the two oldest out, held while it works on them; the partition's
    // pages do not drop until it releases them.
    check!(p.pop_held(&slots) == Some(Entry(4, 1)));
    check!(p.pop_held(&slots) == Some(Entry(5, 1)));
    check!(p.pages() == 8 && p.held() == 2 && p.queued() == 6);
    // Every entry busy and held: a 4-page folio evicts the whole ring, still does not fit.
    let mut m = 0;
    check!(!p.push(&mut slots, Entry(11, 4), |e| {
        m += 1;
        e.1 * 10
    }));
    check!(m == 5 && p.is_empty() && p.held() == 8 && p.pages() == 8);
    p.release(8);
    check!(p.pages() == 0);
    // Held pages from a larger partition (`hold`) are made room for by the next push.
    p.hold(9);
    check!(!p.push(&mut slots, Entry(12, 1), |_| 0));
    p.release(2);
    check!(p.push(&mut slots, Entry(12, 1), |_| 0) && p.pages() == 8);
    Ok(())
}

/// The watermarks are ordered, within the limit, and leave a stream through cached pages a
/// lead of a quarter of it.
pub fn partition_watermarks_order() -> Result<(), CaseError> {
    for limit in (0..=1100u64).chain([1 << 18, u64::MAX / 2, u64::MAX]) {
        let w = Watermarks::new(limit);
        check!(w.target <= w.kick && w.kick <= limit && w.lead <= limit);
        check!(limit == 0 || w.lead >= 1);
        check!(limit < 4 || w.lead == limit / 4);
    }
    let w = Watermarks::new(512);
    check!(w.lead == 128 && w.kick == 352 && w.target == 256);
    Ok(())
}

/// Room reserved for the windows of reads in flight counts against the limit: a reservation
/// evicts the oldest entries to fit, waits for other reservations rather than exceed the
/// limit, is refused if held pages leave no room at all, and is given back as its windows
/// are admitted.
pub fn partition_reserves_windows() -> Result<(), CaseError> {
    let mut slots = [Entry(0, 1); 8];
    let mut p = Partition::new(8);
    for id in 1..=6 {
        check!(p.push(&mut slots, Entry(id, 1), |_| 0));
    }
    // Four pages for a leg in flight: the two oldest entries make room.
    let mut evicted = [0u32; 8];
    let mut n = 0;
    check!(
        p.reserve(&slots, 4, |e| {
            evicted[n] = e.0;
            n += 1;
            0
        }) == Reserve::Done
    );
    check!(evicted[..n] == [1, 2] && p.reserved() == 4 && p.used() == 8 && p.pages() == 4);
    // A second leg's four pages evict the rest of the books.
    check!(p.reserve(&slots, 4, |_| 0) == Reserve::Done && p.is_empty() && p.used() == 8);
    // A third must wait for one of them, and evicts nothing meanwhile.
    check!(p.reserve(&slots, 1, |_| 0) == Reserve::Wait && p.reserved() == 8);
    // The first leg admits a window of three pages out of its reservation, then is done.
    p.unreserve(3);
    check!(p.push(&mut slots, Entry(7, 3), |_| 0) && p.used() == 8);
    p.unreserve(1);
    check!(p.used() == 7 && p.reserved() == 4);
    // Admission beyond the reservations evicts the books, never a reservation.
    check!(p.push(&mut slots, Entry(8, 2), |_| 0) && p.queued() == 2 && p.reserved() == 4);
    check!(p.used() == 6);
    p.unreserve(4);
    // Held pages that leave no room for a reservation refuse it: waiting would not help.
    p.hold(6);
    check!(p.reserve(&slots, 3, |_| 0) == Reserve::NoRoom && p.queued() == 2);
    // Busy entries that eviction holds while making room refuse it too.
    p.release(6);
    check!(p.reserve(&slots, 7, |e| e.1) == Reserve::NoRoom && p.reserved() == 0);
    check!(p.held() == 2 && p.is_empty());
    // Reservations carried over to a partition of another limit count there.
    let mut q = Partition::new(2);
    q.keep_reserved(3);
    check!(q.used() == 3 && !q.push(&mut slots, Entry(9, 1), |_| 0));
    q.unreserve(3);
    check!(q.push(&mut slots, Entry(9, 1), |_| 0));
    Ok(())
}

/// The evictor's view of what the streams consumed: an entry is consumed once its stream was
/// noted past its last page; streams are told apart by id, a seek back takes effect, unknown
/// streams (and id 0) consume nothing, and a new stream replaces the one noted least
/// recently. `peek` shows the oldest entry without taking it.
pub fn partition_consumed_streams() -> Result<(), CaseError> {
    let mut c = Consumed::new();
    check!(!c.consumed(1, 0, 1) && !c.consumed(0, 0, 0));
    c.note(1, 10);
    check!(c.consumed(1, 0, 10) && c.consumed(1, 9, 1));
    check!(!c.consumed(1, 5, 6) && !c.consumed(1, 10, 1) && !c.consumed(2, 0, 1));
    check!(!c.consumed(1, u64::MAX, 2));
    c.note(0, 100);
    check!(!c.consumed(0, 0, 1));
    // A second stream through the same file has its own place.
    c.note(2, 3);
    check!(c.consumed(2, 0, 3) && !c.consumed(2, 3, 1) && c.consumed(1, 3, 1));
    // A seek back.
    c.note(1, 4);
    check!(c.consumed(1, 0, 4) && !c.consumed(1, 4, 1));
    // Streams 3 ..= STREAMS fill the rest; stream 1 is then noted again, so the next new
    // stream replaces stream 2, the one noted least recently.
    for id in 3..=STREAMS {
        c.note(id, 7);
    }
    check!(c.consumed(2, 0, 3) && c.consumed(STREAMS, 0, 7));
    c.note(1, 5);
    c.note(STREAMS + 1, 9);
    check!(!c.consumed(2, 0, 1) && c.consumed(1, 0, 5) && c.consumed(STREAMS + 1, 0, 9));
    check!(c.consumed(3, 0, 7) && c.consumed(STREAMS, 0, 7));
    // The oldest entry, left in place.
    let mut slots = [Entry(0, 1); 4];
    let mut p = Partition::new(4);
    check!(p.peek(&slots).is_none());
    check!(p.push(&mut slots, Entry(1, 2), |_| 0) && p.push(&mut slots, Entry(2, 1), |_| 0));
    check!(p.peek(&slots) == Some(Entry(1, 2)) && p.len() == 2 && p.queued() == 3);
    check!(p.pop(&slots) == Some(Entry(1, 2)) && p.peek(&slots) == Some(Entry(2, 1)));
    Ok(())
}

/// A leg reserves a synchronous window of `ra_pages`, or for a longer leg up to its length and
/// the device's `io_pages`, and an asynchronous one of that or the current window's size,
/// whichever is larger.
pub fn readahead_leg_reserve() -> Result<(), CaseError> {
    let s = |ra_pages: u32, ra_size: u64| Stream {
        prev_pos: 0,
        ra_pages,
        random: false,
        ra_start: 0,
        ra_size,
    };
    check!(readahead::leg_reserve(&s(32, 0), 256, 1) == 64);
    check!(readahead::leg_reserve(&s(32, 32), 256, 1) == 64);
    check!(readahead::leg_reserve(&s(32, 128), 256, 1) == 160);
    check!(readahead::leg_reserve(&s(32, 16), 256, 100) == 200);
    check!(readahead::leg_reserve(&s(32, 16), 256, 2048) == 512);
    check!(readahead::leg_reserve(&s(32, 16), 16, 2048) == 64);
    check!(readahead::leg_reserve(&s(0, 0), 0, 0) == 0);
    check!(readahead::leg_reserve(&s(u32::MAX, u64::MAX), 0, 1) == u64::MAX);
    Ok(())
}

/// A leg is accounted if it lies in the current window or the one before it.
pub fn readahead_leg_in_window() -> Result<(), CaseError> {
    // Window 64..96: the one before is at most 32..64.
    check!(readahead::in_window(64, 65, 64, 32));
    check!(readahead::in_window(40, 41, 64, 32));
    check!(readahead::in_window(32, 96, 64, 32));
    check!(!readahead::in_window(31, 33, 64, 32));
    check!(!readahead::in_window(95, 97, 64, 32));
    check!(!readahead::in_window(200, 201, 64, 32));
    // No window: nothing was accounted.
    check!(!readahead::in_window(0, 1, 0, 0));
    check!(readahead::in_window(0, 1, 0, 4));
    check!(readahead::in_window(
        u64::MAX - 1,
        u64::MAX,
        u64::MAX - 1,
        4
    ));
    Ok(())
}

/// A stream looks ahead `lead` to `lead + lead / 4` pages past every read, at each page once,
/// and not at all while its window is not behind it; the lead is a few windows, at most the
/// partition's room.
pub fn readahead_bridge_range() -> Result<(), CaseError> {
    let s = Stream {
        prev_pos: 16 * 4096,
        ra_pages: 32,
        random: false,
        ra_start: 0,
        ra_size: 0,
    };
    // 64 KiB at page 16 after a read that ended there: the horizon moves from 16 + 8 + 32 = 56
    // to 32 + 8 + 32 = 72.
    check!(readahead::bridge(&s, 16 * 4096, 65536, 32, 4096) == Some((56, 72)));
    // The first read of a stream looks at the whole look-ahead, as does a read at 0.
    let first = Stream { prev_pos: -1, ..s };
    check!(readahead::bridge(&first, 0, 65536, 32, 4096) == Some((16, 56)));
    check!(readahead::bridge(&s, 0, 4096, 32, 4096) == Some((1, 40)));
    // Reads that do not move the horizon look at nothing; the one that does, at one step.
    for (prev, pos, len) in [(4608, 4608, 512), (4096, 4096, 4096), (8192, 8192, 20480)] {
        let st = Stream {
            prev_pos: prev,
            ..s
        };
        check!(readahead::bridge(&st, pos, len, 32, 4096).is_none());
    }
    let step = Stream {
        prev_pos: 6 * 4096 + 512,
        ..s
    };
    check!(readahead::bridge(&step, 6 * 4096 + 512, 4096, 32, 4096) == Some((40, 48)));
    // Successive reads tile the file: each page is looked at once, between `ra_pages` and
    // `ra_pages + 8` pages ahead.
    let mut seen = 0u64;
    let mut pos = 0u64;
    let mut prev = -1i64;
    while pos < 1 << 20 {
        let len = 3000;
        let st = Stream {
            prev_pos: prev,
            ..s
        };
        if let Some((from, end)) = readahead::bridge(&st, pos, len, 32, 4096) {
            check!(from == seen || seen == 0);
            seen = end;
        }
        pos += len;
        prev = pos as i64;
        let next = (pos - 1) / 4096 + 1;
        check!(seen > next + 32 && seen <= next + 40);
    }
    // A window not behind the read: nothing; the read past it looks beyond the window and
    // from the read on, whatever the previous read (under the window) looked at.
    let win = Stream {
        ra_start: 40,
        ra_size: 32,
        ..s
    };
    check!(readahead::bridge(&win, 16 * 4096, 65536, 32, 4096).is_none());
    check!(readahead::bridge(
        &Stream {
            ra_start: 20,
            ..win
        },
        16 * 4096,
        65536,
        32,
        4096
    )
    .is_none());
    let behind = Stream {
        prev_pos: 64 * 4096,
        ra_start: 32,
        ra_size: 32,
        ..s
    };
    check!(readahead::bridge(&behind, 64 * 4096, 65536, 32, 4096) == Some((80, 120)));
    let past = Stream {
        prev_pos: 80 * 4096,
        ..behind
    };
    check!(readahead::bridge(&past, 80 * 4096, 65536, 32, 4096) == Some((120, 136)));
    // No read-ahead, random advice, an empty read, the end of the offsets: nothing.
    check!(readahead::bridge(&Stream { ra_pages: 0, ..s }, 0, 4096, 32, 4096).is_none());
    check!(readahead::bridge(&Stream { random: true, ..s }, 0, 4096, 32, 4096).is_none());
    check!(readahead::bridge(&s, 16 * 4096, 0, 32, 4096).is_none());
    check!(readahead::bridge(&s, u64::MAX - 10, 20, 32, 4096).is_none());
    check!(readahead::bridge(&s, u64::MAX - 1, 1, 32, 1).is_none());
    check!(readahead::bridge(&s, 0, 4096, 0, 4096).is_none());
    // A lead of four windows: the horizon moves in steps of 32 pages, 128 to 160 pages ahead.
    check!(readahead::bridge(&first, 0, 65536, 128, 4096) == Some((16, 160)));
    check!(readahead::bridge(&s, 16 * 4096, 65536, 128, 4096) == Some((160, 192)));
    let far = Stream {
        prev_pos: 32 * 4096,
        ..s
    };
    check!(readahead::bridge(&far, 32 * 4096, 65536, 128, 4096).is_none());
    // The read before lay under the window (which ends at its end): it looked at nothing, so
    // this one looks from its own end.
    let under = Stream {
        ra_start: 0,
        ra_size: 16,
        ..s
    };
    check!(readahead::bridge(&under, 16 * 4096, 65536, 128, 4096) == Some((32, 192)));
    check!(readahead::bridge(&under, 16 * 4096, 65536, 32, 4096) == Some((32, 72)));
    // The lead: four windows, at most the room the partition leaves, 0 without read-ahead.
    check!(readahead::bridge_lead(32, 128) == 128);
    check!(readahead::bridge_lead(32, 1 << 20) == 128);
    check!(readahead::bridge_lead(32, 20) == 20);
    check!(readahead::bridge_lead(0, 128) == 0);
    check!(readahead::bridge_lead(u32::MAX, u64::MAX) == u32::MAX);
    Ok(())
}

/// A fully cached request is scheduled only where P2P alone beats the copy; then the overlap
/// scheduler splits it and beats the copy too.
pub fn overlap_cached_wants_p2p() -> Result<(), CaseError> {
    let g = gen4()?.model();
    // Copying a page (410 ns) is faster than reading it by P2P (630 ns): never.
    for n in [1u64, 32, 512, 2048, 1 << 20] {
        check!(!cached_wants_p2p(&g, n));
    }
    check!(!cached_wants_p2p(&g, 0));
    // 52 us + n * 315 ns < n * 394 ns from n = 660 pages on.
    let p = copy_slower()?;
    let m = p.model();
    check!(!cached_wants_p2p(&m, 1));
    check!(!cached_wants_p2p(&m, 512));
    check!(!cached_wants_p2p(&m, 659));
    check!(cached_wants_p2p(&m, 661));
    check!(cached_wants_p2p(&m, 2048));
    let lens = [2048u32];
    let runs = ok!(Runs::new(true, &lens));
    let (mut ws, mut gaps) = ([Slot::EMPTY; 4], [0u32; 4]);
    let mut out = [Segment::EMPTY; 4];
    let o = ok!(overlap(&p, &runs, &mut out, &mut ws, &mut gaps));
    check!(o.schedule.cost < m.t_pc(2048));
    check!(o.schedule.cost < m.device(m.t_p2p(2048), true));
    check!(o.schedule.segments.iter().any(|s| s.path == Path::P2p));
    check!(o
        .schedule
        .segments
        .iter()
        .any(|s| s.path == Path::PageCache));
    // A queue that hides part of C_p2p does not change the rule's answer for one transfer.
    let q = ok!(p.with_overlap(800)).model();
    check!(cached_wants_p2p(&q, 661) && !cached_wants_p2p(&q, 659));
    Ok(())
}

/// A stream the page cache reads ahead for: read-ahead on, no random advice, a read that
/// continues the previous one (not the first, at offset 0).
pub fn readahead_streaming_rule() -> Result<(), CaseError> {
    let s = Stream {
        prev_pos: 1 << 20,
        ra_pages: 32,
        random: false,
        ra_start: 0,
        ra_size: 0,
    };
    let at = |prev_pos: i64, pos: u64| readahead::streaming(&Stream { prev_pos, ..s }, pos, 4096);
    check!(at(1 << 20, 1 << 20));
    check!(at(1 << 20, (1 << 20) + 4096));
    check!(!at(1 << 20, (1 << 20) + 8192));
    check!(at(0, 4096));
    // A read at offset 0 starts a stream: nothing reads ahead of it yet.
    check!(!at(-1, 0) && !at(0, 0) && !at(4096, 0));
    check!(!at(-1, 4096));
    check!(!readahead::streaming(
        &Stream { random: true, ..s },
        1 << 20,
        4096
    ));
    check!(!readahead::streaming(
        &Stream { ra_pages: 0, ..s },
        1 << 20,
        4096
    ));
    // P-readahead takes streaming reads below the window, and a first one at offset 0.
    check!(readahead::prefetch(&s, 1 << 20, (128 << 10) - 1, 4096));
    check!(!readahead::prefetch(&s, 1 << 20, 128 << 10, 4096));
    check!(readahead::prefetch(
        &Stream { prev_pos: -1, ..s },
        0,
        4096,
        4096
    ));
    Ok(())
}

/// Read-ahead beats P2P for an uncached stream where it saves a 32nd of the P2P time: up to
/// about 32 times what the device moves in `C_p2p` where copying is not slower than the
/// device, below the size where the copy's extra time nears `C_p2p` where it is. It loses to a
/// schedule that overlaps a large cached part with the P2P of the rest.
pub fn readahead_ahead_wins() -> Result<(), CaseError> {
    let g = gen4()?.model();
    let uncached = |m: &Model, n: u64| readahead::ahead_wins(m, n, 0, m.device(m.t_p2p(n), true));
    // 60 us + n * 630 ns by P2P against n * 630 ns read ahead.
    for n in [1u64, 32, 33, 512, 2048] {
        check!(readahead::ahead_makespan(&g, n, 0) == n * g.a());
        check!(uncached(&g, n));
    }
    check!(!uncached(&g, 4096) && !uncached(&g, 1 << 20));
    check!(!readahead::ahead_wins(&g, 0, 0, 0));
    // Copy-bound when half is cached: max(512 * 410 ns, 256 * 630 ns).
    check!(readahead::ahead_makespan(&g, 512, 256) == 512 * g.pc());
    check!(readahead::ahead_makespan(&g, 512, 512) == 512 * g.pc());
    // Half of 512 pages cached: the schedule's P2P leg of 256 pages (80 us + 141 us) is
    // longer than copying all 512 (210 us); half of 2048 cached: the split (705 us) beats
    // copying all (839 us).
    for (pages, wins) in [(512u32, true), (2048, false)] {
        let lens = [pages / 2, pages / 2];
        let runs = ok!(Runs::new(true, &lens));
        let (mut ws, mut gaps) = ([Slot::EMPTY; 8], [0u32; 8]);
        let mut out = [Segment::EMPTY; 8];
        let o = ok!(overlap(&gen4()?, &runs, &mut out, &mut ws, &mut gaps));
        let planned = o.schedule.cost;
        let n = u64::from(pages);
        check!(readahead::ahead_wins(&g, n, n / 2, planned) == wins);
    }
    // A copy slower than the device: 52 us + n * 315 ns by P2P against n * 394 ns read
    // ahead, which saves a 32nd up to about 568 pages; larger reads go by P2P.
    let m = copy_slower()?.model();
    check!(uncached(&m, 1) && uncached(&m, 32) && uncached(&m, 512) && uncached(&m, 560));
    check!(!uncached(&m, 580) && !uncached(&m, 661) && !uncached(&m, 2048));
    Ok(())
}

/// A leg reads ahead only if what it reserves is at most half the partition.
pub fn readahead_leg_fits() -> Result<(), CaseError> {
    let s = Stream {
        prev_pos: 0,
        ra_pages: 32,
        random: false,
        ra_start: 0,
        ra_size: 32,
    };
    // 128 + 128 pages for a long leg on a device of 512 KiB commands.
    check!(readahead::leg_fits(&s, 128, 2048, 512));
    check!(!readahead::leg_fits(&s, 128, 2048, 511));
    // 2 MiB commands: 512 + 512 pages.
    check!(!readahead::leg_fits(&s, 512, 2048, 512));
    check!(readahead::leg_fits(&s, 512, 2048, 2048));
    // A leg within the window reserves two windows.
    check!(readahead::leg_fits(&s, 512, 8, 128));
    check!(!readahead::leg_fits(&s, 512, 8, 0));
    Ok(())
}
