// SPDX-License-Identifier: GPL-2.0

//! Device parameters and the transfer-time model of Eq. 1 of the SPIN paper.
//!
//! [`Params`] holds what a user or the calibration tool states about a device, in kernel units:
//! bytes, nanoseconds and bytes per second. [`Params::new`] validates the values, including the
//! physical-consistency rule `C_p2p >= S_cutoff / BW_p2p`, and rejects parameters that break it
//! (no silent clamping: a wrong knob is an explicit `-EINVAL` in the kernel).
//!
//! [`Model`] is the integer form every scheduler works with. Times are picoseconds, sizes are
//! pages, and the P2P time is an exact hinge
//!
//! ```text
//! T_p2p(n) = C + max(0, n * a - b)      (n >= 1 pages; T_p2p(0) = 0: no transfer)
//! T_pc(n)  = n * pc
//! ```
//!
//! with `a` the P2P time per page, `b` the time of `S_cutoff` bytes at `BW_p2p` and `pc` the
//! page-cache time per page, each rounded to the nearest picosecond once, when the model is
//! derived. Because the per-page rates are integers the cost is exactly linear above the cutoff,
//! which the exact scheduler relies on; rounding a rate changes it by at most 0.5 ps per page,
//! a relative error below 1.3e-5 for 4 KiB pages at up to 100 GB/s. `b` is kept in
//! `[(cut - 1) * a, cut * a]` with `cut = ceil(S_cutoff / page_size)`, so the hinge lies where
//! Eq. 1 puts it.
//!
//! Queue depth. The legs of one request are submitted together, and a device that serves
//! several commands at once hides part of each leg's fixed cost behind the others. [`Params`]
//! states that as the overlap `O` (`p2p_overlap`, in percent: 100 is none): `O` small legs in
//! flight together take the time of one. The model then charges every leg `c = C_p2p / O` (the
//! hinge offset lowered to `b = min(S_cutoff / BW_p2p, c)`, so that `b <= c` still holds) and
//! the whole batch once more `f = C_p2p - c` (the batch term), the part of the first leg's
//! latency that nothing hides:
//!
//! ```text
//! D = f + sum over P2P legs of T_p2p(len)      (D = 0 without P2P legs)
//! ```
//!
//! `m` small legs take `C_p2p + (m - 1) * C_p2p / O`; with `O = 100%` the model is Eq. 1.
//! Every request with an uncached page has a P2P leg, so `f` is a constant there and the
//! schedulers' minimisers do not move; only for fully cached requests, where all page cache is
//! a choice, does it enter the comparison.

/// Picoseconds, the time unit of every cost computed by the schedulers.
pub type Picos = u64;

/// Smallest accepted page size in bytes.
pub const MIN_PAGE_SIZE: u32 = 512;
/// Largest accepted page size in bytes.
pub const MAX_PAGE_SIZE: u32 = 64 * 1024;
/// Largest accepted `S_cutoff` in bytes (16 MiB).
pub const MAX_S_CUTOFF: u64 = 16 << 20;
/// Largest accepted `C_p2p` in nanoseconds (one second).
pub const MAX_C_P2P_NS: u64 = 1_000_000_000;
/// Smallest accepted bandwidth in bytes per second (1 MB/s).
pub const MIN_BW: u64 = 1_000_000;
/// The overlap of a device that runs its legs one after another, in percent.
pub const NO_OVERLAP: u32 = 100;
/// Largest accepted overlap in percent: 64 small legs in the time of one.
pub const MAX_OVERLAP: u32 = 6400;
/// Largest accepted bandwidth in bytes per second (1 TB/s).
pub const MAX_BW: u64 = 1_000_000_000_000;
/// Largest request the schedulers accept, in bytes (4 GiB). With the limits above every cost of
/// such a request fits a `u64` of picoseconds with room to spare.
pub const MAX_REQUEST_BYTES: u64 = 1 << 32;

const PS_PER_NS: u64 = 1_000;
const PS_PER_S: u64 = 1_000_000_000_000;

/// Why [`Params::new`] refused a parameter set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// The page size is not a power of two in `[MIN_PAGE_SIZE, MAX_PAGE_SIZE]`.
    PageSize,
    /// `S_cutoff` is larger than [`MAX_S_CUTOFF`].
    Cutoff,
    /// `C_p2p` is zero or larger than [`MAX_C_P2P_NS`].
    Overhead,
    /// A bandwidth lies outside `[MIN_BW, MAX_BW]`.
    Bandwidth,
    /// `C_p2p < S_cutoff / BW_p2p`: below the cutoff the device would beat its own peak
    /// bandwidth, splitting a transfer would look free and no schedule would mean anything.
    Inconsistent,
    /// The overlap lies outside `[NO_OVERLAP, MAX_OVERLAP]`.
    Overlap,
}

