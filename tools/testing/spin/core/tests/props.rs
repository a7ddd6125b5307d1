// SPDX-License-Identifier: GPL-2.0

//! Property tests of the decision core: every scheduler's schedule covers the request exactly
//! once with page-cache segments over cached pages only, reports the cost it really has, the
//! exact scheduler is never beaten and equals a brute force over all schedules for N <= 16.

use proptest::prelude::*;
use spin_core::sched::*;

/// Every schedule of `n` pages by explicit enumeration: each segment `[pos, end)` goes through
/// P2P, or through the page cache if all its pages are cached. Returns the minimum of `f` over
/// all schedules, where `f` folds (device, cpu) sums; the first P2P leg also pays the model's
/// batch term (every leg costs at least one picosecond, so `device == 0` means no leg yet).
/// Exponential: only for small `n`.
fn brute(
    bits: &[bool],
    m: &Model,
    pos: usize,
    device: u64,
    cpu: u64,
    f: &dyn Fn(u64, u64) -> u64,
) -> u64 {
    let n = bits.len();
    if pos == n {
        return f(device, cpu);
    }
    let mut best = u64::MAX;
    let mut cached = true;
    let first = if device == 0 { m.batch() } else { 0 };
    for end in pos + 1..=n {
        cached &= bits[end - 1];
        let len = (end - pos) as u64;
        best = best.min(brute(bits, m, end, device + first + m.t_p2p(len), cpu, f));
        if cached {
            best = best.min(brute(bits, m, end, device, cpu + m.t_pc(len), f));
        }
    }
    best
}

/// Page-level O(N^2) reference of the additive optimum (exhaustive over segmentations), with
/// saturating sums, so exact whenever the optimum fits a `u64` (every prefix of the optimal
/// schedule costs at most the optimum). Two states per page: no P2P leg yet (all page cache),
/// and at least one, which pays the batch term once at the end.
fn reference(bits: &[bool], m: &Model) -> u64 {
    let n = bits.len();
    // dp_pc[i]: pages 0..i all through the page cache; dp[i]: with at least one P2P leg.
    let mut dp_pc = vec![u64::MAX; n + 1];
    let mut dp = vec![u64::MAX; n + 1];
    dp_pc[0] = 0;
    for i in 1..=n {
        if bits[i - 1] && dp_pc[i - 1] != u64::MAX {
            dp_pc[i] = dp_pc[i - 1].saturating_add(m.t_pc(1));
        }
        let mut cached = true;
        for j in (0..i).rev() {
            cached &= bits[j];
            let len = (i - j) as u64;
            let mut c = dp[j].min(dp_pc[j]).saturating_add(m.t_p2p(len));
            if cached {
                c = c.min(dp[j].saturating_add(m.t_pc(len)));
            }
            dp[i] = dp[i].min(c);
        }
    }
    dp_pc[n].min(dp[n].saturating_add(m.batch()))
}

fn runs_of<'a>(bits: &[bool], buf: &'a mut Vec<u32>) -> Runs<'a> {
    assert!(!bits.is_empty());
    buf.clear();
    buf.resize(bits.len(), 0);
    let mut b = RunsBuilder::new(buf);
    b.push_bits(bits.iter().copied()).unwrap();
    b.finish().unwrap()
}

/// Small integer models with both signs of `a - pc`, short cutoffs (`n0 = b / a` in 0..6)
/// and a batch term (a queue that overlaps legs) in half of them.
fn model() -> impl Strategy<Value = Model> {
    (
        1u64..40,
        0u64..6,
        0u64..40,
        0u64..300,
        1u64..60,
        prop_oneof![Just(0u64), 0u64..400],
    )
        .prop_map(|(a, n0, r, extra, pc, f)| {
            let b = a * n0 + r % a;
            Model::from_terms_batched(b + 1 + extra, a, b, pc, f).unwrap()
        })
}

