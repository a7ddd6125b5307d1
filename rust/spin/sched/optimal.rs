// SPDX-License-Identifier: GPL-2.0

//! Exact minimum of the additive cost of Eq. 1 over all schedules at page granularity, in time
//! linear in the number of runs.
//!
//! A schedule may cut the request at any page: a P2P transfer may start or end inside a cached
//! run, a cached run may be split between P2P and the page cache. With `T_p2p(n) = c +
//! max(0, n*a - b)` and `T_pc(n) = n*pc` (see [`super::cost`]) the optimum has a simple shape,
//! proved in Documentation/spin/sched.rst:
//!
//! * If `a < pc` (P2P moves a page faster than the page cache), extending a P2P transfer by a
//!   page into an adjacent page-cache segment always saves time, so the optimum is one P2P
//!   transfer of the whole request, or all page cache if every page is cached and that is
//!   cheaper.
//! * Otherwise (`a >= pc`) there is an optimal schedule in which every P2P transfer covers whole
//!   uncached runs and is either *long* (more than `n*` pages, starting at the first page of an
//!   uncached run and ending at the last page of one), *short* (exactly `n*` pages, starting at
//!   the first page of an uncached run or at page 0, or ending at the last page of an uncached
//!   run), or the whole request. `n*` is the length up to which growing a transfer by one page
//!   costs less than copying that page: `floor(b/a)`, or one more if the step across the hinge
//!   is still cheaper than `pc`.
//!
//! The dynamic program walks the uncached runs once and keeps, per uncached run `i`, the
//! optimal cost of the prefix ending at its first page (`S[i]`) and at `e_i - n*` (`M[i]`).
//! Long transfers use a running minimum of `S[j] + (N - s_j) * a` (the prefix minimum of
//! `dp[j] - j*a` of the page-level program, restricted to run starts); short transfers are
//! events at distance `n*` from run boundaries, merged into the sweep of each cached run, where
//! page-cache time is linear. Three pointers move monotonically over the runs, so the time is
//! linear in the number of runs and independent of the request size.
//!
//! The caller provides the workspace: one [`Slot`] per uncached run plus one
//! ([`scratch_len`]), e.g. 1025 slots (56 KiB) for any 8 MB request of 4 KiB pages.

use super::cost::{Model, Params, Picos};
use super::runs::Runs;
use super::schedule::{Path, SchedError, Schedule, Segment, SegmentBuf};

const INF: u64 = u64::MAX;

/// Where the page-cache chain through a cached run started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    /// At the first page of the cached run after uncached run `i` (`i = 0`: page 0, cost 0).
    Start(u32),
    /// Where the short transfer starting at slot `j` ends.
    Landing(u32),
}

/// How the prefix ending at the last page of an uncached run was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EFrom {
    /// Not reachable.
    None,
    /// A long transfer from the start of slot `j`.
    Long(u32),
    /// A short transfer from the start of slot `j` ending exactly here.
    Exact(u32),
    /// A short transfer starting `n*` pages earlier, inside a cached run.
    Minus,
}

/// Per-uncached-run workspace entry of the exact scheduler.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    s: u64,
    e: u64,
    /// Where the short transfer starting at `s` ends (`i64::MAX`: no short transfers).
    land: i64,
    /// Where the short transfer ending at `e` starts (`i64::MIN`: none).
    read: i64,
    s_val: u64,
    m_val: u64,
    from_s: Src,
    from_m: Src,
    from_e: EFrom,
}

impl Slot {
    /// Initial value for workspace arrays.
    pub const EMPTY: Slot = Slot {
        s: 0,
        e: 0,
        land: i64::MAX,
        read: i64::MIN,
        s_val: INF,
        m_val: INF,
        from_s: Src::Start(0),
        from_m: Src::Start(0),
        from_e: EFrom::None,
    };
}

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

fn add(x: u64, y: u64) -> u64 {
    if x == INF {
        INF
    } else {
        x.saturating_add(y)
    }
}