/// Validated parameters of one block device, in kernel units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    page_size: u32,
    s_cutoff: u64,
    c_p2p_ns: u64,
    bw_p2p: u64,
    bw_pc: u64,
    overlap: u32,
    /// The model of legs one after another, each paying all of `C_p2p`.
    serial: Model,
    /// The model with [`Params::overlap`]: `serial` itself without overlap.
    model: Model,
    /// [`Params::copy_first_max`], derived once: a router reads it per request.
    copy_first: u64,
}

/// Divides, rounding to the nearest integer; `d` must not be zero.
fn div_round(n: u64, d: u64) -> Option<u64> {
    n.checked_add(d / 2)?.checked_div(d)
}

/// Time in picoseconds of `bytes` at `bw` bytes per second, rounded to the nearest picosecond.
fn bytes_ps(bytes: u64, bw: u64) -> Option<u64> {
    div_round(bytes.checked_mul(PS_PER_S)?, bw)
}

impl Params {
    /// Validates a parameter set and derives its [`Model`].
    ///
    /// `page_size` and `s_cutoff` are bytes, `c_p2p_ns` nanoseconds, `bw_p2p` and `bw_pc` bytes
    /// per second. Parameters with `C_p2p < S_cutoff / BW_p2p` (compared exactly, in integers)
    /// are rejected with [`ParamError::Inconsistent`].
    pub fn new(
        page_size: u32,
        s_cutoff: u64,
        c_p2p_ns: u64,
        bw_p2p: u64,
        bw_pc: u64,
    ) -> Result<Self, ParamError> {
        if !page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(ParamError::PageSize);
        }
        if s_cutoff > MAX_S_CUTOFF {
            return Err(ParamError::Cutoff);
        }
        if c_p2p_ns == 0 || c_p2p_ns > MAX_C_P2P_NS {
            return Err(ParamError::Overhead);
        }
        if !(MIN_BW..=MAX_BW).contains(&bw_p2p) || !(MIN_BW..=MAX_BW).contains(&bw_pc) {
            return Err(ParamError::Bandwidth);
        }
        let model = derive_model(u64::from(page_size), s_cutoff, c_p2p_ns, bw_p2p, bw_pc)?;
        let pages = model.c() / COPY_FIRST_SHARE.saturating_mul(model.pc()).max(1);
        Ok(Self {
            page_size,
            s_cutoff,
            c_p2p_ns,
            bw_p2p,
            bw_pc,
            overlap: NO_OVERLAP,
            serial: model,
            model,
            copy_first: s_cutoff.max(pages.saturating_mul(u64::from(page_size))),
        })
    }

    /// The same device with legs in flight together overlapping by `overlap` percent
    /// ([`NO_OVERLAP`] is none; see the module documentation).
    pub fn with_overlap(self, overlap: u32) -> Result<Self, ParamError> {
        if !(NO_OVERLAP..=MAX_OVERLAP).contains(&overlap) {
            return Err(ParamError::Overlap);
        }
        Ok(Self {
            overlap,
            model: self.serial.queued(overlap)?,
            ..self
        })
    }

    /// The same device with its legs one after another: what a router that waits for each leg
    /// before it submits the next gets.
    pub fn serial(self) -> Self {
        Self {
            overlap: NO_OVERLAP,
            model: self.serial,
            ..self
        }
    }

    /// The paper's parameters for the Intel P3700 (§4.3.1 and Table 3): 4 KiB pages,
    /// `S_cutoff` = 512 KiB, `C_p2p` = 584 µs, `BW_p2p` = 2.65 GB/s and `BW_pc` such that 249
    /// pages take 584 µs (249 * 4096 B / 584 µs = 1,746,410,959 B/s).
    pub fn paper() -> Result<Self, ParamError> {
        Self::new(4096, 512 * 1024, 584_000, 2_650_000_000, 1_746_410_959)
    }

    /// A modern PCIe Gen4 NVMe device: 4 KiB pages, `S_cutoff` = 128 KiB, `C_p2p` = 80 µs,
    /// `BW_p2p` = 6.5 GB/s, `BW_pc` = 10 GB/s. Consistent: 128 KiB / 6.5 GB/s = 20.2 µs <= 80 µs.
    pub fn gen4() -> Result<Self, ParamError> {
        Self::new(4096, 128 * 1024, 80_000, 6_500_000_000, 10_000_000_000)
    }

    /// Page size in bytes.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// `S_cutoff` in bytes.
    pub fn s_cutoff(&self) -> u64 {
        self.s_cutoff
    }

    /// `C_p2p` in nanoseconds.
    pub fn c_p2p_ns(&self) -> u64 {
        self.c_p2p_ns
    }

    /// `BW_p2p` in bytes per second.
    pub fn bw_p2p(&self) -> u64 {
        self.bw_p2p
    }

    /// `BW_pc` in bytes per second.
    pub fn bw_pc(&self) -> u64 {
        self.bw_pc
    }

    /// Overlap of legs in flight together, in percent ([`NO_OVERLAP`]: none).
    pub fn overlap(&self) -> u32 {
        self.overlap
    }

    /// The integer model derived from these parameters.
    pub fn model(&self) -> Model {
        self.model
    }

    /// Largest request in pages that the schedulers accept with this page size.
    pub fn max_request_pages(&self) -> u64 {
        MAX_REQUEST_BYTES / u64::from(self.page_size)
    }

    /// The largest request, in bytes, that may be served by first copying what is cached from
    /// its start, with no residency lookup and no plan, and planning only the rest: at least
    /// `S_cutoff` (SPIN §4.3.1: a cached run that short never goes by P2P), and as many whole
    /// pages as are copied in `C_p2p / COPY_FIRST_SHARE`, which a fit to a device whose small
    /// reads are not flat (`S_cutoff` 0) leaves as the only bound.
    ///
    /// A wholly cached request is then one copy, as a plan makes it too. A partly cached one
    /// loses at most the overlap of that copy with its P2P legs, `C_p2p / COPY_FIRST_SHARE`
    /// at most: that share of what any schedule with a P2P leg takes at least (one without
    /// copies every page, and copying the start first costs it nothing).
    pub fn copy_first_max(&self) -> u64 {
        self.copy_first
    }
}

