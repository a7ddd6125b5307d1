// SPDX-License-Identifier: GPL-2.0

//! spin-replay: what the router's own decisions would cost on real devices.
//!
//! `router_bench` with `router_bench.replay=...` (`make bench-replay`) runs every cell of its
//! matrix once in `auto` mode with the kernel's cost model set to a device model's knobs, and
//! prints what the router did for each request: the `spin_route`, `spin_route_segment` and
//! `spin_readahead` tracepoints, and the page-cache residency of the file when the cell
//! started. This tool charges those exact decisions to the device model and compares them with
//! the two fixed paths under the same model: all by page-cache copy and all by P2P DMA.
//!
//! A request moves `P` bytes by P2P, copies `R` bytes from resident pages and `M` bytes from
//! pages that must first be read from the disk into the page cache. Its time is
//!
//! ```text
//! D(cmds, bytes) = latency * ceil(cmds / queue_depth) + bytes / BW   (device)
//! C = (R + M) / BW_copy + pages * per_page                         (CPU copy into the BAR)
//! T = call + max(D_p2p, C)                                          (M read ahead)
//! T = call + max(D_p2p + D_M, max(R / BW_copy, D_M) + M / BW_copy)  (M read on demand)
//! ```
//!
//! and a cell takes the larger of the sum of its requests' times and the sum of all the work
//! its requests gave the device. Reads ahead run in the background: GPU read-ahead's windows
//! (the `spin_readahead` events) always, and on sequential cells every page-cache miss after
//! the cell's first request (nothing was read ahead before it), of `auto`'s legs and of the
//! page-cache path alike. The page-cache path is so credited with perfect read-ahead on
//! sequential cells, and P2P legs always pay their latency: the router waits for them within
//! the request. Both choices favour the fixed page-cache path, so the ratios shown for `auto`
//! are conservative.
//!
//! A cell is *splittable* if one of its requests spans both resident and missing pages when
//! the cell starts: only there can a split between copy and P2P beat both fixed paths, as a
//! request wholly resident or wholly missing has nothing to split. The summary gives the
//! mixed cells' figures over all of them and over the splittable ones.
//!
//! Usage: spin-replay [--knobs DEVICE] [--devices] FILE...
//!   --knobs DEVICE  print the device's kernel cost model as router_bench.replay takes it
//!   --devices       print the device models
//!   FILE            a router_bench results log with rp-* lines

use std::collections::BTreeMap;
use std::fmt::Write as _;

use spin_core::sched::Params;

const PAGE: u64 = 4096;

/// A real system's costs: an NVMe drive and a GPU behind one PCIe switch.
#[derive(Clone, Copy, Debug)]
struct Device {
    name: &'static str,
    what: &'static str,
    /// Disk reads into host memory, bytes per second.
    disk_bw: f64,
    /// Disk reads into GPU memory (P2P through the switch), bytes per second.
    p2p_bw: f64,
    /// Latency of one command, nanoseconds.
    lat_ns: f64,
    /// Commands in flight together.
    qd: u64,
    /// Largest command, bytes (the queue's max_sectors_kb).
    max_cmd: u64,
    /// CPU copy from the page cache into the GPU BAR (write-combining), bytes per second.
    copy_bw: f64,
    /// Per page copied: page-cache lookup and folio reference, nanoseconds.
    page_ns: f64,
    /// Per call: the system call and the router's entry, nanoseconds.
    call_ns: f64,
}

