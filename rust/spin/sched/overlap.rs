// SPDX-License-Identifier: GPL-2.0

//! Overlap-aware objective: the makespan when P2P I/O and page-cache copies run concurrently.
//!
//! Model: at time 0 the router submits every P2P segment to the device and then copies the
//! page-cache segments with the CPU, one after another. The device serves the P2P segments one
//! after another, each taking `T_p2p` of Eq. 1; the CPU copies take `T_pc`. The two sides share
//! nothing, so the request completes at
//!
//! ```text
//! makespan = max(D, H),  D = sum of T_p2p over P2P segments,  H = sum of T_pc over page-cache
//! ```
//!
//! Unlike the additive cost, a P2P transfer over cached pages can pay off here: it moves work
//! from a busy CPU to an idle device.
//!
//! Scheduler: a Lagrangian walk along the lower convex hull of the achievable `(h, D)` points,
//! `h` being the number of page-cache pages (`H = h * pc`). For weights `(q, w)` the exact
//! additive scheduler of [`super::optimal`] minimises `q * D + w * h` (a [`Model::weighted`]
//! model). The walk starts from the schedule of least device time and from one P2P transfer of
//! the whole request and moves to the hull edge that crosses `D = H`, as in the classic
//! Eisner-Severance method; typically 2 to 6 calls of the exact scheduler.
//!
//! Every evaluation also yields a certified lower bound: the optimal schedule `s*` with makespan
//! `M*` has `q * D* + w * h* <= (q + w / pc) * M*`, so `M* >= L * pc / (q * pc + w)` for the
//! minimum `L` of the weighted cost. The result is exact when the least-device-time schedule is
//! not CPU-bound; otherwise its distance to the bound is reported, and the simulator shows it is
//! small. Non-convex parts of the frontier (fixed P2P costs) are what can keep it above zero.

use super::cost::{Model, Params, Picos};
use super::optimal::{optimal_model, Slot};
use super::runs::Runs;
use super::schedule::{split_cost, Path, SchedError, Schedule, Segment, SegmentBuf};

/// Upper bound on evaluations of the exact scheduler per request.
pub const MAX_STEPS: u32 = 24;

/// A certified lower bound on the optimal makespan: `weighted * pc / (q * pc + w)` picoseconds,
/// where `pc` is the model's page-cache time per page. Kept as a fraction so that the kernel
/// side needs no wide division; see [`LowerBound::picos`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LowerBound {
    /// Minimum of `q * D + w * h` over all schedules.
    pub weighted: u64,
    /// Weight of the device time.
    pub q: u64,
    /// Weight of one page-cache page.
    pub w: u64,
}

impl LowerBound {
    /// The bound in picoseconds, rounded up; `pc` is the model's page-cache time per page.
    /// Exact in 128-bit multiplication; the division is done by repeated halving so that no
    /// 128-bit division is needed.
    pub fn picos(&self, pc: Picos) -> Picos {
        let num = u128::from(self.weighted) * u128::from(pc);
        let den = u128::from(self.q) * u128::from(pc) + u128::from(self.w);
        div_u128(num, den)
    }
}

/// `ceil(num / den)` by binary long division (no `__udivti3`); 0 if `den` is 0, saturated.
fn div_u128(num: u128, den: u128) -> u64 {
    if den == 0 {
        return 0;
    }
    let (mut quot, mut rem) = (0u128, 0u128);
    for bit in (0..128).rev() {
        rem = (rem << 1) | ((num >> bit) & 1);
        quot <<= 1;
        if rem >= den {
            rem -= den;
            quot |= 1;
        }
    }
    if rem != 0 {
        quot = quot.saturating_add(1);
    }
    u64::try_from(quot).unwrap_or(u64::MAX)
}

/// Result of the overlap scheduler.
#[derive(Clone, Copy, Debug)]
pub struct Overlap<'a> {
    /// The schedule; its `cost` is the makespan.
    pub schedule: Schedule<'a>,
    /// Device time `D` of the schedule.
    pub device: Picos,
    /// CPU time `H` of the schedule.
    pub cpu: Picos,
    /// Certified lower bound on the optimal makespan.
    pub bound: LowerBound,
    /// Calls of the exact additive scheduler made.
    pub steps: u32,
}

