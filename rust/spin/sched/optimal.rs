// SPDX-License-Identifier: GPL-2.0

//! Exact minimum of the additive cost of Eq. 1 over all schedules at page granularity, in time
//! linear in the number of runs, with a few instructions per run.
//!
//! A schedule may cut the request at any page: a P2P transfer may start or end inside a cached
//! run, a cached run may be split between P2P and the page cache. With `T_p2p(n) = c +
//! max(0, n*a - b)` and `T_pc(n) = n*pc` (see [`super::cost`]) a schedule is a set of disjoint
//! P2P intervals covering every uncached page (the rest is copied), and its cost is
//!
//! ```text
//! pc * N + sum over P2P intervals of psi(len),    psi(l) = T_p2p(l) - pc * l
//! ```
//!
//! so only the interval lengths matter. Proved in Documentation/spin/sched.rst:
//!
//! * If `a < pc`, `psi` decreases, and the optimum is one P2P transfer of the whole request, or
//!   all page cache if every page is cached and that is not dearer. O(1).
//! * Otherwise `psi` falls to its minimum `A = psi(n*)` at `n*` pages, then rises with slope
//!   `delta = a - pc`. An interval around a group of uncached runs from page `s` to page `e`
//!   costs at least `phi(e - s) = max(A, B + delta * (e - s))` with `B = c - b`, exactly that
//!   if it can be stretched to `n*` pages, and in an optimal partition of the uncached runs
//!   into groups every group can be. So for `N >= n*` the optimum is `pc * N` plus the least
//!   sum of `phi` over the partitions; for `N < n*` it is one transfer of the whole request.
//! * Bridging a cached run of at most `gamma = floor(B / delta)` pages never costs more, so
//!   uncached runs separated by such short gaps are merged first: the program below sees only
//!   the runs between long gaps (for the Gen4 device, gaps of more than 271 pages), usually
//!   few. The merge pass is one comparison per run.
//!
//! The program over the merged runs is `dp[j] = min over i <= j of dp[i-1] + phi(e_j - s_i)`.
//! `phi` is flat (`A`) up to `theta = floor((A - B) / delta)` pages and linear above, and `dp`
//! is non-decreasing, so the flat part is `dp[lo-1] + A` for the first run `lo` within `theta`
//! pages of `e_j` (the sliding-window minimum is the window's first entry), and the linear
//! part `B + delta * e_j` plus the running minimum of the keys `dp[i-1] - delta * s_i` of the
//! runs that left the window. One pointer moves monotonically: O(1) amortised per run.
//!
//! The caller provides the workspace: one [`Slot`] (24 bytes) per uncached run plus one
//! ([`scratch_len`]), at most 1025 slots (24 KiB) for an 8 MB request of 4 KiB pages.

use super::cost::{Model, Params, Picos};
use super::runs::Runs;
use super::schedule::{Path, SchedError, Schedule, Segment, SegmentBuf};

const INF: u64 = u64::MAX;

/// Workspace entry of the exact scheduler (24 bytes).
///
/// Slot `t` belongs to the merged uncached run `t` (counting from 0); the slot after the last
/// one is a sentinel.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Least cost (beyond `pc * N`) of the runs before run `t`: `dp[t-1]`.
    prev: u64,
    /// First page of run `t`.
    s: u32,
    /// One past the last page of run `t`.
    e: u32,
    /// First run of the group that ends with run `t` in an optimal partition of the runs up to
    /// `t`.
    from: u32,
}

impl Slot {
    /// Initial value for workspace arrays.
    pub const EMPTY: Slot = Slot {
        prev: 0,
        s: 0,
        e: 0,
        from: 0,
    };
}

// The documented workspace size.
const _: () = assert!(core::mem::size_of::<Slot>() == 24);

/// Workspace entries [`optimal`] needs for `runs`: the number of uncached runs plus one.
pub fn scratch_len(runs: &Runs<'_>) -> usize {
    let n = runs.len();
    let uncached = if runs.first_cached() {
        n / 2
    } else {
        n.div_ceil(2)
    };
    uncached + 1
}

/// Computes an optimal schedule for `runs` under the additive cost of `params`.
///
/// `out` needs [`Runs::max_segments`] entries, `scratch` [`scratch_len`] entries. The returned
/// cost is the exact optimum of the additive cost, in picoseconds.
pub fn optimal<'o>(
    params: &Params,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
    scratch: &mut [Slot],
) -> Result<Schedule<'o>, SchedError> {
    runs.check_size(params.page_size())?;
    optimal_model(&params.model(), runs, out, scratch)
}