fn sub(x: u64, y: u64) -> u64 {
    if x == INF {
        INF
    } else {
        x.saturating_sub(y)
    }
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
    if model.a() < model.pc() {
        let cost = single_method(model, runs, &mut buf)?;
        return Ok(buf.finish(cost));
    }
    let slots = scratch
        .get_mut(..scratch_len(runs))
        .ok_or(SchedError::ScratchTooSmall)?;
    let mut dp = Dp::new(model, runs, slots);
    let (cost, last) = dp.solve();
    if cost == INF {
        return Err(SchedError::Overflow);
    }
    dp.backtrack(last, &mut buf)?;
    buf.reverse();
    Ok(buf.finish(cost))
}

/// The optimum when `a < pc`: one P2P transfer, or all page cache for a fully cached request if
/// that is strictly cheaper.
fn single_method(
    model: &Model,
    runs: &Runs<'_>,
    buf: &mut SegmentBuf<'_>,
) -> Result<Picos, SchedError> {
    let n = runs.pages();
    let p2p = model.t_p2p(n.into());
    let pc = model.t_pc(n.into());
    if runs.all_cached() && pc <= p2p {
        buf.push(0, n, Path::PageCache)?;
        return Ok(pc);
    }
    buf.push(0, n, Path::P2p)?;
    Ok(p2p)
}

/// How the optimum for the whole request ends.
#[derive(Clone, Copy, Debug)]
enum Last {
    /// One P2P transfer of the whole request.
    Whole,
    /// A page-cache chain ending at page `N` (possibly empty).
    Chain(Src),
}

/// State of the dynamic program over the uncached runs of one request.
struct Dp<'s> {
    c: u64,
    a: u64,
    b: u64,
    pc: u64,
    /// Request length in pages.
    n: u64,
    /// Longest transfer costing exactly `c`.
    n0: u64,
    /// Length of short transfers; 0 if there are none.
    nstar: u64,
    /// `T_p2p(nstar)`.
    t_star: u64,
    t_whole: u64,
    slots: &'s mut [Slot],
    /// Next slot to enter the long-transfer prefix minimum.
    pl: usize,
    best_long: u64,
    best_long_at: u32,
    /// Next slot whose short transfer has not landed yet.
    pp: usize,
    /// Next slot whose `M` value has not been read yet.
    pm: usize,
}

impl<'s> Dp<'s> {
    fn new(model: &Model, runs: &Runs<'_>, slots: &'s mut [Slot]) -> Self {
        let (c, a, b, pc) = (model.c(), model.a(), model.b(), model.pc());
        let n0 = model.flat_pages();
        // Growing a transfer from n0 to n0 + 1 pages costs (n0 + 1) * a - b, then a per page.
        let step = n0.saturating_add(1).saturating_mul(a).saturating_sub(b);
        let nstar = if step >= pc { n0 } else { n0.saturating_add(1) };
        fill_slots(runs, slots, nstar);
        let n = u64::from(runs.pages());
        Self {
            c,
            a,
            b,
            pc,
            n,
            n0,
            nstar,
            t_star: model.t_p2p(nstar),
            t_whole: model.t_p2p(n),
            slots,
            pl: 0,
            best_long: INF,
            best_long_at: 0,
            pp: 0,
            pm: 1,
        }
    }

    fn slot(&self, i: usize) -> Slot {
        self.slots.get(i).copied().unwrap_or(Slot::EMPTY)
    }

    /// Where the short transfer starting at slot `j` ends; `i64::MAX` past the last slot or if
    /// there are no short transfers.
    #[inline]
    fn land(&self, j: usize) -> i64 {
        self.slots.get(j).map_or(i64::MAX, |sl| sl.land)
    }

    /// Where the short transfer ending at the end of slot `j` starts (may be negative, then
    /// there is none); `i64::MAX` past the last slot; `i64::MIN` if there are no short transfers.
    #[inline]
    fn read(&self, j: usize) -> i64 {
        self.slots.get(j).map_or(i64::MAX, |sl| sl.read)
    }

