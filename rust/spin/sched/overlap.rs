// SPDX-License-Identifier: GPL-2.0

//! Overlap-aware objective: the makespan when P2P I/O and page-cache copies run concurrently.
//!
//! Model: at time 0 the router submits every P2P segment to the device, then the CPU copies the
//! page-cache segments one after another. The device serves the P2P segments, each taking
//! `T_p2p` of Eq. 1, and the batch once more its term `f` (zero unless the device's queue
//! overlaps legs, see [`super::cost`]); the copies take `T_pc`. Nothing else is shared, so the
//! request completes at
//!
//! ```text
//! makespan = max(D, H),  D = f + sum of T_p2p over P2P segments,  H = sum of T_pc over page cache
//! ```
//!
//! Unlike the additive cost, P2P over cached pages can pay off here: it moves work from a busy
//! CPU to an idle device.
//!
//! Certified lower bound. A schedule with `m >= 1` P2P segments and `h` page-cache pages has
//! `D >= f + max(m * c, m * (c - b) + a * (N - h))` (each segment costs at least `c` and at
//! least `c - b + len * a`; `f` is the batch term of a device whose queue overlaps legs, see
//! [`super::cost`]) and `h <= hmax(m)`, the cached pages left when the `k - m` shortest cached
//! runs between uncached runs are bridged (`k` uncached runs; every P2P segment covers a
//! consecutive group of them). Hence the optimum is at least
//! `LB = min over m of min over h <= hmax(m) of max(f + m*c, f + m*(c-b) + a*(N-h), h*pc)`,
//! and also at least the least device time of any schedule, `D_min`.
//!
//! Scheduler. A fully cached request is solved exactly (all page cache, or one P2P transfer of
//! the best length found by bisection: more segments never help). Otherwise the candidates are
//! (1) the schedule of least device time (exact when it is not CPU-bound), (2) the additive
//! optimum, and (3) the schedule that realises the bound: the `m` minimising it, the `k - m`
//! shortest inner cached runs bridged, the P2P groups grown first where it is free (up to
//! `floor(b/a)` pages) and then page by page until `D` and `H` cross. The best makespan wins and
//! the result carries `max(LB, D_min)`; the distance between the two is what a non-exact answer
//! can cost at most, and the simulator reports it.

use super::cost::{Model, Params, Picos};
use super::optimal::{optimal_model, Slot};
use super::runs::Runs;
use super::schedule::{split_cost, Path, SchedError, Schedule, Segment, SegmentBuf};

/// Result of the overlap scheduler.
#[derive(Clone, Copy, Debug)]
pub struct Overlap<'a> {
    /// The schedule; its `cost` is the makespan.
    pub schedule: Schedule<'a>,
    /// Device time `D` of the schedule.
    pub device: Picos,
    /// CPU time `H` of the schedule.
    pub cpu: Picos,
    /// Certified lower bound on the optimal makespan; equal to `schedule.cost` when the
    /// scheduler proved its answer optimal.
    pub bound: Picos,
}

/// Workspace entries (`u32`) [`overlap`] needs for `runs` besides the exact scheduler's: one per
/// uncached run.
pub fn gap_scratch_len(runs: &Runs<'_>) -> usize {
    super::optimal::scratch_len(runs).saturating_sub(1)
}

/// A schedule the overlap scheduler can build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cand {
    /// The exact additive scheduler under a weighted model `(q, w)`.
    Weighted(u64, u64),
    /// Everything through the page cache (fully cached requests only).
    AllPc,
    /// One P2P transfer of the first `len` pages, the rest from the page cache (fully cached).
    Prefix(u64),
    /// Groups for a [`Threshold`], grown by `free` pages where growth is free and by `paid`
    /// pages where it costs `a` each.
    Split { th: Threshold, free: u64, paid: u64 },
}

/// Computes a schedule of (near-)minimal makespan for `runs` under `params`.
///
/// `out` needs [`Runs::max_segments`] entries, `scratch` [`super::optimal::scratch_len`] and
/// `gaps` [`gap_scratch_len`] entries. The time is that of three runs of the exact scheduler
/// plus sorting the cached runs between uncached ones.
pub fn overlap<'o>(
    params: &Params,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
    scratch: &mut [Slot],
    gaps: &mut [u32],
) -> Result<Overlap<'o>, SchedError> {
    runs.check_size(params.page_size())?;
    overlap_model(&params.model(), runs, out, scratch, gaps)
}