/// [`optimal`] for an arbitrary [`Model`] (e.g. a weighted one); the caller checks the size.
///
/// With the models of validated [`Params`] and requests of at most
/// [`super::cost::MAX_REQUEST_BYTES`] the program runs in plain `i64` arithmetic that cannot
/// overflow; other models (e.g. the overlap scheduler's weighted ones) fall back to checked
/// arithmetic, still exact, and an optimum beyond `u64::MAX` picoseconds is reported as
/// [`SchedError::Overflow`].
pub fn optimal_model<'o>(
    model: &Model,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
    scratch: &mut [Slot],
) -> Result<Schedule<'o>, SchedError> {
    if out.len() < runs.max_segments() {
        return Err(SchedError::OutputTooSmall);
    }
    let mut buf = SegmentBuf::new(out);
    let n = u64::from(runs.pages());
    if model.a() < model.pc() || runs.all_cached() {
        let cost = single_method(model, runs, &mut buf)?;
        return Ok(buf.finish(cost));
    }
    let slots = scratch
        .get_mut(..scratch_len(runs))
        .ok_or(SchedError::ScratchTooSmall)?;
    let shape = Shape::new(model);
    if n < shape.nstar {
        // Every transfer is shorter than n*, where growing one is cheaper than copying: one
        // transfer of the whole request.
        buf.push(0, runs.pages(), Path::P2p)?;
        return Ok(buf.finish(model.device(model.t_p2p(n), true)));
    }
    let (lead, body) = split_lead(runs);
    let (groups, runs_in_slots) = shape
        .solve(n, lead, body, slots)
        .ok_or(SchedError::Overflow)?;
    // Not fully cached: every schedule has a P2P leg and pays the batch term.
    let cost = model.device(groups, true).saturating_add(model.t_pc(n));
    if cost == INF {
        return Err(SchedError::Overflow);
    }
    shape.emit(n, slots, runs_in_slots, &mut buf)?;
    buf.reverse();
    Ok(buf.finish(cost))
}

/// The optimum when `a < pc` or the request is fully cached: one P2P transfer, or all page
/// cache for a fully cached request if that is not dearer.
fn single_method(
    model: &Model,
    runs: &Runs<'_>,
    buf: &mut SegmentBuf<'_>,
) -> Result<Picos, SchedError> {
    let n = runs.pages();
    let p2p = model.device(model.t_p2p(n.into()), true);
    let pc = model.t_pc(n.into());
    if runs.all_cached() && pc <= p2p {
        buf.push(0, n, Path::PageCache)?;
        return Ok(pc);
    }
    buf.push(0, n, Path::P2p)?;
    Ok(p2p)
}

/// Pages before the first uncached run, and the run lengths from the first uncached run on
/// (uncached, cached, uncached, ...).
fn split_lead<'r>(runs: &Runs<'r>) -> (u64, &'r [u32]) {
    let lens = runs.lens();
    if runs.first_cached() {
        let lead = lens.first().copied().unwrap_or(0);
        (lead.into(), lens.get(1..).unwrap_or(&[]))
    } else {
        (0, lens)
    }
}

/// The constants of `phi(L) = max(A, B + delta * L)` for a model with `a >= pc`.
struct Shape {
    /// Length in pages at which `psi(l) = T_p2p(l) - pc * l` is least (at least 1).
    nstar: u64,
    /// `A = psi(n*)`, the cost of a group that fits in `n*` pages.
    flat: u64,
    /// `B = c - b`.
    base: u64,
    /// `delta = a - pc`.
    delta: u64,
    /// Longest group core, in pages, that costs `A`: `floor((A - B) / delta)`.
    theta: u64,
    /// Longest cached run between two uncached runs that some optimal schedule bridges
    /// whatever else happens: `floor(B / delta)`.
    gamma: u64,
}

impl Shape {
    fn new(m: &Model) -> Self {
        let (c, a, b, pc) = (m.c(), m.a(), m.b(), m.pc());
        let n0 = m.flat_pages();
        // T_p2p grows by 0 per page below n0, by (n0 + 1) * a - b from n0 to n0 + 1 pages and by
        // a >= pc above: psi falls while the growth is below pc.
        let step = n0.saturating_add(1).saturating_mul(a).saturating_sub(b);
        let nstar = if step >= pc { n0 } else { n0.saturating_add(1) }.max(1);
        let flat = m.t_p2p(nstar).saturating_sub(m.t_pc(nstar));
        let base = c.saturating_sub(b);
        let delta = a.saturating_sub(pc);
        let theta = flat
            .saturating_sub(base)
            .checked_div(delta)
            .unwrap_or(u64::MAX);
        let gamma = base.checked_div(delta).unwrap_or(u64::MAX);
        Self {
            nstar,
            flat,
            base,
            delta,
            theta,
            gamma,
        }
    }

