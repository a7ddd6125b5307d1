// SPDX-License-Identifier: GPL-2.0

//! Calibration fit: the math of `spin calibrate` (this tool); the host crate
//! `tools/testing/spin/core` compiles this file too and tests it.
//!
//! [`fit_p2p`] fits Eq. 1, `T(s) = C` below `S` and `C + (s - S) * k` above it (`k = 1 /
//! BW_p2p`), to measured `(size, time)` samples by least squares over the breakpoint: for every
//! split of the sorted samples into "below" and "above", the best continuous two-piece fit with
//! its breakpoint inside that split is computed in closed form, and the split with the least
//! squared error wins. The physical-consistency constraint `C >= S * k` is enforced: when the
//! free optimum violates it, the optimum lies on the constraint, where the model becomes
//! `T(s) = k * max(s, S)`, fitted in closed form as well. [`fit_pc`] fits `T(s) = s / BW_pc`
//! through the origin. Both return the coefficient of determination R^2.
//!
//! Measurement noise on transfer times is roughly proportional to the time, so the squares are
//! of relative errors (weights `1 / t^2`): otherwise the few largest transfers, with the largest
//! absolute noise, decide where the breakpoint goes. R^2 is computed with the same weights.
//!
//! Floating point, userspace only; no allocation (the samples are sorted in place). Units are
//! bytes and nanoseconds.

use crate::sched::{ParamError, Params};

/// One measurement: a transfer of `bytes` took `ns` nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Transfer size in bytes.
    pub bytes: f64,
    /// Measured time in nanoseconds.
    pub ns: f64,
}

/// Fitted P2P parameters of Eq. 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct P2pFit {
    /// `C_p2p` in nanoseconds.
    pub c_ns: f64,
    /// `S_cutoff` in bytes.
    pub s_cutoff: f64,
    /// `BW_p2p` in bytes per second.
    pub bw: f64,
    /// Coefficient of determination.
    pub r2: f64,
    /// Whether the consistency constraint `C >= S / BW` was active.
    pub constrained: bool,
}

/// Fitted page-cache bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcFit {
    /// `BW_pc` in bytes per second.
    pub bw: f64,
    /// Coefficient of determination.
    pub r2: f64,
}

/// A candidate fit for one split: `C`, `S`, `k` (ns per byte) and its squared error.
#[derive(Clone, Copy, Debug)]
struct Cand {
    c: f64,
    s: f64,
    k: f64,
    sse: f64,
    constrained: bool,
}

/// Weight of a sample: `1 / t^2`, so that squared errors are relative.
fn w(p: &Sample) -> f64 {
    if p.ns > 0.0 {
        1.0 / (p.ns * p.ns)
    } else {
        0.0
    }
}