/// [`overlap`] for an arbitrary [`Model`]; the caller checks the request size.
pub fn overlap_model<'o>(
    m: &Model,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
    scratch: &mut [Slot],
    gaps: &mut [u32],
) -> Result<Overlap<'o>, SchedError> {
    let m = *m;
    let mut ctx = Ctx {
        m,
        runs,
        n: u64::from(runs.pages()),
    };
    if runs.all_cached() {
        let (best, cost) = ctx.fully_cached(out, scratch)?;
        return ctx.finish(best, cost, out, scratch);
    }
    let k = gap_scratch_len(runs);
    let gaps = gaps.get_mut(..k).ok_or(SchedError::ScratchTooSmall)?;
    // (1) Least device time, ties broken by fewer page-cache pages (q = N + 1 > any h).
    let lex = Cand::Weighted(ctx.n.saturating_add(1), 1);
    let (d_min, h_min) = ctx.build(lex, out, scratch)?;
    if h_min <= d_min {
        // No schedule has less device time: optimal.
        return ctx.finish(lex, d_min, out, scratch);
    }
    let mut best = (lex, h_min);
    // (2) The additive optimum.
    let add = Cand::Weighted(1, m.pc());
    best = ctx.better(best, add, out, scratch)?;
    // (3) The schedule that realises the bound.
    let (bridged, lb) = ctx.bound(gaps);
    let th = Threshold::new(gaps, bridged);
    for (free, paid) in ctx.growths(th) {
        best = ctx.better(best, Cand::Split { th, free, paid }, out, scratch)?;
    }
    let bound = lb.max(d_min).min(best.1);
    ctx.finish(best.0, bound, out, scratch)
}

/// Whether a fully cached request of `pages` pages is worth scheduling, rather than copying
/// whole: only where P2P alone reads it faster than the copy (`f + T_p2p(pages) < T_pc(pages)`).
///
/// The makespan objective would read part of almost any fully cached request from the device,
/// in parallel with the copy, but the model does not price the device bandwidth that takes
/// from other requests, nor the writeback a P2P read of dirty pages waits for. Data the host
/// holds is therefore copied unless the device is the faster path for all of it; then
/// [`overlap`] splits it between the two (one P2P transfer of a prefix, the rest copied).
pub fn cached_wants_p2p(m: &Model, pages: u64) -> bool {
    pages != 0 && m.device(m.t_p2p(pages), true) < m.t_pc(pages)
}

/// Which inner cached runs are bridged: those shorter than `t`, and the first `equal` ones of
/// length `t`, in request order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Threshold {
    t: u32,
    equal: usize,
}

impl Threshold {
    /// From the inner gap lengths sorted ascending, to bridge the `bridged` shortest.
    fn new(sorted: &[u32], bridged: usize) -> Self {
        let Some(&t) = bridged.checked_sub(1).and_then(|i| sorted.get(i)) else {
            return Self { t: 0, equal: 0 };
        };
        let less = sorted.partition_point(|&g| g < t);
        Self {
            t,
            equal: bridged.saturating_sub(less),
        }
    }
}

/// One P2P group: uncached runs `[start, end)` with the bridged cached runs between them, and
/// the open cached run after it (`right` pages; the trailing run for the last group).
#[derive(Clone, Copy, Debug)]
struct Group {
    start: u64,
    end: u64,
    right: u64,
}

/// Walks the groups of a request for a [`Threshold`].
struct Groups<'r> {
    it: super::runs::RunIter<'r>,
    th: Threshold,
    pending: Option<super::runs::Run>,
}

impl Iterator for Groups<'_> {
    type Item = Group;

    fn next(&mut self) -> Option<Group> {
        // The next run is uncached (the leading cached run was consumed by `groups`).
        let first = self.pending.take().or_else(|| self.it.next())?;
        let mut g = Group {
            start: first.start.into(),
            end: u64::from(first.start) + u64::from(first.len),
            right: 0,
        };
        while let Some(gap) = self.it.next() {
            let next = self.it.next();
            let bridge = next.is_some()
                && (gap.len < self.th.t || (gap.len == self.th.t && self.th.equal > 0));
            if !bridge {
                g.right = gap.len.into();
                self.pending = next;
                return Some(g);
            }
            if gap.len == self.th.t {
                self.th.equal -= 1;
            }
            if let Some(u) = next {
                g.end = u64::from(u.start) + u64::from(u.len);
            }
        }
        Some(g)
    }
}

struct Ctx<'a, 'r> {
    m: Model,
    runs: &'a Runs<'r>,
    n: u64,
}

