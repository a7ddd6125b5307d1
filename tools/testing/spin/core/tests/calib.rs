// SPDX-License-Identifier: GPL-2.0

//! The calibration fit recovers known parameters from noisy synthetic measurements and always
//! returns physically consistent ones.

use spin_core::calib::{fit_p2p, fit_pc, Sample};
use spin_core::rng::Rng;

/// Eq. 1 in floating point: bytes -> ns.
fn eq1(c_ns: f64, s: f64, bw: f64, x: f64) -> f64 {
    if x < s {
        c_ns
    } else {
        c_ns + (x - s) / bw * 1e9
    }
}

/// Standard normal by Box-Muller.
fn normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Sizes as a calibration tool would measure them: page multiples from 4 KiB to 8 MiB, eight
/// per octave (62 sizes), `reps` repetitions each, multiplicative Gaussian noise of relative
/// standard deviation `noise`.
fn samples(c_ns: f64, s: f64, bw: f64, noise: f64, reps: usize, seed: u64) -> Vec<Sample> {
    let mut rng = Rng::new(seed);
    let mut v = Vec::new();
    let mut x: f64 = 4096.0;
    let mut last = 0.0;
    while x <= 8.0 * 1024.0 * 1024.0 * 1.0001 {
        let size = (x / 4096.0).round() * 4096.0;
        if size > last {
            for _ in 0..reps {
                let t = eq1(c_ns, s, bw, size) * (1.0 + noise * normal(&mut rng));
                v.push(Sample { bytes: size, ns: t });
            }
            last = size;
        }
        x *= 2f64.powf(0.125);
    }
    v
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    ((got - want) / want).abs() <= tol
}

#[test]
fn recovers_paper_parameters_under_noise() {
    for seed in 1..=50 {
        let mut s = samples(584_000.0, 524_288.0, 2.65e9, 0.03, 8, seed);
        let f = fit_p2p(&mut s).expect("fit");
        assert!(close(f.c_ns, 584_000.0, 0.05), "seed {seed}: {f:?}");
        assert!(close(f.s_cutoff, 524_288.0, 0.05), "seed {seed}: {f:?}");
        assert!(close(f.bw, 2.65e9, 0.05), "seed {seed}: {f:?}");
        assert!(f.r2 > 0.99, "seed {seed}: {f:?}");
        assert!(f.c_ns >= f.s_cutoff / f.bw * 1e9 * (1.0 - 1e-12));
    }
}

#[test]
fn recovers_gen4_parameters_under_noise() {
    for seed in 51..=100 {
        let mut s = samples(80_000.0, 131_072.0, 6.5e9, 0.03, 8, seed);
        let f = fit_p2p(&mut s).expect("fit");
        assert!(close(f.c_ns, 80_000.0, 0.05), "seed {seed}: {f:?}");
        assert!(close(f.s_cutoff, 131_072.0, 0.05), "seed {seed}: {f:?}");
        assert!(close(f.bw, 6.5e9, 0.05), "seed {seed}: {f:?}");
        assert!(f.r2 > 0.99);
    }
}

#[test]
fn exact_data_is_fitted_exactly() {
    let mut s = samples(80_000.0, 131_072.0, 6.5e9, 0.0, 1, 0);
    let f = fit_p2p(&mut s).expect("fit");
    assert!(
        close(f.c_ns, 80_000.0, 1e-9) && close(f.s_cutoff, 131_072.0, 1e-6),
        "{f:?}"
    );
    assert!(close(f.bw, 6.5e9, 1e-9) && f.r2 > 1.0 - 1e-12, "{f:?}");
    assert!(!f.constrained);
}

/// Data from a device that breaks C >= S / BW (512 KiB at 1 GB/s = 524 us > 100 us): the
/// unconstrained fit would reproduce the inconsistent parameters; the fit must not.
#[test]
fn inconsistent_data_gives_consistent_fit() {
    let mut s = samples(100_000.0, 524_288.0, 1e9, 0.01, 4, 7);
    let f = fit_p2p(&mut s).expect("fit");
    assert!(f.constrained, "{f:?}");
    assert!(f.c_ns >= f.s_cutoff / f.bw * 1e9 * (1.0 - 1e-12), "{f:?}");
    let pc = fit_pc(&[Sample {
        bytes: 4096.0,
        ns: 400.0,
    }])
    .unwrap();
    assert!(f.params(4096, &pc).is_ok(), "{f:?}");
}

#[test]
fn page_cache_fit_and_params() {
    let mut rng = Rng::new(3);
    let pcs: Vec<Sample> = (1..200)
        .map(|i| {
            let b = 4096.0 * f64::from(i);
            Sample {
                bytes: b,
                ns: b / 10e9 * 1e9 * (1.0 + 0.02 * normal(&mut rng)),
            }
        })
        .collect();
    let pc = fit_pc(&pcs).unwrap();
    assert!(close(pc.bw, 10e9, 0.02) && pc.r2 > 0.99, "{pc:?}");
    let mut s = samples(80_000.0, 131_072.0, 6.5e9, 0.02, 8, 5);
    let f = fit_p2p(&mut s).unwrap();
    let p = f.params(4096, &pc).expect("consistent");
    assert!(p.c_p2p_ns() as f64 >= f.c_ns && p.s_cutoff() as f64 <= f.s_cutoff);
}

#[test]
fn degenerate_inputs_are_refused() {
    assert!(fit_p2p(&mut []).is_none());
    let mut same = vec![
        Sample {
            bytes: 4096.0,
            ns: 10.0
        };
        5
    ];
    assert!(fit_p2p(&mut same).is_none());
    assert!(fit_pc(&[]).is_none());
}