/// The models of the replay. Their sources: vendors' data sheets for sequential bandwidth and
/// 4 KiB latency of current drives; for CPU copies into a GPU BAR through write-combining,
/// GDRCopy's 6-8 GB/s on PCIe 3 x16, scaled with the link until one core's stores limit it.
const DEVICES: [Device; 2] = [
    Device {
        name: "gen4",
        what: "PCIe 4.0 x4 NVMe (7 GB/s, 70 us), GPU on PCIe 4.0 x16 (WC copy 10 GB/s)",
        disk_bw: 7.0e9,
        p2p_bw: 6.5e9,
        lat_ns: 70_000.0,
        qd: 32,
        max_cmd: 512 << 10,
        copy_bw: 10.0e9,
        page_ns: 100.0,
        call_ns: 2_000.0,
    },
    Device {
        name: "gen5",
        what: "PCIe 5.0 x4 NVMe (14 GB/s, 50 us), GPU on PCIe 5.0 x16 (WC copy 14 GB/s)",
        disk_bw: 14.0e9,
        p2p_bw: 13.0e9,
        lat_ns: 50_000.0,
        qd: 64,
        max_cmd: 512 << 10,
        copy_bw: 14.0e9,
        page_ns: 100.0,
        call_ns: 2_000.0,
    },
];

impl Device {
    fn find(name: &str) -> Option<&'static Device> {
        DEVICES.iter().find(|d| d.name == name)
    }

    /// The kernel's cost model for this device, as `spin calibrate` would fit it:
    /// `[s_cutoff, c_p2p_ns, bw_p2p, bw_pc]`. The device's P2P time is affine in the size
    /// (no flat part), so `S_cutoff` is 0; the page-cache rate includes the per-page cost.
    fn knobs(&self) -> [u64; 4] {
        let bw_pc = PAGE as f64 / (PAGE as f64 / self.copy_bw + self.page_ns * 1e-9);
        [
            0,
            (self.lat_ns + self.call_ns).round() as u64,
            self.p2p_bw.round() as u64,
            bw_pc.round() as u64,
        ]
    }

    /// Device time of `cmds` commands moving `host` bytes into host memory and `p2p` bytes
    /// into GPU memory; `hidden` drops the latency (read-ahead running ahead of the reader).
    fn device_ns(&self, cmds: u64, host: u64, p2p: u64, hidden: bool) -> f64 {
        if cmds == 0 {
            return 0.0;
        }
        let lat = if hidden {
            0.0
        } else {
            self.lat_ns * cmds.div_ceil(self.qd) as f64
        };
        lat + host as f64 / self.disk_bw * 1e9 + p2p as f64 / self.p2p_bw * 1e9
    }

    fn copy_ns(&self, bytes: u64, pages: u64) -> f64 {
        bytes as f64 / self.copy_bw * 1e9 + pages as f64 * self.page_ns
    }

    /// Commands of a contiguous transfer of `bytes`.
    fn cmds(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.max_cmd)
    }
}

/// What one request does, by kind of work.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Work {
    /// Bytes and commands by P2P DMA.
    p2p: u64,
    p2p_cmds: u64,
    /// Bytes copied from resident pages, and those pages.
    res: u64,
    res_pages: u64,
    /// Bytes copied from pages read first, those pages, and their disk commands.
    miss: u64,
    miss_pages: u64,
    miss_cmds: u64,
    /// Pages read ahead (beyond the request) and their commands.
    ra_pages: u64,
    ra_cmds: u64,
}

impl Work {
    /// The request's time and the device time it uses, in nanoseconds; `ahead`: its misses
    /// were read ahead (a sequential cell).
    fn time_ns(&self, dev: &Device, ahead: bool) -> (f64, f64) {
        // Background reads pay bandwidth only: their latency overlaps other work.
        let d_ra = dev.device_ns(self.ra_cmds, self.ra_pages * PAGE, 0, true);
        let d_miss = dev.device_ns(self.miss_cmds, self.miss_pages * PAGE, 0, ahead);
        let d_p2p = dev.device_ns(self.p2p_cmds, 0, self.p2p, false);
        let c_res = dev.copy_ns(self.res, self.res_pages);
        let c_miss = dev.copy_ns(self.miss, self.miss_pages);
        let t = if ahead || self.miss_cmds == 0 {
            d_p2p.max(c_res + c_miss)
        } else {
            // Misses on demand share the queue with the P2P legs and precede their copies.
            let d_sync = dev.device_ns(
                self.miss_cmds + self.p2p_cmds,
                self.miss_pages * PAGE,
                self.p2p,
                false,
            );
            d_sync.max(c_res.max(d_miss) + c_miss)
        };
        (dev.call_ns + t, d_ra + d_miss + d_p2p)
    }
}