    /// Runs the program over the uncached runs of `body` (which starts `lead` pages into a
    /// request of `n` pages), filling `slots`; returns `dp`, the least sum of `phi`, and the
    /// number of (merged) runs in `slots`, or `None` if `dp` does not fit a `u64` (only
    /// possible with models outside the validated ranges).
    fn solve(&self, n: u64, lead: u64, body: &[u32], slots: &mut [Slot]) -> Option<(u64, usize)> {
        // Every dp value is at most that of one group over everything, phi(N) <= A + B +
        // delta * N =: M; keys lie in [-delta * N, M], candidates below 2 * M. With M up to
        // i64::MAX / 4 the program runs in plain i64 arithmetic that provably cannot overflow.
        let bound = self
            .flat
            .checked_add(self.base)
            .and_then(|x| x.checked_add(self.delta.checked_mul(n)?))
            .filter(|&m| m <= (i64::MAX / 4) as u64);
        match bound {
            Some(m) => {
                let ar = Exact {
                    flat: self.flat,
                    lin: self.base,
                    delta: self.delta,
                    sent: m.saturating_mul(3),
                };
                // dp is a true cost, 0 <= dp <= M.
                self.program(&ar, lead, body, slots)
            }
            None => {
                let ar = Checked {
                    flat: self.flat,
                    lin: self.base,
                    delta: self.delta,
                };
                self.program(&ar, lead, body, slots)
                    .filter(|&(dp, _)| dp != INF)
            }
        }
    }

    /// The program itself, in the arithmetic of `ar`. Slot `t` belongs to merged run `t` (from
    /// 0); slot `t + 1` holds a sentinel that closes the window while run `t` is processed, so
    /// `slots` needs one entry more than there are uncached runs.
    #[inline(always)]
    fn program<R: Arith>(
        &self,
        ar: &R,
        lead: u64,
        body: &[u32],
        slots: &mut [Slot],
    ) -> Option<(u64, usize)> {
        let k = body.len().div_ceil(2);
        // At most k merged runs in slots 0..k, and one sentinel; checked once, up front.
        let slots = slots.get_mut(..=k)?;
        let mut st = State {
            theta: self.theta,
            sent: ar.sentinel(),
            pm: ar.none(),
            pm_at: 0,
            lo: 0,
            dp: 0,
        };
        let gamma = self.gamma;
        // Uncached runs separated by at most gamma cached pages are merged into one run
        // (bridging such a gap never costs more); the program sees only the merged runs.
        // Positions are sums of run lengths, at most u32::MAX (`Runs::new`): no overflow in u64.
        let inner = body.get(..2 * k.saturating_sub(1)).unwrap_or(&[]);
        let mut pos = lead;
        let mut start = lead;
        let mut t = 0;
        for pair in inner.chunks_exact(2) {
            let (u, g) = match *pair {
                [u, g] => (u, g),
                _ => (0, 0),
            };
            let e = pos.wrapping_add(u.into());
            pos = e.wrapping_add(g.into());
            if u64::from(g) > gamma {
                st.step(ar, slots, t, start, e)?;
                t += 1;
                start = pos;
            }
        }
        let u = body.get(2 * k.saturating_sub(1)).copied().unwrap_or(0);
        st.step(ar, slots, t, start, pos.wrapping_add(u.into()))?;
        Some((st.dp, t + 1))
    }