/// Weighted mean of `f` over `pts`; 0 without weight.
fn wmean(pts: &[Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    let sw: f64 = pts.iter().map(w).sum();
    if sw > 0.0 {
        pts.iter().map(|p| w(p) * f(p)).sum::<f64>() / sw
    } else {
        0.0
    }
}

fn model(c: f64, s: f64, k: f64, x: f64) -> f64 {
    if x < s {
        c
    } else {
        c + (x - s) * k
    }
}

fn sse(samples: &[Sample], c: f64, s: f64, k: f64) -> f64 {
    samples
        .iter()
        .map(|p| {
            let d = p.ns - model(c, s, k, p.bytes);
            w(p) * d * d
        })
        .sum()
}

/// Weighted least squares line `t = alpha + k * x` over `pts` (x = bytes); `None` if
/// degenerate.
fn line(pts: &[Sample]) -> Option<(f64, f64)> {
    if pts.len() < 2 {
        return None;
    }
    let mx = wmean(pts, |p| p.bytes);
    let my = wmean(pts, |p| p.ns);
    let sxx: f64 = pts
        .iter()
        .map(|p| w(p) * (p.bytes - mx) * (p.bytes - mx))
        .sum();
    let sxy: f64 = pts
        .iter()
        .map(|p| w(p) * (p.bytes - mx) * (p.ns - my))
        .sum();
    if sxx <= 0.0 {
        return None;
    }
    let k = sxy / sxx;
    Some((my - k * mx, k))
}

/// Best fit with the breakpoint fixed at `s`: regression of `t` on `max(0, x - s)`, then the
/// constraint `C >= k * s` if violated (model `k * max(x, s)`).
fn fixed_breakpoint(samples: &[Sample], s: f64) -> Option<Cand> {
    let xs = |p: &Sample| if p.bytes > s { p.bytes - s } else { 0.0 };
    let mx = wmean(samples, xs);
    let my = wmean(samples, |p| p.ns);
    let sxx: f64 = samples
        .iter()
        .map(|p| w(p) * (xs(p) - mx) * (xs(p) - mx))
        .sum();
    let sxy: f64 = samples
        .iter()
        .map(|p| w(p) * (xs(p) - mx) * (p.ns - my))
        .sum();
    if sxx <= 0.0 {
        return None;
    }
    let k = sxy / sxx;
    let c = my - k * mx;
    if k > 0.0 && c >= k * s {
        let e = sse(samples, c, s, k);
        return Some(Cand {
            c,
            s,
            k,
            sse: e,
            constrained: false,
        });
    }
    constrained(samples, s)
}

/// The constrained model `t = k * max(x, s)` for a fixed `s`.
fn constrained(samples: &[Sample], s: f64) -> Option<Cand> {
    let m = |p: &Sample| if p.bytes > s { p.bytes } else { s };
    let smm: f64 = samples.iter().map(|p| w(p) * m(p) * m(p)).sum();
    let stm: f64 = samples.iter().map(|p| w(p) * p.ns * m(p)).sum();
    if smm <= 0.0 || stm <= 0.0 {
        return None;
    }
    let k = stm / smm;
    let c = k * s;
    let e = sse(samples, c, s, k);
    Some(Cand {
        c,
        s,
        k,
        sse: e,
        constrained: true,
    })
}

/// Candidates for the split at `j` (samples `[..j]` below the breakpoint, `[j..]` above): the
/// free two-piece optimum and the constrained one if their breakpoints fall inside the split,
/// otherwise the fits with the breakpoint at the nearest end of the split.
fn split_candidates(samples: &[Sample], j: usize, best: &mut Option<Cand>) {
    let (below, above) = samples.split_at(j);
    let lo = below.last().map_or(0.0, |p| p.bytes);
    let Some(hi) = above.first().map(|p| p.bytes) else {
        return;
    };
    let mut consider = |c: Option<Cand>| {
        if let Some(c) = c {
            if c.k > 0.0 && c.c > 0.0 && best.is_none_or(|b| c.sse < b.sse) {
                *best = Some(c);
            }
        }
    };
    let inside = |s: f64| s >= lo && s <= hi;
    if let Some((alpha, k)) = line(above) {
        // Free optimum: C is the mean below (or alpha if nothing is below).
        let c = if below.is_empty() {
            alpha
        } else {
            wmean(below, |p| p.ns)
        };
        if k > 0.0 {
            let s = if below.is_empty() {
                0.0
            } else {
                (c - alpha) / k
            };
            if inside(s) && c >= k * s {
                consider(Some(Cand {
                    c,
                    s,
                    k,
                    sse: sse(samples, c, s, k),
                    constrained: false,
                }));
            }
        }
        // Constrained optimum: k * s is the mean below, k from the above part through 0.
        let sxx: f64 = above.iter().map(|p| w(p) * p.bytes * p.bytes).sum();
        let sxy: f64 = above.iter().map(|p| w(p) * p.bytes * p.ns).sum();
        if sxx > 0.0 && !below.is_empty() {
            let k = sxy / sxx;
            let s = c / k;
            if k > 0.0 && inside(s) {
                consider(constrained(samples, s));
            }
        }
    }
    consider(fixed_breakpoint(samples, lo));
    consider(fixed_breakpoint(samples, hi));
}

fn r2(samples: &[Sample], sse: f64) -> f64 {
    let my = wmean(samples, |p| p.ns);
    let sst: f64 = samples
        .iter()
        .map(|p| w(p) * (p.ns - my) * (p.ns - my))
        .sum();
    if sst > 0.0 {
        1.0 - sse / sst
    } else {
        0.0
    }
}

/// Fits Eq. 1 to P2P samples (sorted in place by size). `None` with fewer than three samples,
/// fewer than two distinct sizes, or no fit with positive `C` and bandwidth.
pub fn fit_p2p(samples: &mut [Sample]) -> Option<P2pFit> {
    if samples.len() < 3 {
        return None;
    }
    samples.sort_unstable_by(|a, b| a.bytes.total_cmp(&b.bytes));
    let mut best = None;
    for j in 0..samples.len() {
        // Only split between distinct sizes.
        let distinct = j == 0
            || samples
                .get(j - 1)
                .zip(samples.get(j))
                .is_some_and(|(a, b)| a.bytes < b.bytes);
        if distinct {
            split_candidates(samples, j, &mut best);
        }
    }
    let b = best?;
    Some(P2pFit {
        c_ns: b.c,
        s_cutoff: b.s,
        bw: 1e9 / b.k,
        r2: r2(samples, b.sse),
        constrained: b.constrained,
    })
}

/// Fits `T(s) = s / BW_pc` through the origin. `None` without a positive slope.
pub fn fit_pc(samples: &[Sample]) -> Option<PcFit> {
    let sxx: f64 = samples.iter().map(|p| w(p) * p.bytes * p.bytes).sum();
    let sxy: f64 = samples.iter().map(|p| w(p) * p.bytes * p.ns).sum();
    if sxx <= 0.0 || sxy <= 0.0 {
        return None;
    }
    let k = sxy / sxx;
    let e: f64 = samples
        .iter()
        .map(|p| w(p) * (p.ns - k * p.bytes) * (p.ns - k * p.bytes))
        .sum();
    Some(PcFit {
        bw: 1e9 / k,
        r2: r2(samples, e),
    })
}

/// `ceil` for non-negative values that fit in a `u64`, without `std`.
fn ceil_u64(x: f64) -> u64 {
    let t = x as u64;
    if (t as f64) < x {
        t + 1
    } else {
        t
    }
}

impl P2pFit {
    /// Kernel parameters from this fit and a page-cache fit. `C_p2p` and `BW_p2p` are rounded
    /// up and `S_cutoff` down, so a consistent fit stays consistent in integers.
    pub fn params(&self, page_size: u32, pc: &PcFit) -> Result<Params, ParamError> {
        let s = if self.s_cutoff > 0.0 {
            self.s_cutoff as u64
        } else {
            0
        };
        Params::new(
            page_size,
            s,
            ceil_u64(self.c_ns),
            ceil_u64(self.bw),
            ceil_u64(pc.bw),
        )
    }
}