/// Time of a cell: its requests one after another, unless the device is busier than that.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    requests: f64,
    device: f64,
}

impl Tally {
    fn add(&mut self, (t, d): (f64, f64)) {
        self.requests += t;
        self.device += d;
    }

    fn seconds(&self) -> f64 {
        self.requests.max(self.device) * 1e-9
    }
}

/// The file's pages in the page cache, as the replay goes.
#[derive(Clone, Debug)]
struct Residency(Vec<bool>);

impl Residency {
    /// From run lengths in pages, `c<N>` resident and `u<N>` not, e.g. `c256,u256`.
    fn parse(runs: &str) -> Result<Self, String> {
        let mut pages = Vec::new();
        for run in runs.split(',').filter(|r| !r.is_empty()) {
            let (cached, n) = match run.split_at(1) {
                ("c", n) => (true, n),
                ("u", n) => (false, n),
                _ => return Err(format!("bad residency run {run:?}")),
            };
            let n: usize = n
                .parse()
                .map_err(|_| format!("bad residency run {run:?}"))?;
            pages.resize(pages.len() + n, cached);
        }
        Ok(Self(pages))
    }

    fn is_resident(&self, page: u64) -> bool {
        self.0.get(page as usize).copied().unwrap_or(false)
    }

    fn set(&mut self, page: u64) {
        let i = page as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, false);
        }
        self.0[i] = true;
    }

    /// Reads `[first, end)` pages in: returns (pages read, commands), marking them resident.
    fn fill(&mut self, dev: &Device, first: u64, end: u64) -> (u64, u64) {
        let (mut pages, mut cmds, mut run) = (0, 0, 0);
        for p in first..end {
            if self.is_resident(p) {
                cmds += dev.cmds(run * PAGE);
                run = 0;
            } else {
                self.set(p);
                pages += 1;
                run += 1;
            }
        }
        (pages, cmds + dev.cmds(run * PAGE))
    }

    /// Charges a page-cache copy of `[pos, pos + len)` to `w`: resident pages are copied,
    /// the others read first (and resident afterwards).
    fn copy(&mut self, dev: &Device, w: &mut Work, pos: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (first, end) = (pos / PAGE, (pos + len).div_ceil(PAGE));
        let mut missing = Vec::new();
        for p in first..end {
            let bytes = (pos + len).min((p + 1) * PAGE) - pos.max(p * PAGE);
            if self.is_resident(p) {
                w.res += bytes;
                w.res_pages += 1;
            } else {
                w.miss += bytes;
                w.miss_pages += 1;
                missing.push(p);
            }
        }
        // Runs of missing pages, each read by its own commands.
        let mut i = 0;
        while i < missing.len() {
            let mut j = i + 1;
            while j < missing.len() && missing[j] == missing[j - 1] + 1 {
                j += 1;
            }
            w.miss_cmds += dev.cmds((j - i) as u64 * PAGE);
            i = j;
        }
        for p in missing {
            self.set(p);
        }
    }
}

/// One event of the trace, in the order the kernel emitted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// A leg: file offset, bytes, by P2P.
    Segment { pos: u64, len: u64, p2p: bool },
    /// GPU read-ahead read pages `[start, start + nr)`.
    Readahead { start: u64, nr: u64 },
}

/// A routed read and what the router did for it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Request {
    pos: u64,
    len: u64,
    events: Vec<Event>,
}

