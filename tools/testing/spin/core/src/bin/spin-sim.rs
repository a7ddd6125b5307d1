// SPDX-License-Identifier: GPL-2.0

//! spin-sim: reproduces the SPIN paper's scheduling experiment (§4.3.1) and measures the
//! decision cost of every scheduler of `rust/spin/sched`.
//!
//! For each parameter set and residency generator it draws `--requests` random 8 MB requests
//! (2048 pages of 4 KiB) from a fixed seed, schedules each with the paper's greedy, SPIN's
//! released rule and the exact optimum (additive cost of Eq. 1), and with the overlap scheduler
//! (makespan), and reports how close each comes to the optimum. Then it times every scheduler
//! on the same mix of requests. Tables go to stdout and `<out>/summary.md`, data to CSV files in
//! `<out>` for `plot.py`.
//!
//! Usage: spin-sim [--requests N] [--out DIR] [--seed S] [--pages N] [--bench-requests N]
//!                 [--bench-rounds N] [--bench-only]

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use spin_core::rng::Rng;
use spin_core::sched::*;

/// The paper's average, greedy against optimal, §4.3.1.
const PAPER_GREEDY: f64 = 0.989;

struct Args {
    requests: usize,
    out: String,
    seed: u64,
    pages: u32,
    bench_requests: usize,
    bench_rounds: usize,
    bench_only: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        requests: 200_000,
        out: "build/bench-core".into(),
        seed: 0x5350_494e_2017,
        pages: 2048,
        bench_requests: 1000,
        bench_rounds: 7,
        bench_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--requests" => a.requests = val()?.parse().map_err(|e| format!("{e}"))?,
            "--out" => a.out = val()?,
            "--seed" => a.seed = val()?.parse().map_err(|e| format!("{e}"))?,
            "--pages" => a.pages = val()?.parse().map_err(|e| format!("{e}"))?,
            "--bench-requests" => a.bench_requests = val()?.parse().map_err(|e| format!("{e}"))?,
            "--bench-rounds" => a.bench_rounds = val()?.parse().map_err(|e| format!("{e}"))?,
            "--bench-only" => a.bench_only = true,
            "-h" | "--help" => {
                println!(
                    "usage: spin-sim [--requests N] [--out DIR] [--seed S] [--pages N] \
                     [--bench-requests N] [--bench-rounds N] [--bench-only]"
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if a.requests == 0 || a.pages == 0 || a.bench_requests == 0 || a.bench_rounds == 0 {
        return Err("counts must be positive".into());
    }
    Ok(a)
}

/// A residency generator.
#[derive(Clone, Copy)]
enum Gen {
    /// Each page cached independently with probability p, p ~ U(0, 1) per request.
    Iid,
    /// Alternating cached/uncached runs with geometric lengths of this mean (pages), first
    /// state a fair coin.
    Geo(u32),
}

impl Gen {
    const ALL: [Gen; 6] = [
        Gen::Iid,
        Gen::Geo(1),
        Gen::Geo(4),
        Gen::Geo(16),
        Gen::Geo(64),
        Gen::Geo(256),
    ];

    fn name(&self) -> String {
        match self {
            Gen::Iid => "iid U(0,1)".into(),
            Gen::Geo(m) => format!("runs mean {m}"),
        }
    }

    /// Fills `lens` with the runs of one request of `n` pages; returns whether the first is
    /// cached.
    fn draw(&self, rng: &mut Rng, n: u32, lens: &mut Vec<u32>) -> bool {
        lens.clear();
        match *self {
            Gen::Iid => {
                let p = rng.next_f64();
                let mut first = None;
                let mut last = false;
                for _ in 0..n {
                    let c = rng.next_f64() < p;
                    match (first, lens.last_mut()) {
                        (Some(_), Some(l)) if c == last => *l += 1,
                        _ => lens.push(1),
                    }
                    first.get_or_insert(c);
                    last = c;
                }
                first.unwrap_or(false)
            }
            Gen::Geo(mean) => {
                let first = rng.next_u64() & 1 == 1;
                let mut left = n;
                while left > 0 {
                    let len = geometric(rng, mean).min(left);
                    lens.push(len);
                    left -= len;
                }
                first
            }
        }
    }
}

/// Geometric on {1, 2, ...} with the given mean.
fn geometric(rng: &mut Rng, mean: u32) -> u32 {
    if mean <= 1 {
        return 1;
    }
    let q = 1.0 / f64::from(mean);
    let u = 1.0 - rng.next_f64(); // (0, 1]
    let k = (u.ln() / (1.0 - q).ln()).floor();
    1 + k.min(1e9) as u32
}

struct Bufs {
    out: Vec<Segment>,
    ws: Vec<Slot>,
    gaps: Vec<u32>,
}

impl Bufs {
    fn new(pages: u32) -> Self {
        let n = pages as usize + 2;
        Self {
            out: vec![Segment::EMPTY; n],
            ws: vec![Slot::EMPTY; n],
            gaps: vec![0; n],
        }
    }
}

/// Running statistics of a ratio.
#[derive(Clone, Copy)]
struct Stat {
    sum: f64,
    inv_sum: f64,
    min: f64,
    max: f64,
    n: u64,
    hits: u64,
}

impl Stat {
    fn new() -> Self {
        Self {
            sum: 0.0,
            inv_sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            n: 0,
            hits: 0,
        }
    }

    fn add(&mut self, x: f64, hit: bool) {
        self.sum += x;
        self.inv_sum += 1.0 / x;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        self.n += 1;
        self.hits += u64::from(hit);
    }

    fn mean(&self) -> f64 {
        self.sum / self.n.max(1) as f64
    }

    fn inv_mean(&self) -> f64 {
        self.inv_sum / self.n.max(1) as f64
    }

    fn frac(&self) -> f64 {
        self.hits as f64 / self.n.max(1) as f64
    }
}

/// Quality statistics of one (parameter set, generator).
struct Quality {
    greedy: Stat,
    released: Stat,
    /// Additive cost of the optimum, microseconds.
    opt_us: Stat,
    /// Makespan of the overlap scheduler over the additive optimum's cost.
    overlap_gain: Stat,
    /// Makespan of the overlap scheduler over the makespan of the additive optimum's schedule.
    overlap_vs_opt_sched: Stat,
    /// Overlap scheduler's distance to its certified bound.
    overlap_gap: Stat,
    overlap_us: Stat,
}

fn run_quality(params: &Params, gen: Gen, a: &Args, seed: u64) -> Quality {
    let m = params.model();
    let mut rng = Rng::new(seed);
    let mut lens = Vec::with_capacity(a.pages as usize);
    let mut b = Bufs::new(a.pages);
    let mut q = Quality {
        greedy: Stat::new(),
        released: Stat::new(),
        opt_us: Stat::new(),
        overlap_gain: Stat::new(),
        overlap_vs_opt_sched: Stat::new(),
        overlap_gap: Stat::new(),
        overlap_us: Stat::new(),
    };
    for _ in 0..a.requests {
        let first = gen.draw(&mut rng, a.pages, &mut lens);
        let runs = Runs::new(first, &lens).expect("generator produced valid runs");
        let g = greedy(params, &runs, &mut b.out).expect("greedy").cost;
        let r = released(params, &runs, &mut b.out).expect("released").cost;
        let o = optimal(params, &runs, &mut b.out, &mut b.ws).expect("optimal");
        let (opt, opt_span) = (o.cost, makespan(&m, o.segments));
        let ov = overlap(params, &runs, &mut b.out, &mut b.ws, &mut b.gaps).expect("overlap");
        let (span, bound) = (ov.schedule.cost, ov.bound);
        assert!(opt <= g && opt <= r, "optimum beaten");
        assert!(bound <= span && span <= opt_span, "overlap inconsistent");
        q.greedy.add(opt as f64 / g as f64, opt == g);
        q.released.add(opt as f64 / r as f64, opt == r);
        q.opt_us.add(opt as f64 / 1e6, true);
        q.overlap_us.add(span as f64 / 1e6, true);
        q.overlap_gain.add(opt as f64 / span as f64, false);
        q.overlap_vs_opt_sched
            .add(opt_span as f64 / span as f64, opt_span == span);
        q.overlap_gap
            .add((span - bound) as f64 / bound.max(1) as f64, span == bound);
    }
    q
}

/// Queue depth: the makespan, on a device whose queue overlaps legs by `overlap` percent, of
/// the schedule planned for a serial device over that of the schedule planned for this one
/// (the gain of knowing the overlap), and the queue-aware schedule's distance to its bound.
fn run_queue(serial: &Params, overlap_pct: u32, gen: Gen, a: &Args, seed: u64) -> (Stat, Stat) {
    let queued = serial.with_overlap(overlap_pct).expect("overlap in range");
    let truth = queued.model();
    let mut rng = Rng::new(seed);
    let mut lens = Vec::with_capacity(a.pages as usize);
    let mut b = Bufs::new(a.pages);
    let (mut gain, mut gap) = (Stat::new(), Stat::new());
    for _ in 0..a.requests.div_ceil(10) {
        let first = gen.draw(&mut rng, a.pages, &mut lens);
        let runs = Runs::new(first, &lens).expect("generator produced valid runs");
        let blind = overlap(serial, &runs, &mut b.out, &mut b.ws, &mut b.gaps).expect("overlap");
        let blind_span = makespan(&truth, blind.schedule.segments);
        let q = overlap(&queued, &runs, &mut b.out, &mut b.ws, &mut b.gaps).expect("overlap");
        let (span, bound) = (q.schedule.cost, q.bound);
        // The scheduler is certified, not always exact: the serial plan may win by at most the
        // gap, and the bound holds for it too.
        assert!(
            bound <= span && bound <= blind_span,
            "bound above a schedule"
        );
        gain.add(blind_span as f64 / span as f64, blind_span == span);
        gap.add((span - bound) as f64 / bound.max(1) as f64, span == bound);
    }
    (gain, gap)
}

/// Decision cost of each scheduler in ns per request over a fixed mix of requests: the median
/// over rounds of the mean per request, schedulers interleaved within each round.
fn run_bench(params: &Params, reqs: &[(bool, Vec<u32>)], a: &Args) -> [f64; 4] {
    let mut b = Bufs::new(a.pages);
    let mut samples: [Vec<f64>; 4] = Default::default();
    let runs: Vec<Runs<'_>> = reqs
        .iter()
        .map(|(f, l)| Runs::new(*f, l).expect("valid"))
        .collect();
    for _ in 0..a.bench_rounds {
        for (s, v) in samples.iter_mut().enumerate() {
            let t = Instant::now();
            for r in &runs {
                let c = match s {
                    0 => greedy(params, r, &mut b.out).map(|x| x.cost),
                    1 => released(params, r, &mut b.out).map(|x| x.cost),
                    2 => optimal(params, r, &mut b.out, &mut b.ws).map(|x| x.cost),
                    _ => overlap(params, r, &mut b.out, &mut b.ws, &mut b.gaps)
                        .map(|x| x.schedule.cost),
                };
                black_box(c.expect("scheduler"));
            }
            v.push(t.elapsed().as_nanos() as f64 / runs.len() as f64);
        }
    }
    samples.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    })
}