    /// Runs the program; returns the optimal cost and how it ends.
    fn solve(&mut self) -> (u64, Last) {
        let k = self.slots.len().saturating_sub(1);
        let first_end = self.slots.get(1).map_or(self.n, |sl| sl.s);
        let (mut val, mut src) = self.sweep(0, first_end, 0, Src::Start(0));
        for i in 1..=k {
            let Some(sl) = self.slots.get_mut(i) else {
                break;
            };
            sl.s_val = val;
            sl.from_s = src;
            let e = sl.e;
            let (e_val, from) = self.end_of(i, e);
            if let Some(sl) = self.slots.get_mut(i) {
                sl.from_e = from;
            }
            let hi = self.slots.get(i + 1).map_or(self.n, |sl| sl.s);
            (val, src) = self.sweep(e, hi, e_val, Src::Start(i as u32));
        }
        if self.t_whole < val {
            (self.t_whole, Last::Whole)
        } else {
            (val, Last::Chain(src))
        }
    }

    /// Optimal cost of the prefix ending at `e`, the last page of uncached run `i`.
    fn end_of(&mut self, i: usize, e: u64) -> (u64, EFrom) {
        let mut best = (INF, EFrom::None);
        // Long transfers: from every slot j with e - s_j > n0, via the running minimum.
        while let Some(sl) = self.slots.get(self.pl) {
            if sl.s.saturating_add(self.n0) >= e {
                break;
            }
            let key = add(sl.s_val, self.n.saturating_sub(sl.s).saturating_mul(self.a));
            if key < self.best_long {
                self.best_long = key;
                self.best_long_at = self.pl as u32;
            }
            self.pl += 1;
        }
        if self.best_long != INF {
            let long = self.best_long - self.n.saturating_sub(e).saturating_mul(self.a);
            best = (
                long.saturating_sub(self.b).saturating_add(self.c),
                EFrom::Long(self.best_long_at),
            );
        }
        // Short transfers from a slot start landing exactly here; earlier ones land inside
        // this uncached run and cannot be followed by the page cache.
        let e_pos = e as i64;
        loop {
            let y = self.land(self.pp);
            if y > e_pos {
                break;
            }
            if y == e_pos {
                let v = add(self.slot_s_val(self.pp), self.t_star);
                if v < best.0 {
                    best = (v, EFrom::Exact(self.pp as u32));
                }
            }
            self.pp += 1;
        }
        if self.nstar > 0 {
            let m_val = self.slots.get(i).map_or(INF, |sl| sl.m_val);
            let minus = add(m_val, self.t_star);
            if minus < best.0 {
                best = (minus, EFrom::Minus);
            }
        }
        best
    }

    #[inline]
    fn slot_s_val(&self, j: usize) -> u64 {
        self.slots.get(j).map_or(INF, |sl| sl.s_val)
    }

    /// Sweeps the cached range `[lo, hi]` whose first page is reached at cost `start`; records
    /// `M` values read inside it and returns the cost of reaching `hi` and where its page-cache
    /// chain starts.
    fn sweep(&mut self, lo: u64, hi: u64, start: u64, from: Src) -> (u64, Src) {
        let (n, pc) = (self.n, self.pc);
        // Chain value at page x is base - (n - x) * pc.
        let mut base = add(start, n.saturating_sub(lo).saturating_mul(pc));
        let mut src = from;
        let (lo_pos, hi_pos) = (lo as i64, hi as i64);
        loop {
            let y = self.land(self.pp);
            let x = self.read(self.pm);
            if y <= hi_pos && y <= x {
                // A short transfer from slot pp ends at y: a new start of the chain.
                let v = add(self.slot_s_val(self.pp), self.t_star);
                let key = add(v, n.saturating_sub(y as u64).saturating_mul(pc));
                let better = y > lo_pos && key < base;
                base = if better { key } else { base };
                src = if better {
                    Src::Landing(self.pp as u32)
                } else {
                    src
                };
                self.pp += 1;
            } else if x <= hi_pos {
                // The short transfer ending at slot pm starts at x: record the chain value.
                if x >= lo_pos {
                    if let Some(sl) = self.slots.get_mut(self.pm) {
                        sl.m_val = sub(base, n.saturating_sub(x as u64).saturating_mul(pc));
                        sl.from_m = src;
                    }
                }
                self.pm += 1;
            } else {
                break;
            }
        }
        (sub(base, n.saturating_sub(hi).saturating_mul(pc)), src)
    }