/// See [`Params::copy_first_max`]: copying a request's cached start before planning the rest
/// may cost a partly cached request at most `C_p2p` divided by this.
pub const COPY_FIRST_SHARE: u64 = 8;

/// Derives the hinge model; fails with [`ParamError::Inconsistent`] if `C_p2p < S_cutoff/BW_p2p`.
fn derive_model(
    page: u64,
    s_cutoff: u64,
    c_ns: u64,
    bw_p2p: u64,
    bw_pc: u64,
) -> Result<Model, ParamError> {
    let overflow = ParamError::Bandwidth;
    let c = c_ns.checked_mul(PS_PER_NS).ok_or(overflow)?;
    // Exact test of C >= S / BW: C is an integer, so C >= ceil(S * 1e12 / BW) is equivalent.
    let s_ps_num = s_cutoff.checked_mul(PS_PER_S).ok_or(overflow)?;
    let s_ps_ceil = s_ps_num.div_ceil(bw_p2p);
    if c < s_ps_ceil {
        return Err(ParamError::Inconsistent);
    }
    let a = bytes_ps(page, bw_p2p).ok_or(overflow)?.max(1);
    let pc = bytes_ps(page, bw_pc).ok_or(overflow)?.max(1);
    let cut = s_cutoff.div_ceil(page);
    let lo = cut.saturating_sub(1).checked_mul(a).ok_or(overflow)?;
    let hi = cut.checked_mul(a).ok_or(overflow)?;
    let b = bytes_ps(s_cutoff, bw_p2p).ok_or(overflow)?.clamp(lo, hi);
    // b <= round(S / BW) <= ceil(S / BW) <= c; the clamp may only raise b to (cut - 1) * a,
    // which is below S / BW. Keep the invariant explicit anyway.
    if b > c {
        return Err(ParamError::Inconsistent);
    }
    Ok(Model {
        c,
        a,
        b,
        pc,
        batch: 0,
    })
}

/// The integer cost model: `T_p2p(n) = c + max(0, n * a - b)`, `T_pc(n) = n * pc`, in
/// picoseconds for `n` pages, and the batch term `f` paid once by any schedule with a P2P leg.
///
/// Invariants (kept by every constructor): `a >= 1`, `pc >= 1`, `b <= c`. They make `T_p2p`
/// subadditive (`T(x + y) <= T(x) + T(y)`), which is the discrete form of the consistency rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    c: Picos,
    a: Picos,
    b: Picos,
    pc: Picos,
    /// Batch term: the part of the first leg's fixed cost that the queue does not hide.
    batch: Picos,
}