/// One schedule on the `(h, D)` plane and how to regenerate it.
#[derive(Clone, Copy, Debug)]
struct Point {
    device: Picos,
    cpu: Picos,
    /// Page-cache pages.
    h: u64,
    /// `None`: one P2P transfer of the whole request; else the weights that produce it.
    weights: Option<(u64, u64)>,
}

impl Point {
    fn makespan(&self) -> Picos {
        self.device.max(self.cpu)
    }
}

/// Computes a schedule of (near-)minimal makespan for `runs` under `params`.
///
/// `out` needs [`Runs::max_segments`] entries and `scratch` [`super::optimal::scratch_len`].
pub fn overlap<'o>(
    params: &Params,
    runs: &Runs<'_>,
    out: &'o mut [Segment],
    scratch: &mut [Slot],
) -> Result<Overlap<'o>, SchedError> {
    runs.check_size(params.page_size())?;
    let model = params.model();
    let n = u64::from(runs.pages());
    let mut steps = 1;
    // Least device time, ties broken by fewer page-cache pages: q = n + 1 > any h.
    let lex = (n.saturating_add(1), 1);
    let (mut lo, weighted) = eval(&model, runs, lex, out, scratch)?;
    let mut bound = LowerBound {
        weighted,
        q: lex.0,
        w: lex.1,
    };
    if lo.cpu <= lo.device {
        // No schedule has less device time, so this one is optimal.
        bound = LowerBound {
            weighted: lo.device,
            q: 1,
            w: 0,
        };
        return finish(&model, runs, lo, bound, steps, out, scratch);
    }
    let mut hi = Point {
        device: model.t_p2p(n),
        cpu: 0,
        h: 0,
        weights: None,
    };
    while steps < MAX_STEPS {
        // Slope of the segment lo-hi: weights under which both have the same cost.
        let q = lo.h.saturating_sub(hi.h);
        let w = hi.device.saturating_sub(lo.device);
        let line = q
            .checked_mul(lo.device)
            .and_then(|x| x.checked_add(w.checked_mul(lo.h)?));
        let (Some(line), true) = (line, q > 0 && w > 0) else {
            break;
        };
        let Ok((p, weighted)) = eval(&model, runs, (q, w), out, scratch) else {
            break;
        };
        steps += 1;
        bound = LowerBound { weighted, q, w };
        if weighted >= line {
            // Nothing lies below the segment: it is an edge of the hull crossing D = H.
            break;
        }
        if p.cpu > p.device {
            lo = p;
        } else {
            hi = p;
        }
    }
    let best = if hi.makespan() < lo.makespan() { hi } else { lo };
    finish(&model, runs, best, bound, steps, out, scratch)
}

/// Runs the exact scheduler with weights `(q, w)`; returns the point and its weighted cost.
fn eval(
    model: &Model,
    runs: &Runs<'_>,
    (q, w): (u64, u64),
    out: &mut [Segment],
    scratch: &mut [Slot],
) -> Result<(Point, u64), SchedError> {
    let weighted = model.weighted(q, w).ok_or(SchedError::Overflow)?;
    let s = optimal_model(&weighted, runs, out, scratch)?;
    let (device, cpu) = split_cost(model, s.segments);
    let h = s
        .segments
        .iter()
        .filter(|x| x.path == Path::PageCache)
        .map(|x| u64::from(x.len))
        .sum();
    let point = Point {
        device,
        cpu,
        h,
        weights: Some((q, w)),
    };
    Ok((point, s.cost))
}

/// Writes the chosen point's schedule into `out`.
fn finish<'o>(
    model: &Model,
    runs: &Runs<'_>,
    p: Point,
    bound: LowerBound,
    steps: u32,
    out: &'o mut [Segment],
    scratch: &mut [Slot],
) -> Result<Overlap<'o>, SchedError> {
    let segments = match p.weights {
        Some((q, w)) => {
            let weighted = model.weighted(q, w).ok_or(SchedError::Overflow)?;
            optimal_model(&weighted, runs, out, scratch)?.segments
        }
        None => {
            let mut buf = SegmentBuf::new(out);
            buf.push(0, runs.pages(), Path::P2p)?;
            buf.finish(0).segments
        }
    };
    let (device, cpu) = split_cost(model, segments);
    Ok(Overlap {
        schedule: Schedule {
            segments,
            cost: device.max(cpu),
        },
        device,
        cpu,
        bound,
        steps,
    })
}
