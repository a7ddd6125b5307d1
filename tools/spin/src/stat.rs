// SPDX-License-Identifier: GPL-2.0

//! `spin stat`: the router's counters, system-wide and per disk.
//!
//! Once: every counter's total. With `-i SECS`: the totals, then every `SECS` seconds (`-c
//! COUNT` times, else until interrupted) the rates per second of what changed, iostat style.

use crate::sys;
use crate::Fail;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

type Sample = Vec<(String, Vec<(String, u64)>)>;

/// Every stat file: "system" first, then the disks.
fn sample() -> Result<Sample, Fail> {
    let mut v = vec![(
        "system".to_string(),
        sys::counters(Path::new(sys::SPIN_SYS).join("stat"))?,
    )];
    for d in sys::spin_disks() {
        if let Ok(c) = sys::counters(format!("/sys/block/{d}/spin/stat")) {
            v.push((d, c));
        }
    }
    Ok(v)
}

fn totals(s: &Sample) {
    for (name, counters) in s {
        let nonzero: Vec<&(String, u64)> = counters.iter().filter(|(_, v)| *v != 0).collect();
        if name != "system" && nonzero.is_empty() {
            continue;
        }
        println!("{name}:");
        for (k, v) in counters.iter().filter(|(_, v)| name == "system" || *v != 0) {
            println!("  {k:<28} {v}");
        }
    }
}

/// The main rates of one device (or the system) between two samples.
fn rates(name: &str, a: &[(String, u64)], b: &[(String, u64)], secs: f64) -> Option<String> {
    let get = |s: &[(String, u64)], k: &str| s.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
    let d = |k: &str| get(b, k).saturating_sub(get(a, k)) as f64 / secs;
    let fallbacks: f64 = b
        .iter()
        .filter(|(k, _)| k.starts_with("fallback_") || k.starts_with("write_fallback_"))
        .map(|(k, _)| d(k))
        .sum();
    let row = [
        d("requests"),
        d("bytes_pagecache") / 1e6,
        d("bytes_p2p") / 1e6,
        d("write_requests"),
        d("write_bytes_pagecache") / 1e6,
        d("write_bytes_p2p") / 1e6,
        fallbacks,
    ];
    if name != "system" && row.iter().all(|v| *v == 0.0) {
        return None;
    }
    Some(format!(
        "{name:<10} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
        row[0], row[1], row[2], row[3], row[4], row[5], row[6]
    ))
}

pub fn main(args: &[String]) -> Result<u8, Fail> {
    let mut interval: Option<f64> = None;
    let mut count: Option<u64> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| -> Result<String, Fail> {
            it.next()
                .cloned()
                .ok_or_else(|| Fail(format!("stat: {what} needs a value")))
        };
        match a.as_str() {
            "-i" => {
                let v = value("-i")?;
                let s: f64 = v
                    .parse()
                    .map_err(|_| Fail(format!("stat: -i '{v}': not a number of seconds")))?;
                if !(0.1..=3600.0).contains(&s) {
                    return Err(Fail(format!("stat: -i {s}: between 0.1 and 3600 seconds")));
                }
                interval = Some(s);
            }
            "-c" => {
                let v = value("-c")?;
                let c: u64 = v
                    .parse()
                    .map_err(|_| Fail(format!("stat: -c '{v}': not a count")))?;
                if c == 0 {
                    return Err(Fail("stat: -c 0: the count must be at least 1".into()));
                }
                count = Some(c);
            }
            "-h" | "--help" => {
                println!("usage: spin stat [-i SECS] [-c COUNT]");
                return Ok(0);
            }
            s => return Err(Fail(format!("stat: unknown argument '{s}'"))),
        }
    }
    if count.is_some() && interval.is_none() {
        return Err(Fail("stat: -c needs -i".into()));
    }
    sys::need_spin()?;
    let mut prev = sample()?;
    println!(
        "mode: {}",
        sys::read(Path::new(sys::SPIN_SYS).join("mode"))?
    );
    totals(&prev);
    let Some(secs) = interval else {
        return Ok(0);
    };
    let mut t = Instant::now();
    let mut n = 0;
    while count.is_none_or(|c| n < c) {
        sleep(Duration::from_secs_f64(secs));
        let cur = sample()?;
        let dt = t.elapsed().as_secs_f64();
        t = Instant::now();
        println!(
            "\n{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "device",
            "reads/s",
            "rd_pc_MB",
            "rd_p2p_MB",
            "writes/s",
            "wr_pc_MB",
            "wr_p2p_MB",
            "fallbk/s"
        );
        for (name, c) in &cur {
            let before = prev
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&[][..], |(_, v)| &v[..]);
            if let Some(line) = rates(name, before, c, dt) {
                println!("{line}");
            }
        }
        prev = cur;
        n += 1;
    }
    Ok(0)
}