impl Model {
    /// Builds a model from raw integer terms, checking the invariants `a >= 1`, `pc >= 1` and
    /// `b <= c`. Meant for tests and for weighted variants; devices go through [`Params::new`].
    pub fn from_terms(c: Picos, a: Picos, b: Picos, pc: Picos) -> Result<Self, ParamError> {
        if a == 0 || pc == 0 {
            return Err(ParamError::Bandwidth);
        }
        if b > c {
            return Err(ParamError::Inconsistent);
        }
        Ok(Self {
            c,
            a,
            b,
            pc,
            batch: 0,
        })
    }

    /// The model with a batch term: legs cost `c` each and the batch `f` once more. Checks the
    /// invariants of [`Model::from_terms`]. Meant for tests; devices go through
    /// [`Params::with_overlap`].
    pub fn from_terms_batched(
        c: Picos,
        a: Picos,
        b: Picos,
        pc: Picos,
        f: Picos,
    ) -> Result<Self, ParamError> {
        Ok(Self {
            batch: f,
            ..Self::from_terms(c, a, b, pc)?
        })
    }

    /// The model of legs in flight together, overlapping by `overlap` percent (at least
    /// [`NO_OVERLAP`]), derived from this serial model (one without a batch term).
    fn queued(&self, overlap: u32) -> Result<Self, ParamError> {
        let total = self.c;
        let c = total
            .checked_mul(u64::from(NO_OVERLAP))
            .ok_or(ParamError::Overhead)?
            .div_ceil(u64::from(overlap.max(NO_OVERLAP)))
            .max(1);
        Ok(Self {
            c,
            b: self.b.min(c),
            batch: total - c,
            ..*self
        })
    }

    /// Fixed cost of a P2P leg in picoseconds: `C_p2p`, or `C_p2p / O` with a queue overlap
    /// `O` (the rest of `C_p2p` is the [`Model::batch`] term).
    pub fn c(&self) -> Picos {
        self.c
    }

    /// P2P time per page above the cutoff, in picoseconds.
    pub fn a(&self) -> Picos {
        self.a
    }

    /// Offset of the hinge: `S_cutoff / BW_p2p` in picoseconds.
    pub fn b(&self) -> Picos {
        self.b
    }

    /// Page-cache time per page, in picoseconds.
    pub fn pc(&self) -> Picos {
        self.pc
    }

    /// Batch term in picoseconds: what a schedule with at least one P2P leg pays once beyond
    /// the sum of its legs' `T_p2p` (zero without queue overlap).
    pub fn batch(&self) -> Picos {
        self.batch
    }

    /// Device time of a schedule whose P2P legs cost `legs` in all: `f + legs`, or zero
    /// without P2P legs (`any` false).
    pub fn device(&self, legs: Picos, any: bool) -> Picos {
        if any {
            legs.saturating_add(self.batch)
        } else {
            0
        }
    }

    /// Longest P2P transfer, in pages, that costs exactly [`Model::c`]: `floor(b / a)`.
    pub fn flat_pages(&self) -> u64 {
        self.b / self.a
    }

    /// `T_p2p(n)` of Eq. 1 for `n` pages; zero pages cost nothing (no transfer).
    pub fn t_p2p(&self, n: u64) -> Picos {
        if n == 0 {
            return 0;
        }
        self.c
            .saturating_add(n.saturating_mul(self.a).saturating_sub(self.b))
    }

    /// `T_pc(n)` of Eq. 1 for `n` pages.
    pub fn t_pc(&self, n: u64) -> Picos {
        n.saturating_mul(self.pc)
    }

    /// The same model with P2P terms multiplied by `q` and the page-cache rate replaced by `w`:
    /// minimising its additive cost minimises `q * D + w * h`, where `D` is the device time and
    /// `h` the number of page-cache pages. Used by the overlap scheduler. `None` on overflow or
    /// if `q` or `w` is zero.
    pub fn weighted(&self, q: u64, w: u64) -> Option<Self> {
        if q == 0 || w == 0 {
            return None;
        }
        Some(Self {
            c: self.c.checked_mul(q)?,
            a: self.a.checked_mul(q)?,
            b: self.b.checked_mul(q)?,
            pc: w,
            batch: self.batch.checked_mul(q)?,
        })
    }
}