/// Models at the edges of the exact scheduler: `c = b` (the hinge at its consistency limit, no
/// gap bridged for free), `a = pc` (one P2P page costs a copied one), and terms of 2^57 to 2^62
/// ps, beyond the validated ranges (its checked-arithmetic fallback).
fn edge_model() -> impl Strategy<Value = Model> {
    prop_oneof![
        (1u64..40, 0u64..8, 0u64..40, 1u64..60).prop_map(|(a, n0, r, pc)| {
            let b = a * n0 + r % a;
            Model::from_terms(b, a, b, pc.min(a)).unwrap()
        }),
        (1u64..40, 0u64..8, 0u64..40, 0u64..300).prop_map(|(a, n0, r, extra)| {
            let b = a * n0 + r % a;
            Model::from_terms(b + extra, a, b, a).unwrap()
        }),
        (
            0u64..1 << 57,
            2u64..10,
            any::<u64>(),
            0u32..40,
            any::<u64>()
        )
            .prop_map(|(a0, n0, r, shift, pc)| {
                let a = (1u64 << 57) + a0;
                let b = a * n0 + r % a;
                let c = (b + ((1u64 << 59) >> shift)).max(1 << 61);
                Model::from_terms(c, a, b, 1 + pc % a).unwrap()
            }),
    ]
}

/// Device parameters in kernel units, consistent by construction; half of them with a queue
/// that overlaps legs.
fn params() -> impl Strategy<Value = Params> {
    (
        0u64..64,
        0u64..4096,
        1u64..2000,
        100u64..20_000,
        100u64..20_000,
        prop_oneof![Just(NO_OVERLAP), NO_OVERLAP..=MAX_OVERLAP],
    )
        .prop_filter_map(
            "consistent",
            |(cut_pages, extra, c_us, bw_p2p_mb, bw_pc_mb, overlap)| {
                let s = cut_pages * 4096 + extra;
                let bw_p2p = bw_p2p_mb * 1_000_000;
                let min_c_ns = (s * 1_000_000_000).div_ceil(bw_p2p);
                let c = (c_us * 1000).max(min_c_ns).max(1);
                Params::new(4096, s, c, bw_p2p, bw_pc_mb * 1_000_000)
                    .and_then(|p| p.with_overlap(overlap))
                    .ok()
            },
        )
}

/// Residency bitmaps: i.i.d. pages or alternating runs, so that both short and long runs occur.
fn bitmap(max: usize) -> impl Strategy<Value = Vec<bool>> {
    prop_oneof![
        prop::collection::vec(any::<bool>(), 1..=max),
        prop::collection::vec((any::<bool>(), 1usize..40), 1..12).prop_map(move |rs| {
            let mut v = Vec::new();
            for (c, l) in rs {
                v.extend(std::iter::repeat_n(c, l));
            }
            v.truncate(max);
            v
        }),
    ]
}

fn check_valid(runs: &Runs<'_>, segs: &[Segment]) {
    assert_eq!(check(runs, segs), Ok(()), "{segs:?}");
}

fn all_p2p(m: &Model, n: usize) -> u64 {
    m.device(m.t_p2p(n as u64), true)
}

/// Every cached run through the page cache, every uncached run its own P2P transfer.
fn naive(m: &Model, runs: &Runs<'_>) -> u64 {
    let (mut legs, mut cpu, mut any) = (0, 0, false);
    for r in runs.iter() {
        if r.cached {
            cpu += m.t_pc(r.len.into());
        } else {
            legs += m.t_p2p(r.len.into());
            any = true;
        }
    }
    m.device(legs, any) + cpu
}