const SCHEDULERS: [&str; 4] = ["greedy", "released", "optimal", "overlap"];

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("spin-sim: {e}");
            std::process::exit(2);
        }
    };
    let sets: [(&str, Params); 3] = [
        ("paper", Params::paper().expect("paper params")),
        ("paper-pc10", paper_pc10()),
        ("gen4", Params::gen4().expect("gen4 params")),
    ];
    std::fs::create_dir_all(&a.out).expect("create output directory");
    let mut md = String::new();
    let mut full = String::new();
    let mut qcsv = String::from(
        "set,generator,scheduler,requests,mean_perf,worst_perf,mean_slowdown,max_slowdown,frac_optimal\n",
    );
    let mut ocsv = String::from(
        "set,generator,mean_opt_additive_us,mean_overlap_makespan_us,mean_speedup,max_speedup,\
         mean_gain_vs_opt_schedule,frac_opt_schedule_already_best,mean_gap,max_gap,frac_proven_exact\n",
    );
    let _ = writeln!(
        md,
        "# spin-sim: SPIN §4.3.1 reproduction\n\n{} requests of {} pages ({} MiB) per generator, \
         seed {:#x}.\n",
        a.requests,
        a.pages,
        (u64::from(a.pages) * 4096) >> 20,
        a.seed
    );
    for (si, (name, params)) in sets.iter().enumerate() {
        if a.bench_only {
            break;
        }
        let _ = writeln!(md, "{}", describe(name, params));
        let _ = writeln!(
            md,
            "| generator | greedy mean | greedy worst | released mean | released worst | greedy = opt | paper greedy |\n\
             |---|---|---|---|---|---|---|"
        );
        let mut ov = String::from(
            "| generator | additive opt (us) | overlap makespan (us) | speedup mean | speedup max | \
             vs opt schedule overlapped | proven exact | gap mean | gap max |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        for (gi, gen) in Gen::ALL.iter().enumerate() {
            let seed = a.seed ^ ((si as u64) << 32 | gi as u64).wrapping_mul(0x9e37_79b9);
            let q = run_quality(params, *gen, &a, seed);
            let g = gen.name();
            let _ = writeln!(
                md,
                "| {g} | {:.2}% | {:.2}% | {:.2}% | {:.2}% | {:.1}% | {:.1}% |",
                100.0 * q.greedy.mean(),
                100.0 * q.greedy.min,
                100.0 * q.released.mean(),
                100.0 * q.released.min,
                100.0 * q.greedy.frac(),
                100.0 * PAPER_GREEDY
            );
            for (sname, st) in [("greedy", &q.greedy), ("released", &q.released)] {
                let _ = writeln!(
                    qcsv,
                    "{name},\"{g}\",{sname},{},{:.6},{:.6},{:.6},{:.6},{:.6}",
                    st.n,
                    st.mean(),
                    st.min,
                    st.inv_mean(),
                    1.0 / st.min,
                    st.frac()
                );
            }
            let _ = writeln!(
                ov,
                "| {g} | {:.1} | {:.1} | {:.3}x | {:.3}x | {:.3}x | {:.2}% | {:.3}% | {:.2}% |",
                q.opt_us.mean(),
                q.overlap_us.mean(),
                q.overlap_gain.mean(),
                q.overlap_gain.max,
                q.overlap_vs_opt_sched.mean(),
                100.0 * q.overlap_gap.frac(),
                100.0 * q.overlap_gap.mean(),
                100.0 * q.overlap_gap.max
            );
            let _ = writeln!(
                ocsv,
                "{name},\"{g}\",{:.3},{:.3},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6}",
                q.opt_us.mean(),
                q.overlap_us.mean(),
                q.overlap_gain.mean(),
                q.overlap_gain.max,
                q.overlap_vs_opt_sched.mean(),
                q.overlap_vs_opt_sched.frac(),
                q.overlap_gap.mean(),
                q.overlap_gap.max,
                q.overlap_gap.frac()
            );
        }
        let _ = writeln!(
            md,
            "\nperf = optimal time / scheduler time (the paper's metric: greedy at 98.9% on average).\n\n\
             Overlap objective (makespan = max(device, CPU)); speedup = additive optimum / overlap makespan; \
             gap = distance of the overlap schedule to its certified lower bound.\n\n{ov}"
        );
        print!("{md}");
        full.push_str(&md);
        md.clear();
    }
    // Queue depth (gen4): what knowing the overlap of legs in flight together is worth.
    if !a.bench_only {
        let gen4 = Params::gen4().expect("gen4 params");
        let mut qmd = format!(
            "## Queue depth (`gen4`, {} requests per generator and overlap)\n\n\
             A device whose queue runs `O` small legs in the time of one (`p2p_overlap`, percent). \
             gain = makespan on that device of the schedule planned for a serial device / of the \
             schedule planned knowing `O` (mean, min, max, share of requests where both are equal); \
             gap = the queue-aware schedule's distance to its certified bound.\n\n\
             | overlap | generator | gain mean | gain min | gain max | same cost | proven exact | gap mean | gap max |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            a.requests.div_ceil(10)
        );
        let mut qcsv = String::from(
            "overlap_pct,generator,requests,mean_gain,min_gain,max_gain,frac_same,frac_proven_exact,mean_gap,max_gap\n",
        );
        for (oi, pct) in [100u32, 200, 400, 800].into_iter().enumerate() {
            for (gi, gen) in Gen::ALL.iter().enumerate() {
                let seed =
                    a.seed ^ ((0x51 + oi as u64) << 32 | gi as u64).wrapping_mul(0x9e37_79b9);
                let (gain, gap) = run_queue(&gen4, pct, *gen, &a, seed);
                let g = gen.name();
                let _ = writeln!(
                    qmd,
                    "| {pct}% | {g} | {:.3}x | {:.4}x | {:.3}x | {:.1}% | {:.1}% | {:.3}% | {:.2}% |",
                    gain.mean(),
                    gain.min,
                    gain.max,
                    100.0 * gain.frac(),
                    100.0 * gap.frac(),
                    100.0 * gap.mean(),
                    100.0 * gap.max
                );
                let _ = writeln!(
                    qcsv,
                    "{pct},\"{g}\",{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6}",
                    gain.n,
                    gain.mean(),
                    gain.min,
                    gain.max,
                    gain.frac(),
                    gap.frac(),
                    gap.mean(),
                    gap.max
                );
            }
        }
        qmd.push('\n');
        print!("{qmd}");
        full.push_str(&qmd);
        let _ = std::fs::write(format!("{}/queue.csv", a.out), qcsv);
    }
    // Decision cost.
    let mut rng = Rng::new(a.seed ^ 0xbe9c);
    let mut lens = Vec::new();
    let mut dmd = format!(
        "## Decision cost per {} page request (release build, median of {} rounds over {} requests \
         per generator, all generators mixed)\n\n| set | greedy ns | released ns | optimal ns | overlap ns | \
         released/greedy | optimal/greedy | overlap/greedy |\n|---|---|---|---|---|---|---|---|\n",
        a.pages, a.bench_rounds, a.bench_requests
    );
    let mut dcsv = String::from("set,generator,scheduler,ns_per_request,ratio_to_greedy\n");
    let mut reqs_all = Vec::new();
    for gen in Gen::ALL {
        let mut reqs = Vec::new();
        for _ in 0..a.bench_requests {
            let first = gen.draw(&mut rng, a.pages, &mut lens);
            reqs.push((first, lens.clone()));
        }
        reqs_all.push((gen, reqs));
    }
    let mut per_gen = String::from(
        "\nPer generator (gen4 parameters), ns per request:\n\n| generator | mean runs | greedy | released | \
         optimal | overlap | optimal/greedy |\n|---|---|---|---|---|---|---|\n",
    );
    for (name, params) in &sets {
        let mix: Vec<(bool, Vec<u32>)> = reqs_all
            .iter()
            .flat_map(|(_, r)| r.iter().cloned())
            .collect();
        let t = run_bench(params, &mix, &a);
        let _ = writeln!(
            dmd,
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
            t[0],
            t[1],
            t[2],
            t[3],
            t[1] / t[0],
            t[2] / t[0],
            t[3] / t[0]
        );
        for (s, ns) in SCHEDULERS.iter().zip(t) {
            let _ = writeln!(dcsv, "{name},all,{s},{ns:.1},{:.4}", ns / t[0]);
        }
        for (gen, reqs) in &reqs_all {
            let t = run_bench(params, reqs, &a);
            for (s, ns) in SCHEDULERS.iter().zip(t) {
                let _ = writeln!(
                    dcsv,
                    "{name},\"{}\",{s},{ns:.1},{:.4}",
                    gen.name(),
                    ns / t[0]
                );
            }
            if *name == "gen4" {
                let runs: usize = reqs.iter().map(|r| r.1.len()).sum();
                let _ = writeln!(
                    per_gen,
                    "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
                    gen.name(),
                    runs as f64 / reqs.len() as f64,
                    t[0],
                    t[1],
                    t[2],
                    t[3],
                    t[2] / t[0]
                );
            }
        }
    }
    dmd.push_str(&per_gen);
    print!("{dmd}");
    full.push_str(&dmd);
    let _ = std::fs::write(format!("{}/summary.md", a.out), full);
    let _ = std::fs::write(format!("{}/quality.csv", a.out), qcsv);
    let _ = std::fs::write(format!("{}/overlap.csv", a.out), ocsv);
    let _ = std::fs::write(format!("{}/decision_cost.csv", a.out), dcsv);
}

/// The paper's set with the page-cache bandwidth of its Table 3 (10.13 GB/s) instead of the one
/// implied by "249 pages in 584 us" (1.75 GB/s).
fn paper_pc10() -> Params {
    Params::new(4096, 512 * 1024, 584_000, 2_650_000_000, 10_130_000_000).expect("paper-pc10")
}

fn describe(name: &str, p: &Params) -> String {
    let m = p.model();
    format!(
        "## Parameter set `{name}`: S_cutoff {} KiB, C_p2p {} us, BW_p2p {:.2} GB/s, BW_pc {:.2} GB/s \
         (per page: P2P {:.3} us, page cache {:.3} us; {})\n",
        p.s_cutoff() / 1024,
        p.c_p2p_ns() as f64 / 1e3,
        p.bw_p2p() as f64 / 1e9,
        p.bw_pc() as f64 / 1e9,
        m.a() as f64 / 1e6,
        m.pc() as f64 / 1e6,
        if m.a() < m.pc() {
            "a P2P page is cheaper than a copied one, so the optimum is one P2P transfer"
        } else {
            "a copied page is cheaper than a P2P page"
        }
    )
}