impl<'a, 'r> Ctx<'a, 'r> {
    /// Leading cached pages and the groups after them.
    fn groups(&self, th: Threshold) -> (u64, Groups<'r>) {
        let mut it = self.runs.iter();
        let lead = if self.runs.first_cached() {
            it.next().map_or(0, |r| u64::from(r.len))
        } else {
            0
        };
        (
            lead,
            Groups {
                it,
                th,
                pending: None,
            },
        )
    }

    /// Exact answer for a fully cached request: all page cache or one P2P prefix, bisecting on
    /// its length for the crossing of `D` (non-decreasing) and `H` (decreasing).
    fn fully_cached(
        &mut self,
        out: &mut [Segment],
        scratch: &mut [Slot],
    ) -> Result<(Cand, Picos), SchedError> {
        let mut best = (Cand::AllPc, self.m.t_pc(self.n));
        let (mut lo, mut hi) = (1u64, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.m.device(self.m.t_p2p(mid), true) >= self.m.t_pc(self.n - mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        for len in [lo.saturating_sub(1), lo] {
            if len >= 1 {
                best = self.better(best, Cand::Prefix(len), out, scratch)?;
            }
        }
        Ok((best.0, best.1))
    }

    /// Chooses the number of bridged inner cached runs minimising the lower bound; sorts `gaps`.
    fn bound(&self, gaps: &mut [u32]) -> (usize, Picos) {
        let mut len = 0;
        let mut cached = 0u64;
        let mut inner = self.runs.iter().skip(1).peekable();
        while let Some(r) = inner.next() {
            if r.cached && inner.peek().is_some() {
                if let Some(g) = gaps.get_mut(len) {
                    *g = r.len;
                    len += 1;
                }
            }
        }
        for r in self.runs.iter().filter(|r| r.cached) {
            cached += u64::from(r.len);
        }
        let sorted = gaps.get_mut(..len).unwrap_or(&mut []);
        sorted.sort_unstable();
        let k = len as u64 + 1;
        let mut best = (0usize, Picos::MAX);
        let mut hmax = cached;
        // Bridging the j shortest inner runs leaves m = k - j groups.
        for j in 0..=len {
            if let Some(&g) = j.checked_sub(1).and_then(|i| sorted.get(i)) {
                hmax -= u64::from(g);
            }
            let lb = self.bound_for(k - j as u64, hmax);
            if lb < best.1 {
                best = (j, lb);
            }
        }
        best
    }

    /// `min over h <= hmax of max(f + m*c, f + m*(c-b) + a*(N-h), h*pc)`, `f` the batch term.
    fn bound_for(&self, m: u64, hmax: u64) -> Picos {
        let (c, a, b, pc, f) = (
            self.m.c(),
            self.m.a(),
            self.m.b(),
            self.m.pc(),
            self.m.batch(),
        );
        let fixed = m.saturating_mul(c).saturating_add(f);
        let base = m
            .saturating_mul(c.saturating_sub(b))
            .saturating_add(a.saturating_mul(self.n))
            .saturating_add(f);
        let at = |h: u64| {
            let h = h.min(hmax);
            let dev = base.saturating_sub(a.saturating_mul(h)).max(fixed);
            dev.max(h.saturating_mul(pc))
        };
        // The maximum falls then rises in h; its minimum is next to where h * pc meets
        // `base - a * h` or `fixed`, whichever is later.
        let cross = base / a.saturating_add(pc);
        let flat = fixed / pc;
        [
            cross,
            cross.saturating_add(1),
            flat,
            flat.saturating_add(1),
            hmax,
        ]
        .into_iter()
        .map(at)
        .min()
        .unwrap_or(Picos::MAX)
    }

    /// Growths `(free, paid)` to try: the crossing of `D` and `H` and its neighbour.
    fn growths(&self, th: Threshold) -> [(u64, u64); 2] {
        let (lead, groups) = self.groups(th);
        let n0 = self.m.flat_pages();
        let (mut d0, mut free, mut hmax, mut left) = (self.m.batch(), 0u64, lead, lead);
        for g in groups {
            let core = g.end - g.start;
            d0 = d0.saturating_add(self.m.t_p2p(core));
            let mut deficit = n0.saturating_sub(core);
            let from_left = deficit.min(left);
            deficit -= from_left;
            let from_right = deficit.min(g.right);
            free += from_left + from_right;
            hmax += g.right;
            left = g.right - from_right;
        }
        let (a, pc) = (self.m.a(), self.m.pc());
        if d0 >= pc.saturating_mul(hmax - free) {
            return [(free, 0), (free, 0)];
        }
        let num = pc
            .saturating_mul(hmax)
            .saturating_sub(d0)
            .saturating_add(a.saturating_mul(free));
        let e = (num / a.saturating_add(pc)).clamp(free, hmax);
        [
            (free, e - free),
            (free, e.saturating_add(1).min(hmax) - free),
        ]
    }

    /// Builds `cand` into `out`; returns its device and CPU time `(D, H)`.
    fn build(
        &self,
        cand: Cand,
        out: &mut [Segment],
        scratch: &mut [Slot],
    ) -> Result<(Picos, Picos), SchedError> {
        let segs = self.write(cand, out, scratch)?;
        Ok(split_cost(&self.m, segs))
    }

    /// Keeps the better of `best` and `cand` by makespan.
    fn better(
        &self,
        best: (Cand, Picos),
        cand: Cand,
        out: &mut [Segment],
        scratch: &mut [Slot],
    ) -> Result<(Cand, Picos), SchedError> {
        let (d, h) = self.build(cand, out, scratch)?;
        let span = d.max(h);
        Ok(if span < best.1 { (cand, span) } else { best })
    }

    /// Writes the schedule of `cand` into `out`.
    fn write<'o>(
        &self,
        cand: Cand,
        out: &'o mut [Segment],
        scratch: &mut [Slot],
    ) -> Result<&'o [Segment], SchedError> {
        if let Cand::Weighted(q, w) = cand {
            let model = self.m.weighted(q, w).ok_or(SchedError::Overflow)?;
            return Ok(optimal_model(&model, self.runs, out, scratch)?.segments);
        }
        let mut buf = SegmentBuf::new(out);
        match cand {
            Cand::AllPc => buf.push_range(0, self.n, Path::PageCache)?,
            Cand::Prefix(len) => {
                buf.push_range(0, len, Path::P2p)?;
                buf.push_range(len, self.n, Path::PageCache)?;
            }
            Cand::Split { th, free, paid } => self.write_split(th, free, paid, &mut buf)?,
            Cand::Weighted(..) => {}
        }
        Ok(buf.finish(0).segments)
    }