#[derive(Clone, Debug)]
struct Cell {
    device: String,
    sequential: bool,
    size: u64,
    res: u32,
    resident: Residency,
    requests: Vec<Request>,
    /// The bench's count of reads; the trace must hold as many `spin_route` events.
    issued: usize,
}

impl Cell {
    /// Whether a request spans resident and missing pages of the cell's starting residency.
    fn splittable(&self) -> bool {
        self.requests.iter().any(|r| {
            let (first, end) = (r.pos / PAGE, (r.pos + r.len.max(1)).div_ceil(PAGE));
            let resident = (first..end)
                .filter(|&p| self.resident.is_resident(p))
                .count();
            resident != 0 && resident as u64 != end - first
        })
    }

    /// The cell's kind as the report names it.
    fn kind(&self) -> &'static str {
        if self.sequential {
            "sequential"
        } else {
            "random"
        }
    }
}

/// `key=value` of a line of space-separated pairs.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

fn num(line: &str, key: &str) -> Result<u64, String> {
    field(line, key)
        .ok_or_else(|| format!("no {key}= in {line:?}"))?
        .parse()
        .map_err(|_| format!("bad {key}= in {line:?}"))
}

/// Reads the `rp-*` lines of a results log into cells.
fn parse(text: &str) -> Result<Vec<Cell>, String> {
    let mut cells = Vec::new();
    let mut cur: Option<Cell> = None;
    let mut pending = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix("rp-cell ") {
            if cur.is_some() {
                return Err(format!("rp-cell inside a cell: {line:?}"));
            }
            let kind = field(rest, "kind").ok_or("rp-cell without kind=")?;
            cur = Some(Cell {
                device: field(rest, "device")
                    .ok_or("rp-cell without device=")?
                    .into(),
                sequential: match kind {
                    "seq" => true,
                    "rand" => false,
                    _ => return Err(format!("bad kind= in {line:?}")),
                },
                size: num(rest, "size")?,
                res: num(rest, "res")? as u32,
                resident: Residency::parse(field(rest, "resident").unwrap_or(""))?,
                requests: Vec::new(),
                issued: 0,
            });
            pending.clear();
        } else if let Some(rest) = line.strip_prefix("rp-ev ") {
            let cell = cur.as_mut().ok_or("rp-ev outside a cell")?;
            if rest.contains("spin_route_segment:") {
                pending.push(Event::Segment {
                    pos: num(rest, "pos")?,
                    len: num(rest, "len")?,
                    p2p: field(rest, "path") == Some("p2p"),
                });
            } else if rest.contains("spin_readahead:") {
                pending.push(Event::Readahead {
                    start: num(rest, "start")?,
                    nr: num(rest, "nr")?,
                });
            } else if rest.contains("spin_route:") {
                // Legs and read-ahead are traced while the request runs, the request at its end.
                cell.requests.push(Request {
                    pos: num(rest, "pos")?,
                    len: num(rest, "len")?,
                    events: std::mem::take(&mut pending),
                });
            }
        } else if let Some(rest) = line.strip_prefix("rp-end ") {
            let mut cell = cur.take().ok_or("rp-end outside a cell")?;
            cell.issued = num(rest, "requests")? as usize;
            cells.push(cell);
        }
    }
    if cur.is_some() {
        return Err("the log ends inside a cell".into());
    }
    Ok(cells)
}