fn optimal_of(m: &Model, runs: &Runs<'_>) -> (Vec<Segment>, u64) {
    let mut out = vec![Segment::EMPTY; runs.max_segments()];
    let mut ws = vec![Slot::EMPTY; scratch_len(runs)];
    let s = optimal_model(m, runs, &mut out, &mut ws).unwrap();
    (s.segments.to_vec(), s.cost)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The exact scheduler equals an explicit enumeration of all schedules (N <= 16).
    #[test]
    fn optimal_equals_brute_force(m in model(), bits in bitmap(16)) {
        let mut buf = Vec::new();
        let runs = runs_of(&bits, &mut buf);
        let (segs, cost) = optimal_of(&m, &runs);
        check_valid(&runs, &segs);
        prop_assert_eq!(cost, additive_cost(&m, &segs));
        prop_assert_eq!(cost, brute(&bits, &m, 0, 0, 0, &|d, c| d + c));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// The exact scheduler equals the page-level reference on longer requests.
    #[test]
    fn optimal_equals_reference(m in model(), bits in bitmap(300)) {
        let mut buf = Vec::new();
        let runs = runs_of(&bits, &mut buf);
        let (segs, cost) = optimal_of(&m, &runs);
        check_valid(&runs, &segs);
        prop_assert!(segs.len() <= runs.max_segments());
        prop_assert_eq!(cost, additive_cost(&m, &segs));
        prop_assert_eq!(cost, reference(&bits, &m));
    }

    /// The exact scheduler equals the page-level reference on the edge models, or reports an
    /// overflow exactly when the optimum does not fit a `u64`.
    #[test]
    fn optimal_equals_reference_edge_models(m in edge_model(), bits in bitmap(300)) {
        let bits = if m.c() > 1 << 60 { &bits[..bits.len().min(30)] } else { &bits[..] };
        let mut buf = Vec::new();
        let runs = runs_of(bits, &mut buf);
        let mut out = vec![Segment::EMPTY; runs.max_segments()];
        let mut ws = vec![Slot::EMPTY; scratch_len(&runs)];
        let best = reference(bits, &m);
        match optimal_model(&m, &runs, &mut out, &mut ws) {
            Ok(s) => {
                check_valid(&runs, s.segments);
                prop_assert_eq!(s.cost, additive_cost(&m, s.segments));
                prop_assert_eq!(s.cost, best);
            }
            Err(e) => prop_assert!(best == u64::MAX, "{:?} with optimum {}", e, best),
        }
    }

    /// With real device parameters: all schedulers produce valid schedules with the cost they
    /// report, and the optimum is at most every other scheduler's cost.
    #[test]
    fn schedulers_valid_and_optimum_is_least(p in params(), bits in bitmap(600)) {
        let m = p.model();
        let mut buf = Vec::new();
        let runs = runs_of(&bits, &mut buf);
        let mut out = vec![Segment::EMPTY; runs.max_segments()];
        let g = greedy(&p, &runs, &mut out).unwrap();
        check_valid(&runs, g.segments);
        prop_assert_eq!(g.cost, additive_cost(&m, g.segments));
        let g_cost = g.cost;
        let r = released(&p, &runs, &mut out).unwrap();
        check_valid(&runs, r.segments);
        prop_assert_eq!(r.cost, additive_cost(&m, r.segments));
        let r_cost = r.cost;
        let mut ws = vec![Slot::EMPTY; scratch_len(&runs)];
        let o = optimal(&p, &runs, &mut out, &mut ws).unwrap();
        check_valid(&runs, o.segments);
        prop_assert_eq!(o.cost, additive_cost(&m, o.segments));
        prop_assert!(o.cost <= g_cost && o.cost <= r_cost);
        prop_assert!(o.cost <= all_p2p(&m, bits.len()) && o.cost <= naive(&m, &runs));
        prop_assert_eq!(o.cost, reference(&bits, &m));
    }

    /// The builder reproduces the bitmap.
    #[test]
    fn runs_roundtrip(bits in bitmap(200)) {
        let mut buf = Vec::new();
        let runs = runs_of(&bits, &mut buf);
        prop_assert_eq!(runs.pages() as usize, bits.len());
        for (i, &b) in bits.iter().enumerate() {
            prop_assert_eq!(runs.is_cached(i as u32), b);
        }
        let cached = bits.iter().filter(|&&b| b).count() as u32;
        prop_assert_eq!(runs.cached_pages(), cached);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Overlap on small integer models: bound <= exact optimum (enumeration) <= result.
    #[test]
    fn overlap_bounds_hold_small_models(m in model(), bits in bitmap(12)) {
        let mut buf = Vec::new();
        let runs = runs_of(&bits, &mut buf);
        let mut out = vec![Segment::EMPTY; runs.max_segments()];
        let mut ws = vec![Slot::EMPTY; scratch_len(&runs)];
        let add = optimal_model(&m, &runs, &mut out, &mut ws).unwrap();
        let add_makespan = makespan(&m, add.segments);
        let mut gaps = vec![0u32; gap_scratch_len(&runs)];
        let o = overlap_model(&m, &runs, &mut out, &mut ws, &mut gaps).unwrap();
        check_valid(&runs, o.schedule.segments);
        prop_assert_eq!(o.schedule.cost, makespan(&m, o.schedule.segments));
        prop_assert!(o.schedule.cost <= add_makespan);
        let exact = brute(&bits, &m, 0, 0, 0, &|d, c| d.max(c));
        prop_assert!(o.bound <= exact, "bound {} > exact {}", o.bound, exact);
        prop_assert!(exact <= o.schedule.cost);
    }

    /// Overlap: valid schedule, reported makespan is real, the certified bound is at most the
    /// true optimum (explicit enumeration, N <= 12), and it never loses to the additive optimum.
    #[test]
    fn overlap_bounds_hold(p in params(), bits in bitmap(12)) {
        let m = p.model();
        let mut buf = Vec::new();
        let runs = runs_of(&bits, &mut buf);
        let mut out = vec![Segment::EMPTY; runs.max_segments()];
        let mut ws = vec![Slot::EMPTY; scratch_len(&runs)];
        let add = optimal(&p, &runs, &mut out, &mut ws).unwrap();
        let add_makespan = makespan(&m, add.segments);
        let mut gaps = vec![0u32; gap_scratch_len(&runs)];
        let o = overlap(&p, &runs, &mut out, &mut ws, &mut gaps).unwrap();
        check_valid(&runs, o.schedule.segments);
        prop_assert_eq!(o.schedule.cost, makespan(&m, o.schedule.segments));
        prop_assert!(o.schedule.cost <= add_makespan);
        let (d, h) = split_cost(&m, o.schedule.segments);
        prop_assert_eq!((o.device, o.cpu), (d, h));
        let exact = brute(&bits, &m, 0, 0, 0, &|d, c| d.max(c));
        prop_assert!(o.bound <= exact, "bound {} > exact {}", o.bound, exact);
        prop_assert!(exact <= o.schedule.cost);
    }
}

/// The bridge check without its early exit, written out in full: the oracle the early exit
/// must agree with.
fn bridge_oracle(s: &readahead::Stream, pos: u64, len: u64, lead: u32) -> Option<(u64, u64)> {
    if s.random || s.ra_pages == 0 || lead == 0 || len == 0 {
        return None;
    }
    let to_page = |off: u64| off >> 12;
    let ahead = u64::from(lead);
    let stride_shift = (ahead / 4).max(1).ilog2();
    let horizon = |next: u64| {
        ((next >> stride_shift) << stride_shift)
            .checked_add(1 << stride_shift)?
            .checked_add(ahead)
    };
    let first = to_page(pos);
    let window_end = if s.ra_size == 0 {
        0
    } else {
        s.ra_start.saturating_add(s.ra_size)
    };
    if first < window_end {
        return None;
    }
    let next = to_page(pos.checked_add(len - 1)?).checked_add(1)?;
    let end = horizon(next)?;
    let mut from = next.max(window_end);
    if let Ok(prev) = u64::try_from(s.prev_pos) {
        if pos > 0 && prev > 0 && readahead::is_sequential(s.prev_pos, pos, 4096) {
            let prev_next = to_page(prev - 1) + 1;
            if window_end == 0 || prev_next >= window_end.saturating_add(next - first) {
                from = from.max(horizon(prev_next).unwrap_or(u64::MAX));
            }
        }
    }
    (from < end).then_some((from, end))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20000))]

    /// The bridge check's early exit changes no answer: streams of small reads near and far
    /// from their window, and offsets near the top of the range.
    #[test]
    fn bridge_early_exit_agrees(
        page in 0u64..4096,
        gap in 0u64..3,
        off in 0u64..4096,
        len in 0u64..40000,
        ra_start in 0u64..4200,
        ra_size in prop_oneof![Just(0u64), 1u64..256],
        ra_pages in prop_oneof![Just(0u32), 1u32..256],
        lead in 0u32..1200,
        random in any::<bool>(),
        base_kind in 0u8..3,
        prev_neg in any::<bool>(),
    ) {
        // Low offsets; offsets just below `i64::MAX`, the largest a
        // `loff_t` can hold, where `prev_pos` stays positive and the
        // early exit can be taken; and offsets near `u64::MAX`, which
        // only exercise the overflow checks of `horizon()`.
        let base = match base_kind {
            0 => 0,
            1 => (i64::MAX as u64) - (1 << 30),
            _ => u64::MAX - (1 << 30),
        };
        let pos = base + page * 4096 + off;
        let prev = (pos.saturating_sub(gap * 4096 + off / 2)) as i64;
        let s = readahead::Stream {
            prev_pos: if prev_neg { -1 } else { prev },
            ra_pages,
            random,
            ra_start: base / 4096 + ra_start,
            ra_size,
        };
        prop_assert_eq!(readahead::bridge(&s, pos, len, lead, 4096),
                        bridge_oracle(&s, pos, len, lead));
    }
}