    /// Writes the optimal schedule back to front into `buf`.
    fn backtrack(&self, last: Last, buf: &mut SegmentBuf<'_>) -> Result<(), SchedError> {
        let src = match last {
            Last::Whole => return buf.push(0, self.n as u32, Path::P2p),
            Last::Chain(src) => src,
        };
        let mut at = At::Chain { end: self.n, src };
        // Every step moves strictly left or from a chain to the run before it; bound the loop
        // anyway so that a bug cannot hang the kernel.
        for _ in 0..self.slots.len().saturating_mul(4).saturating_add(4) {
            at = match at {
                At::Done => return Ok(()),
                At::Chain { end, src } => self.back_chain(end, src, buf)?,
                At::End(i) => self.back_end(i, buf)?,
                At::Start(j) => {
                    let sl = self.slot(j);
                    if j == 0 {
                        At::Done
                    } else {
                        At::Chain {
                            end: sl.s,
                            src: sl.from_s,
                        }
                    }
                }
            };
        }
        match at {
            At::Done => Ok(()),
            _ => Err(SchedError::Overflow),
        }
    }

    fn back_chain(&self, end: u64, src: Src, buf: &mut SegmentBuf<'_>) -> Result<At, SchedError> {
        match src {
            Src::Start(0) => {
                push(buf, 0, end, Path::PageCache)?;
                Ok(At::Done)
            }
            Src::Start(i) => {
                let e = self.slot(i as usize).e;
                push(buf, e, end, Path::PageCache)?;
                Ok(At::End(i as usize))
            }
            Src::Landing(j) => {
                let s = self.slot(j as usize).s;
                let y = s.saturating_add(self.nstar);
                push(buf, y, end, Path::PageCache)?;
                push(buf, s, y, Path::P2p)?;
                Ok(At::Start(j as usize))
            }
        }
    }

    fn back_end(&self, i: usize, buf: &mut SegmentBuf<'_>) -> Result<At, SchedError> {
        let sl = self.slot(i);
        match sl.from_e {
            EFrom::Long(j) | EFrom::Exact(j) => {
                push(buf, self.slot(j as usize).s, sl.e, Path::P2p)?;
                Ok(At::Start(j as usize))
            }
            EFrom::Minus => {
                let x = sl.e.saturating_sub(self.nstar);
                push(buf, x, sl.e, Path::P2p)?;
                Ok(At::Chain {
                    end: x,
                    src: sl.from_m,
                })
            }
            EFrom::None => Err(SchedError::Overflow),
        }
    }
}

/// Backtracking position.
#[derive(Clone, Copy, Debug)]
enum At {
    Done,
    Chain { end: u64, src: Src },
    End(usize),
    Start(usize),
}

/// Pushes the segment `[from, to)` if it is not empty.
fn push(buf: &mut SegmentBuf<'_>, from: u64, to: u64, path: Path) -> Result<(), SchedError> {
    if to <= from {
        return Ok(());
    }
    let start = u32::try_from(from).map_err(|_| SchedError::Overflow)?;
    let len = u32::try_from(to - from).map_err(|_| SchedError::Overflow)?;
    buf.push(start, len, path)
}

/// Slot 0 is a virtual transfer start at page 0; slot `i >= 1` is the `i`-th uncached run.
/// Positions fit an `i64`: requests have at most `u32::MAX` pages.
fn fill_slots(runs: &Runs<'_>, slots: &mut [Slot], nstar: u64) {
    let short = i64::try_from(nstar).ok().filter(|&n| n > 0);
    let slot = |s: u64, e: u64, s_val: u64| Slot {
        s,
        e,
        land: short.map_or(i64::MAX, |n| (s as i64).saturating_add(n)),
        read: short.map_or(i64::MIN, |n| (e as i64).saturating_sub(n)),
        s_val,
        ..Slot::EMPTY
    };
    let mut it = slots.iter_mut();
    if let Some(first) = it.next() {
        *first = slot(0, 0, 0);
    }
    for (run, sl) in runs.iter().filter(|r| !r.cached).zip(it) {
        let s = u64::from(run.start);
        *sl = slot(s, s + u64::from(run.len), INF);
    }
}