/// Seconds of the three ways to serve a cell's requests: (auto as traced, page cache, P2P).
fn replay(dev: &Device, cell: &Cell) -> (f64, f64, f64) {
    let (mut auto, mut pc, mut p2p) = (Tally::default(), Tally::default(), Tally::default());
    let mut res_auto = cell.resident.clone();
    let mut res_pc = cell.resident.clone();
    for (i, req) in cell.requests.iter().enumerate() {
        // Nothing was read ahead of a cell's first request.
        let ahead = cell.sequential && i > 0;
        let mut w = Work::default();
        for ev in &req.events {
            match *ev {
                Event::Segment { len, p2p: true, .. } => {
                    w.p2p += len;
                    w.p2p_cmds += dev.cmds(len);
                }
                Event::Segment {
                    pos,
                    len,
                    p2p: false,
                } => {
                    res_auto.copy(dev, &mut w, pos, len);
                }
                Event::Readahead { start, nr } => {
                    let (pages, cmds) = res_auto.fill(dev, start, start + nr);
                    w.ra_pages += pages;
                    w.ra_cmds += cmds;
                }
            }
        }
        auto.add(w.time_ns(dev, ahead));

        let mut w = Work::default();
        res_pc.copy(dev, &mut w, req.pos, req.len);
        pc.add(w.time_ns(dev, ahead));

        let w = Work {
            p2p: req.len,
            p2p_cmds: dev.cmds(req.len),
            ..Work::default()
        };
        p2p.add(w.time_ns(dev, ahead));
    }
    (auto.seconds(), pc.seconds(), p2p.seconds())
}

fn human(size: u64) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// The matrix of one device, and whether its goals are met.
fn report(dev: &Device, cells: &[&Cell], out: &mut String) -> Result<bool, String> {
    if cells.is_empty() {
        return Err(format!("no cells for {}", dev.name));
    }
    let _ = writeln!(out, "\n### {}: {}\n", dev.name, dev.what);
    let k = dev.knobs();
    let _ = writeln!(
        out,
        "Kernel cost model written for the run: s_cutoff={} c_p2p_ns={} bw_p2p={} bw_pc={}.\n",
        k[0], k[1], k[2], k[3]
    );
    let _ = writeln!(
        out,
        "| kind | size | resident | requests | auto MB/s | p2p MB/s | pagecache MB/s | \
         auto / best fixed | auto by P2P |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let (mut min_all, mut min_mixed, mut lg_mixed, mut n_mixed) = (f64::MAX, f64::MAX, 0.0, 0);
    let (mut min_split, mut lg_split, mut n_split) = (f64::MAX, 0.0, 0);
    for cell in cells {
        if cell.requests.len() != cell.issued {
            return Err(format!(
                "{} {} {}%: the trace holds {} of {} requests (trace buffer too small?)",
                cell.kind(),
                cell.size,
                cell.res,
                cell.requests.len(),
                cell.issued
            ));
        }
        let bytes: u64 = cell.requests.iter().map(|r| r.len).sum();
        let p2p_bytes: u64 = cell
            .requests
            .iter()
            .flat_map(|r| &r.events)
            .map(|e| match *e {
                Event::Segment { len, p2p: true, .. } => len,
                _ => 0,
            })
            .sum();
        let (ta, tc, tp) = replay(dev, cell);
        let rate = |t: f64| bytes as f64 / t / 1e6;
        let ratio = tc.min(tp) / ta;
        min_all = min_all.min(ratio);
        if cell.res > 0 && cell.res < 100 {
            min_mixed = min_mixed.min(ratio);
            lg_mixed += ratio.ln();
            n_mixed += 1;
            if cell.splittable() {
                min_split = min_split.min(ratio);
                lg_split += ratio.ln();
                n_split += 1;
            }
        }
        let _ = writeln!(
            out,
            "| {} | {} | {}% | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0}% |",
            cell.kind(),
            human(cell.size),
            cell.res,
            cell.requests.len(),
            rate(ta),
            rate(tp),
            rate(tc),
            ratio,
            100.0 * p2p_bytes as f64 / bytes.max(1) as f64
        );
    }
    let gm = if n_mixed > 0 {
        (lg_mixed / n_mixed as f64).exp()
    } else {
        f64::NAN
    };
    let gm_split = if n_split > 0 {
        (lg_split / n_split as f64).exp()
    } else {
        f64::NAN
    };
    let ok = min_all >= 0.97 && n_mixed > 0 && min_mixed >= 1.2;
    let _ = writeln!(
        out,
        "\n{}: {} cells; auto / best fixed: min {:.2} (goal >= 0.97); mixed cells ({}): \
         min {:.2}, geometric mean {:.2} (goal >= 1.2): {}",
        dev.name,
        cells.len(),
        min_all,
        n_mixed,
        if n_mixed > 0 { min_mixed } else { f64::NAN },
        gm,
        if ok { "met" } else { "NOT met" }
    );
    let _ = writeln!(
        out,
        "{}: splittable mixed cells ({}): min {:.2}, geometric mean {:.2}",
        dev.name,
        n_split,
        if n_split > 0 { min_split } else { f64::NAN },
        gm_split
    );
    let _ = writeln!(
        out,
        "rp-summary device={} cells={} min={:.4} mixed={} mixed_min={:.4} mixed_geomean={:.4} \
         split={} split_min={:.4} split_geomean={:.4} met={}",
        dev.name,
        cells.len(),
        min_all,
        n_mixed,
        min_mixed,
        gm,
        n_split,
        min_split,
        gm_split,
        ok as u8
    );
    Ok(ok)
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--knobs") => {
            let dev = args
                .get(1)
                .and_then(|n| Device::find(n))
                .ok_or("--knobs needs a device: gen4 or gen5")?;
            let k = dev.knobs();
            Params::new(PAGE as u32, k[0], k[1], k[2], k[3])
                .map_err(|e| format!("{}: the kernel would refuse {k:?}: {e:?}", dev.name))?;
            println!("{}:{}:{}:{}", k[0], k[1], k[2], k[3]);
            return Ok(());
        }
        Some("--devices") => {
            for d in &DEVICES {
                println!("{}: {}", d.name, d.what);
            }
            return Ok(());
        }
        Some(a) if a.starts_with('-') => return Err(format!("unknown argument {a}")),
        None => return Err("usage: spin-replay [--knobs DEVICE] [--devices] FILE...".into()),
        _ => {}
    }
    let mut cells = Vec::new();
    for f in &args {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?;
        cells.extend(parse(&text).map_err(|e| format!("{f}: {e}"))?);
    }
    let mut by_dev: BTreeMap<&str, Vec<&Cell>> = BTreeMap::new();
    for c in &cells {
        by_dev.entry(c.device.as_str()).or_default().push(c);
    }
    if by_dev.is_empty() {
        return Err("no rp-cell lines: run router_bench with router_bench.replay=...".into());
    }
    let mut out = String::from("## spin-replay: the router's decisions on real devices' costs\n");
    for (name, cells) in &by_dev {
        let dev = Device::find(name).ok_or_else(|| format!("unknown device {name}"))?;
        report(dev, cells, &mut out)?;
    }
    print!("{out}");
    Ok(())
}