    /// Writes the optimal schedule back to front into `buf`: walks the groups of the optimal
    /// partition right to left and stretches every group of less than `n*` pages to `n*` pages,
    /// into the cached pages on its left, or, for the first group, on its right and then its
    /// left. In an optimal partition the cached pages between two groups hold both stretches
    /// (Documentation/spin/sched.rst), so every group costs `phi` of its length.
    fn emit(
        &self,
        n: u64,
        slots: &[Slot],
        k: usize,
        buf: &mut SegmentBuf<'_>,
    ) -> Result<(), SchedError> {
        let mut groups = Back { slots, left: k };
        let Some((mut ps, mut pe)) = groups.next_group()? else {
            return buf.push_range(0, n, Path::PageCache);
        };
        // Start of the interval written last, to the right of the group [ps, pe).
        let mut right = n;
        // Every step consumes a group; bound the loop anyway so that a bug cannot hang.
        for _ in 0..=k {
            let Some((qs, qe)) = groups.next_group()? else {
                return self.emit_first(ps, pe, right, buf);
            };
            let need = self.nstar.saturating_sub(pe.saturating_sub(ps));
            let x = ps.saturating_sub(need.min(ps.saturating_sub(qe)));
            buf.push_range(pe, right, Path::PageCache)?;
            buf.push_range(x, pe, Path::P2p)?;
            right = x;
            (ps, pe) = (qs, qe);
        }
        Err(SchedError::Overflow)
    }

    /// Writes the first group `[ps, pe)`, stretched to `n*` pages into the cached pages up to
    /// `right` and then to its left, and the page-cache segments around it.
    fn emit_first(
        &self,
        ps: u64,
        pe: u64,
        right: u64,
        buf: &mut SegmentBuf<'_>,
    ) -> Result<(), SchedError> {
        let need = self.nstar.saturating_sub(pe.saturating_sub(ps));
        let r = need.min(right.saturating_sub(pe));
        let l = need.saturating_sub(r).min(ps);
        let (x, y) = (ps.saturating_sub(l), pe.saturating_add(r));
        buf.push_range(y, right, Path::PageCache)?;
        buf.push_range(x, y, Path::P2p)?;
        buf.push_range(0, x, Path::PageCache)
    }
}

/// The moving part of the program.
struct State<K> {
    theta: u64,
    sent: u64,
    /// Least key of the runs that left the window, and its run.
    pm: K,
    pm_at: u32,
    /// First run still in the window.
    lo: usize,
    /// `dp` of the runs processed so far.
    dp: u64,
}

impl<K: Copy> State<K> {
    /// Processes (merged) uncached run `t`, pages `[s, e)`; `slots` has at least `t + 2`
    /// entries.
    #[inline(always)]
    fn step<R: Arith<Key = K>>(
        &mut self,
        ar: &R,
        slots: &mut [Slot],
        t: usize,
        s: u64,
        e: u64,
    ) -> Option<()> {
        {
            let sl = slots.get_mut(t)?;
            sl.prev = self.dp;
            sl.s = s as u32;
            sl.e = e as u32;
        }
        {
            // Sentinel: s = e never leaves the window of run t, prev is above every cost.
            let sl = slots.get_mut(t + 1)?;
            sl.prev = self.sent;
            sl.s = e as u32;
        }
        // Runs that start more than theta pages before e leave the window for good.
        let limit = e.saturating_sub(self.theta);
        let (mut lo, mut pm, mut pm_at) = (self.lo, self.pm, self.pm_at);
        // The sentinel (s = e) stops the loop at slot t + 1 at the latest.
        while let Some(w) = slots.get(lo) {
            if u64::from(w.s) >= limit {
                break;
            }
            let key = ar.key(w.prev, w.s.into());
            if ar.key_less(key, pm) {
                pm = key;
                pm_at = lo as u32;
            }
            lo += 1;
        }
        // The window's first run has the least dp value in it (dp is non-decreasing).
        let flat = ar.flat(slots.get(lo)?.prev);
        let lin = ar.lin(pm, e);
        let (v, from) = if lin < flat {
            (lin, pm_at)
        } else {
            (flat, lo as u32)
        };
        slots.get_mut(t)?.from = from;
        (self.lo, self.pm, self.pm_at, self.dp) = (lo, pm, pm_at, v);
        Some(())
    }
}

/// The arithmetic of the program. Costs (`dp`, candidates) are `u64`; a group from run `i`
/// (first page `s_i`) to page `e` in the linear part of `phi` costs `dp[i-1] + B + delta * (e
/// - s_i)`, and runs are compared by their key `dp[i-1] - delta * s_i`.
trait Arith {
    /// A key.
    type Key: Copy;
    /// The key of no run, above every key.
    fn none(&self) -> Self::Key;
    /// A cost above every candidate, for the sentinel slot.
    fn sentinel(&self) -> u64;
    /// The key of a run from `dp[i-1]` and its first page `s`.
    fn key(&self, prev: u64, s: u64) -> Self::Key;
    /// Whether key `x` is less than key `y`.
    fn key_less(&self, x: Self::Key, y: Self::Key) -> bool;
    /// The cost of the group from the run of key `pm` to page `e >= s`.
    fn lin(&self, pm: Self::Key, e: u64) -> u64;
    /// `dp[i-1] + A`: the cost of the group from run `i` in the flat part.
    fn flat(&self, prev: u64) -> u64;
}