    /// Emits the groups for `bridged` grown by `grow` pages: free growth (up to `floor(b/a)`
    /// pages per group, left cached run first) before paid growth (any remaining cached page).
    fn write_split(
        &self,
        th: Threshold,
        mut free_budget: u64,
        mut paid_budget: u64,
        buf: &mut SegmentBuf<'_>,
    ) -> Result<(), SchedError> {
        let (lead, groups) = self.groups(th);
        let n0 = self.m.flat_pages();
        // Cached run to the left of the current group: [gap_start, gap_start + left).
        let (mut gap_start, mut left) = (0u64, lead);
        // The previous group's P2P transfer [s, e), written once its right side is final.
        let mut pending: Option<(u64, u64)> = None;
        for g in groups {
            let mut deficit = n0.saturating_sub(g.end - g.start).min(free_budget);
            let from_left = deficit.min(left);
            deficit -= from_left;
            let from_right = deficit.min(g.right);
            free_budget -= from_left + from_right;
            left -= from_left;
            let paid_left = paid_budget.min(left);
            paid_budget -= paid_left;
            left -= paid_left;
            if let Some((s, e)) = pending.take() {
                buf.push_range(s, e, Path::P2p)?;
            }
            buf.push_range(gap_start, gap_start + left, Path::PageCache)?;
            let x = from_left + paid_left;
            pending = Some((g.start - x, g.end + from_right));
            gap_start = g.end + from_right;
            left = g.right - from_right;
        }
        // Paid growth may also take the trailing cached run.
        if let Some((s, e)) = pending {
            let extra = paid_budget.min(left);
            buf.push_range(s, e + extra, Path::P2p)?;
            buf.push_range(e + extra, self.n, Path::PageCache)?;
        }
        Ok(())
    }

    /// Rebuilds the chosen candidate into `out` and returns the result.
    fn finish<'o>(
        &self,
        cand: Cand,
        bound: Picos,
        out: &'o mut [Segment],
        scratch: &mut [Slot],
    ) -> Result<Overlap<'o>, SchedError> {
        let segments = self.write(cand, out, scratch)?;
        let (device, cpu) = split_cost(&self.m, segments);
        let cost = device.max(cpu);
        Ok(Overlap {
            schedule: Schedule { segments, cost },
            device,
            cpu,
            bound: bound.min(cost),
        })
    }
}