/// Exits 2 on a log it cannot use; goals not met are reported, not an error.
fn main() {
    match run() {
        Ok(()) => {}
        Err(e) => {
            eprintln!("spin-replay: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEN4: &Device = &DEVICES[0];

    #[test]
    fn knobs_are_valid_kernel_models() {
        for d in &DEVICES {
            let k = d.knobs();
            assert!(
                Params::new(PAGE as u32, k[0], k[1], k[2], k[3]).is_ok(),
                "{}",
                d.name
            );
        }
    }

    #[test]
    fn residency_runs() {
        let r = Residency::parse("c2,u1,c1").unwrap();
        assert_eq!(r.0, vec![true, true, false, true]);
        assert!(Residency::parse("x3").is_err());
        assert!(!r.is_resident(100));
    }

    #[test]
    fn copy_splits_resident_and_missing_pages() {
        let mut r = Residency::parse("c1,u2,c1").unwrap();
        let mut w = Work::default();
        // Bytes 2048 .. 14336: half of page 0, pages 1 and 2, half of page 3.
        r.copy(GEN4, &mut w, 2048, 12288);
        assert_eq!((w.res, w.res_pages), (4096, 2));
        assert_eq!((w.miss, w.miss_pages, w.miss_cmds), (8192, 2, 1));
        // Read in: a second copy finds everything resident.
        let mut w = Work::default();
        r.copy(GEN4, &mut w, 0, 4 * PAGE);
        assert_eq!((w.res, w.miss), (4 * PAGE, 0));
    }

    #[test]
    fn fill_counts_commands_per_run() {
        let mut r = Residency::parse("u1,c1,u1").unwrap();
        assert_eq!(r.fill(GEN4, 0, 4), (3, 2));
        assert_eq!(r.fill(GEN4, 0, 4), (0, 0));
    }

    #[test]
    fn times_follow_the_formula() {
        let d = GEN4;
        // 1 MiB by P2P: two commands in one queue round.
        let w = Work {
            p2p: 1 << 20,
            p2p_cmds: 2,
            ..Work::default()
        };
        let dev = d.lat_ns + (1 << 20) as f64 / d.p2p_bw * 1e9;
        let (t, busy) = w.time_ns(d, false);
        assert!((t - d.call_ns - dev).abs() < 1e-6 && (busy - dev).abs() < 1e-6);
        // 1 MiB resident: the copy alone.
        let w = Work {
            res: 1 << 20,
            res_pages: 256,
            ..Work::default()
        };
        let want = d.call_ns + (1 << 20) as f64 / d.copy_bw * 1e9 + 256.0 * d.page_ns;
        assert!((w.time_ns(d, true).0 - want).abs() < 1e-6);
        assert_eq!(w.time_ns(d, true).1, 0.0);
        // A random miss waits for the disk before it copies.
        let w = Work {
            miss: PAGE,
            miss_pages: 1,
            miss_cmds: 1,
            ..Work::default()
        };
        assert!(w.time_ns(d, false).0 > d.call_ns + d.lat_ns);
        // A sequential one is read ahead: no latency, the disk's time counted for the cell.
        let (t, busy) = w.time_ns(d, true);
        assert!(t < d.call_ns + d.lat_ns);
        assert!((busy - PAGE as f64 / d.disk_bw * 1e9).abs() < 1e-6);
        // A cell whose device is busier than its requests take is the device's time.
        let mut cell = Tally::default();
        cell.add((1.0, 5.0));
        cell.add((1.0, 0.0));
        assert_eq!(cell.seconds(), 5e-9);
    }

    /// Two requests of a sequential cell: a 2 MiB read half resident, split, which starts
    /// GPU read-ahead of the next 128 KiB; then that 128 KiB, copied.
    const LOG: &str = "\
rb-header kernel=x\n\
rp-cell device=gen4 kind=seq size=2097152 res=50 resident=c256,u256\n\
rp-ev r-1 [000] ..... 1.0: spin_route_segment: dev=259:2 ino=12 pos=0 len=1048576 path=pagecache\n\
rp-ev r-1 [000] ..... 1.1: spin_route_segment: dev=259:2 ino=12 pos=1048576 len=1048576 path=p2p\n\
rp-ev r-1 [000] ..... 1.2: spin_readahead: dev=259:2 ino=12 start=512 nr=32 admitted=32 evicted=0\n\
rp-ev r-1 [000] ..... 1.3: spin_route: dev=259:2 ino=12 pos=0 len=2097152 mode=auto reason=none pagecache=1048576 p2p=1048576 segs=2 member=259:2\n\
rp-ev r-1 [000] ..... 1.4: spin_route_segment: dev=259:2 ino=12 pos=2097152 len=131072 path=pagecache\n\
rp-ev r-1 [000] ..... 1.5: spin_route: dev=259:2 ino=12 pos=2097152 len=131072 mode=auto reason=none pagecache=131072 p2p=0 segs=1 member=259:2\n\
rp-end requests=2\n";

    #[test]
    fn parses_a_log() {
        let cells = parse(LOG).unwrap();
        assert_eq!(cells.len(), 1);
        let c = &cells[0];
        assert!(c.sequential);
        assert_eq!((c.size, c.res, c.issued), (2 << 20, 50, 2));
        assert_eq!(c.requests.len(), 2);
        assert_eq!((c.requests[1].pos, c.requests[1].len), (2 << 20, 128 << 10));
        assert_eq!(
            c.requests[0].events,
            vec![
                Event::Segment {
                    pos: 0,
                    len: 1 << 20,
                    p2p: false
                },
                Event::Segment {
                    pos: 1 << 20,
                    len: 1 << 20,
                    p2p: true
                },
                Event::Readahead { start: 512, nr: 32 },
            ]
        );
        assert!(parse("rp-ev x\n").is_err());
        assert!(parse("rp-cell device=gen4 kind=seq size=1 res=0\n").is_err());
    }

    #[test]
    fn splittable_cells_span_resident_and_missing_pages() {
        let cells = parse(LOG).unwrap();
        // The first request covers the resident and the missing half.
        assert!(cells[0].splittable());
        let mut c = cells[0].clone();
        c.requests.remove(0);
        // 128 KiB past the file's 2 MiB: none of it resident.
        assert!(!c.splittable());
        c.resident = Residency::parse("c1024").unwrap();
        assert!(!c.splittable());
    }

    #[test]
    fn a_cells_first_misses_pay_their_latency() {
        // One uncached 128 KiB read of a sequential cell, through the page cache: its misses
        // were read ahead only if a request came before it.
        let log = "\
rp-cell device=gen4 kind=seq size=131072 res=0 resident=\n\
rp-ev r-1 [000] ..... 1.0: spin_route_segment: dev=259:2 ino=12 pos=0 len=131072 path=pagecache\n\
rp-ev r-1 [000] ..... 1.1: spin_route: dev=259:2 ino=12 pos=0 len=131072 mode=auto reason=none pagecache=131072 p2p=0 segs=1 member=259:2\n\
rp-ev r-1 [000] ..... 1.2: spin_route_segment: dev=259:2 ino=12 pos=131072 len=131072 path=pagecache\n\
rp-ev r-1 [000] ..... 1.3: spin_route: dev=259:2 ino=12 pos=131072 len=131072 mode=auto reason=none pagecache=131072 p2p=0 segs=1 member=259:2\n\
rp-end requests=2\n";
        let cells = parse(log).unwrap();
        let (auto, pc, _) = replay(GEN4, &cells[0]);
        assert_eq!(auto, pc);
        let mut one = cells[0].clone();
        one.requests.truncate(1);
        let (first, _, _) = replay(GEN4, &one);
        // The first request waits for the disk; the second, read ahead, does not.
        assert!(first * 1e9 > GEN4.lat_ns);
        assert!((auto - first) * 1e9 < GEN4.lat_ns);
    }

    #[test]
    fn the_split_beats_both_fixed_paths() {
        // Copying the resident half while P2P reads the other is faster than either fixed
        // path on a device where the two rates are of one order; the read-ahead window is
        // charged to the device once and then copied as resident.
        let cells = parse(LOG).unwrap();
        let (auto, pc, p2p) = replay(GEN4, &cells[0]);
        assert!(auto < pc && auto < p2p, "auto {auto} pc {pc} p2p {p2p}");
        let mut r = cells[0].resident.clone();
        let mut w = Work::default();
        r.fill(GEN4, 512, 544);
        r.copy(GEN4, &mut w, 2 << 20, 128 << 10);
        assert_eq!(w.miss, 0);
    }

    #[test]
    fn lost_events_are_refused() {
        let log = LOG.replace("requests=2", "requests=3");
        let cells = parse(&log).unwrap();
        let refs: Vec<&Cell> = cells.iter().collect();
        assert!(report(GEN4, &refs, &mut String::new()).is_err());
    }
}