/// Plain `i64` arithmetic that cannot overflow when `M = A + B + delta * N <= i64::MAX / 4`:
/// every `dp` is at most the cost of one group over everything, `phi(N) <= M`, keys lie in
/// `[-M, M]`, candidates in `[0, 2 * M]`, and the sentinel `3 * M` plus any term stays below
/// `4 * M`. Wrapping operations only spare the overflow checks that cannot fire.
struct Exact {
    flat: u64,
    lin: u64,
    delta: u64,
    sent: u64,
}

impl Arith for Exact {
    type Key = i64;
    #[inline(always)]
    fn none(&self) -> i64 {
        self.sent as i64
    }
    #[inline(always)]
    fn sentinel(&self) -> u64 {
        self.sent
    }
    #[inline(always)]
    fn key(&self, prev: u64, s: u64) -> i64 {
        (prev as i64).wrapping_sub((self.delta as i64).wrapping_mul(s as i64))
    }
    #[inline(always)]
    fn key_less(&self, x: i64, y: i64) -> bool {
        x < y
    }
    #[inline(always)]
    fn lin(&self, pm: i64, e: u64) -> u64 {
        pm.wrapping_add(self.lin as i64)
            .wrapping_add((self.delta as i64).wrapping_mul(e as i64)) as u64
    }
    #[inline(always)]
    fn flat(&self, prev: u64) -> u64 {
        prev.wrapping_add(self.flat)
    }
}

/// Checked `u64` arithmetic for models outside the validated ranges: a key is the pair
/// `(dp[i-1], s_i)`, compared without forming the (possibly negative) difference, and a cost
/// that does not fit is `u64::MAX`. Exact whenever the optimum fits a `u64`: every `dp` is at
/// most the optimum, and a candidate that does not fit cannot be it.
struct Checked {
    flat: u64,
    lin: u64,
    delta: u64,
}

impl Arith for Checked {
    type Key = (u64, u64);
    fn none(&self) -> (u64, u64) {
        (INF, 0)
    }
    fn sentinel(&self) -> u64 {
        INF
    }
    fn key(&self, prev: u64, s: u64) -> (u64, u64) {
        (prev, s)
    }
    fn key_less(&self, (x, sx): (u64, u64), (y, sy): (u64, u64)) -> bool {
        if y == INF {
            return x != INF;
        }
        if x == INF {
            return false;
        }
        // x - delta * sx < y - delta * sy
        if sy >= sx {
            // x + delta * (sy - sx) < y; a sum that does not fit is not less.
            self.delta
                .checked_mul(sy - sx)
                .and_then(|d| d.checked_add(x))
                .is_some_and(|l| l < y)
        } else {
            // x < y + delta * (sx - sy); a sum that does not fit is more.
            self.delta
                .checked_mul(sx - sy)
                .and_then(|d| d.checked_add(y))
                .is_none_or(|r| x < r)
        }
    }
    fn lin(&self, (pm, s): (u64, u64), e: u64) -> u64 {
        if pm == INF {
            return INF;
        }
        self.delta
            .checked_mul(e.saturating_sub(s))
            .and_then(|d| d.checked_add(pm))
            .and_then(|d| d.checked_add(self.lin))
            .unwrap_or(INF)
    }
    fn flat(&self, prev: u64) -> u64 {
        prev.checked_add(self.flat).unwrap_or(INF)
    }
}

/// The groups of the optimal partition, right to left, as page ranges `[s, e)` from the first
/// page of their first uncached run to the end of their last.
struct Back<'a> {
    slots: &'a [Slot],
    /// Runs not yet consumed: the next group ends with run `left - 1`.
    left: usize,
}

impl Back<'_> {
    fn next_group(&mut self) -> Result<Option<(u64, u64)>, SchedError> {
        let Some(j) = self.left.checked_sub(1) else {
            return Ok(None);
        };
        let last = self.slots.get(j).ok_or(SchedError::Overflow)?;
        let i = (last.from as usize).min(j);
        let first = self.slots.get(i).ok_or(SchedError::Overflow)?;
        self.left = i;
        Ok(Some((first.s.into(), last.e.into())))
    }
}
