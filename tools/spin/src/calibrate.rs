// SPDX-License-Identifier: GPL-2.0

//! `spin calibrate DISK|FILE [--apply] [--png FILE] [--reps N] [--provider PCI]`: fits the
//! router's cost model (SPIN section 4.3.1, Eq. 1) to this machine, with GPU memory of the
//! given provider (default: the reachable one with the most p2pdma memory).
//!
//! P2P reads are measured as `O_DIRECT` reads into GPU memory (the path a routed P2P leg takes),
//! page-cache copies as buffered reads of cached data into GPU memory (which the router
//! copies), over sizes of 4 KiB to 8 MiB at random aligned offsets. The fit is `calib.rs`, which
//! the host crate `tools/testing/spin/core` compiles and tests too (one source): Eq. 1 by
//! weighted least squares over the breakpoint, and the page-cache bandwidth through the origin.

use crate::calib::{fit_p2p, fit_pc, P2pFit, PcFit, Sample};
use crate::check;
use crate::png::Canvas;
use crate::sched::{MAX_OVERLAP, NO_OVERLAP};
use crate::sys;
use crate::Fail;
use std::ffi::c_void;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::raw::{c_int, c_ulong};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const MAX_SIZE: u64 = 8 * MIB;
const PAGE: u32 = 4096;
/// Untimed reads before each size's P2P measurement, in milliseconds.
const WARM_MS: u128 = 250;
/// Timed reads of each size for at least this long, in milliseconds.
const MEASURE_MS: u128 = 150;

extern "C" {
    fn ioctl(fd: c_int, req: c_ulong, ...) -> c_int;
    fn mmap(
        addr: *mut c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        off: i64,
    ) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
}

/// `struct dma_heap_allocation_data`.
#[repr(C)]
struct HeapAlloc {
    len: u64,
    fd: u32,
    fd_flags: u32,
    heap_flags: u64,
}

/// `DMA_HEAP_IOCTL_ALLOC`: `_IOWR('H', 0, struct dma_heap_allocation_data)`.
const DMA_HEAP_IOCTL_ALLOC: c_ulong = 0xc018_4800;

/// A mapped buffer of GPU memory from a provider's spin heap.
struct GpuBuffer {
    _fd: File,
    ptr: *mut u8,
    len: usize,
}

impl GpuBuffer {
    fn new(pci: &str, len: usize) -> Result<Self, Fail> {
        let heap_path = format!("/dev/dma_heap/p2p-{pci}");
        let heap = File::open(&heap_path)
            .map_err(|e| Fail(format!("calibrate: {heap_path}: {e} (no GPU memory)")))?;
        let mut a = HeapAlloc {
            len: len as u64,
            fd: 0,
            fd_flags: 0o2 | 0o2000000, // O_RDWR | O_CLOEXEC
            heap_flags: 0,
        };
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: `a` is a `struct dma_heap_allocation_data` the ioctl reads and fills.
        if unsafe { ioctl(heap.as_raw_fd(), DMA_HEAP_IOCTL_ALLOC, &mut a) } != 0 {
            return Err(Fail(format!(
                "calibrate: allocating {len} bytes of GPU memory from {heap_path}: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: The ioctl returned a new file descriptor that nothing else owns.
        let fd = unsafe { File::from_raw_fd(a.fd as c_int) };
        // SAFETY: Maps `len` bytes of the dma-buf, shared, readable and writable; the result
        // is checked before use.
        let p = unsafe { mmap(std::ptr::null_mut(), len, 3, 1, fd.as_raw_fd(), 0) };
        if p as isize == -1 {
            return Err(Fail(format!(
                "calibrate: mapping GPU memory: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(GpuBuffer {
            _fd: fd,
            ptr: p.cast(),
            len,
        })
    }

    fn slice(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: `ptr` maps `self.len` bytes for as long as `self` lives; the borrow of
        // `self` keeps the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.len)) }
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are the mapping made in `new`, unmapped once.
        unsafe { munmap(self.ptr.cast(), self.len) };
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A random offset aligned to `s` with a whole read of `s` bytes below `size`.
    fn offset(&mut self, size: u64, s: u64) -> u64 {
        self.next() % (size / s - 1) * s
    }
}

/// Untimed `O_DIRECT` reads of `buf.len()` bytes at random offsets for [`WARM_MS`]: a device,
/// or a throttle, that lets a burst through fast must not pass for a faster one.
fn warm_up(direct: &File, buf: &mut [u8], size: u64, rng: &mut Rng) -> Result<(), Fail> {
    let t0 = Instant::now();
    while t0.elapsed().as_millis() < WARM_MS {
        let off = rng.offset(size, buf.len() as u64);
        timed_read(direct, buf, off, "O_DIRECT")?;
    }
    Ok(())
}

/// Progress on standard error: a bar on a terminal, else a line per step.
fn progress(done: usize, total: usize, what: &str) {
    use std::io::IsTerminal;
    let pct = done * 100 / total.max(1);
    if !std::io::stderr().is_terminal() {
        eprintln!("{what}: {pct}%");
        return;
    }
    let w = 30;
    let f = done * w / total.max(1);
    eprint!("\r{what} [{}{}] {pct:3}%", "#".repeat(f), ".".repeat(w - f));
    if done == total {
        eprintln!();
    }
}

/// Reads `buf.len()` bytes at `off` of `f`; the nanoseconds it took.
fn timed_read(f: &File, buf: &mut [u8], off: u64, what: &str) -> Result<f64, Fail> {
    let t = Instant::now();
    let got = f.read_at(buf, off)?;
    let ns = t.elapsed().as_nanos() as f64;
    if got != buf.len() {
        return Err(Fail(format!(
            "calibrate: short {what} read ({got} of {})",
            buf.len()
        )));
    }
    Ok(ns)
}

/// Readers in flight together in [`queue_overlap`].
const QD: usize = 8;
/// Size of their reads.
const QD_SIZE: u64 = 4 * KIB;
/// Reads per reader.
const QD_READS: usize = 32;
/// Rounds of [`queue_overlap`], one reader and [`QD`] readers alternating; the median counts.
const QD_ROUNDS: usize = 5;
/// A measured overlap below this is taken as none: one reader and eight readers of a device
/// that serves one read at a time measured 0.87x-1.35x apart in a debug guest.
const QD_NOISE: f64 = 1.2;

/// Time per small P2P read with [`QD`] readers in flight together and with one.
struct Overlap {
    together_ns: f64,
    alone_ns: f64,
}

impl Overlap {
    /// How much faster reads in flight together go: 1 if the device serves them one after
    /// another.
    fn factor(&self) -> f64 {
        self.alone_ns / self.together_ns.max(1.0)
    }

    /// The cost model's `p2p_overlap` (percent) for this measurement: with `O` the overlap, the
    /// model has [`QD`] small reads take `C_p2p * (1 + (QD - 1) / O)`, so a measured factor
    /// `R` gives `O = (QD - 1) * R / (QD - R)`. Below [`QD_NOISE`] it is none.
    fn percent(&self) -> u32 {
        let r = self.factor();
        let qd = QD as f64;
        if r < QD_NOISE {
            return NO_OVERLAP;
        }
        if r >= qd {
            return MAX_OVERLAP;
        }
        let o = (qd - 1.0) * r / (qd - r) * 100.0;
        (o.round() as u32).clamp(NO_OVERLAP, MAX_OVERLAP)
    }
}

/// Measures whether the device overlaps P2P reads in flight together (NVMe queue depth):
/// [`QD`] threads each read [`QD_READS`] times [`QD_SIZE`] bytes by `O_DIRECT` into their own
/// part of `gpu`, against one thread reading as many one after another; both after
/// [`WARM_MS`] of untimed reads. [`QD_ROUNDS`] rounds; the round of the median factor counts.
fn queue_overlap(
    direct: &File,
    gpu: &mut GpuBuffer,
    size: u64,
    rng: &mut Rng,
) -> Result<Overlap, Fail> {
    let buf = gpu.slice(QD * QD_SIZE as usize);
    warm_up(direct, &mut buf[..QD_SIZE as usize], size, rng)?;
    let mut rounds = Vec::with_capacity(QD_ROUNDS);
    for _ in 0..QD_ROUNDS {
        rounds.push(overlap_round(direct, buf, size, rng)?);
    }
    rounds.sort_by(|a, b| a.factor().total_cmp(&b.factor()));
    Ok(rounds.swap_remove(QD_ROUNDS / 2))
}

/// One round of [`queue_overlap`].
fn overlap_round(direct: &File, buf: &mut [u8], size: u64, rng: &mut Rng) -> Result<Overlap, Fail> {
    let n = QD * QD_READS;
    let offs: Vec<u64> = (0..n).map(|_| rng.offset(size, QD_SIZE)).collect();
    let t = Instant::now();
    for &off in &offs {
        timed_read(direct, &mut buf[..QD_SIZE as usize], off, "O_DIRECT")?;
    }
    let alone_ns = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    let results: Vec<Result<(), Fail>> = std::thread::scope(|sc| {
        let readers: Vec<_> = buf
            .chunks_mut(QD_SIZE as usize)
            .zip(offs.chunks(QD_READS))
            .map(|(part, mine)| {
                sc.spawn(move || {
                    for &off in mine {
                        timed_read(direct, part, off, "O_DIRECT")?;
                    }
                    Ok(())
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Fail("calibrate: a reader panicked".into())))
            })
            .collect()
    });
    let together_ns = t.elapsed().as_nanos() as f64 / n as f64;
    results.into_iter().collect::<Result<(), Fail>>()?;
    Ok(Overlap {
        together_ns,
        alone_ns,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn model_p2p(f: &P2pFit, s: f64) -> f64 {
    if s <= f.s_cutoff {
        f.c_ns
    } else {
        f.c_ns + (s - f.s_cutoff) / f.bw * 1e9
    }
}

fn model_pc(f: &PcFit, s: f64) -> f64 {
    s / f.bw * 1e9
}

/// The plot: times against sizes, log-log, measurements as dots and the model as lines.
fn plot(p2p: &[Sample], pc: &[Sample], fp: &P2pFit, fc: &PcFit) -> Vec<u8> {
    let (w, h, m) = (800i64, 500i64, 50i64);
    let mut c = Canvas::new(w as usize, h as usize);
    let all = p2p.iter().chain(pc);
    let (x0, x1) = (12.0f64, (MAX_SIZE as f64).log2());
    let ys: Vec<f64> = all.map(|s| s.ns.max(1.0).log10()).collect();
    let y0 = ys.iter().copied().fold(f64::MAX, f64::min).floor();
    let y1 = ys
        .iter()
        .copied()
        .fold(f64::MIN, f64::max)
        .ceil()
        .max(y0 + 1.0);
    let px = |s: f64| m + ((s.log2() - x0) / (x1 - x0) * (w - 2 * m) as f64) as i64;
    let py = |t: f64| h - m - ((t.max(1.0).log10() - y0) / (y1 - y0) * (h - 2 * m) as f64) as i64;
    let grey = [160, 160, 160];
    c.line(m, h - m, w - m, h - m, [0, 0, 0]);
    c.line(m, m, m, h - m, [0, 0, 0]);
    for e in 12..=23 {
        let x = px((1u64 << e) as f64);
        c.line(x, h - m, x, h - m + 5, [0, 0, 0]);
    }
    let mut d = y0;
    while d <= y1 {
        let y = py(10f64.powf(d));
        c.line(m - 5, y, w - m, y, grey);
        d += 1.0;
    }
    let (red, blue) = ([200, 30, 30], [30, 60, 200]);
    let mut prev: Option<(i64, i64, i64, i64)> = None;
    for i in 0..=200 {
        let s = 2f64.powf(x0 + (x1 - x0) * f64::from(i) / 200.0);
        let (a, b) = (py(model_p2p(fp, s)), py(model_pc(fc, s)));
        let x = px(s);
        if let Some((lx, la, _, lb)) = prev {
            c.line(lx, la, x, a, red);
            c.line(lx, lb, x, b, blue);
        }
        prev = Some((x, a, x, b));
    }
    for s in p2p {
        c.dot(px(s.bytes), py(s.ns), 2, red);
    }
    for s in pc {
        c.dot(px(s.bytes), py(s.ns), 2, blue);
    }
    c.png()
}

pub fn main(args: &[String]) -> Result<u8, Fail> {
    let (mut apply, mut png, mut reps, mut target) = (false, None, 5usize, None);
    let mut provider: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--apply" => apply = true,
            "--png" => {
                png = Some(
                    it.next()
                        .ok_or_else(|| Fail("calibrate: --png needs a file name".into()))?
                        .clone(),
                )
            }
            "--provider" => {
                provider = Some(
                    it.next()
                        .ok_or_else(|| Fail("calibrate: --provider needs a PCI address".into()))?
                        .clone(),
                )
            }
            "--reps" => {
                let v = it
                    .next()
                    .ok_or_else(|| Fail("calibrate: --reps needs a number".into()))?;
                reps = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=100).contains(n))
                    .ok_or_else(|| Fail(format!("calibrate: --reps '{v}': 1 to 100")))?;
            }
            "-h" | "--help" => {
                println!(
                    "usage: spin calibrate DISK|FILE [--apply] [--png FILE] [--reps N] \
                     [--provider PCI]"
                );
                return Ok(0);
            }
            s if s.starts_with('-') => {
                return Err(Fail(format!("calibrate: unknown option '{s}'")))
            }
            s if target.is_none() => target = Some(s.to_string()),
            s => return Err(Fail(format!("calibrate: one DISK or FILE only ('{s}')"))),
        }
    }
    let target = target.ok_or_else(|| Fail("calibrate: which DISK or FILE?".into()))?;
    sys::need_spin()?;
    let mode = sys::read(Path::new(sys::SPIN_SYS).join("mode"))?;
    if mode == "p2p" {
        return Err(Fail(
            "calibrate: /sys/kernel/spin/mode is p2p, so cached reads would not be copied; \
             set it to auto while calibrating"
                .into(),
        ));
    }
    // A disk name, a block device or a regular file.
    let path = if target.contains('/') {
        target.clone()
    } else {
        format!("/dev/{target}")
    };
    let meta = fs::metadata(&path).map_err(|e| Fail(format!("calibrate: {path}: {e}")))?;
    let (disk, size) = if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        let (maj, min) = (
            ((rdev >> 8) & 0xfff) as u32,
            ((rdev & 0xff) | ((rdev >> 12) & 0xfff00)) as u32,
        );
        let disk = sys::disk_of(maj, min)
            .ok_or_else(|| Fail(format!("calibrate: {path}: no disk in /sys/dev/block")))?;
        let f = File::open(&path)?;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        let size = if size == 0 {
            sys::read_u64(format!("/sys/dev/block/{maj}:{min}/size")).unwrap_or(0) * 512
        } else {
            size
        };
        (disk, size)
    } else if meta.is_file() {
        match check::file_reason(&path) {
            (_, Some((reason, detail))) => {
                return Err(Fail(format!(
                    "calibrate: {path}: P2P is impossible for this file: {reason}: {detail}"
                )))
            }
            (Some(d), None) => (d, meta.len()),
            (None, None) => return Err(Fail(format!("calibrate: {path}: no disk found"))),
        }
    } else {
        return Err(Fail(format!(
            "calibrate: {path}: not a block device or regular file"
        )));
    };
    if size < 2 * MAX_SIZE {
        return Err(Fail(format!(
            "calibrate: {path} has {size} bytes; at least {} MiB are needed",
            2 * MAX_SIZE / MIB
        )));
    }
    let pci = check::usable_provider(&disk, provider.as_deref()).map_err(|why| {
        Fail(format!(
            "calibrate: no P2P between {disk} and GPU memory: {why}"
        ))
    })?;
    let mut gpu = GpuBuffer::new(&pci, MAX_SIZE as usize)?;
    let direct = OpenOptions::new()
        .read(true)
        .custom_flags(0o40000)
        .open(&path)
        .map_err(|e| Fail(format!("calibrate: {path}: O_DIRECT: {e}")))?;
    let buffered = File::open(&path)?;
    let mut host = vec![0u8; MAX_SIZE as usize];

    println!(
        "calibrating {disk} ({path}, {} MiB) with GPU memory of {pci}: 4 KiB to {} MiB, per \
         size {reps} copies and {WARM_MS} ms of untimed then {MEASURE_MS} ms (at least 2 x \
         {reps}) of timed back-to-back P2P reads",
        size / MIB,
        MAX_SIZE / MIB
    );
    let sizes: Vec<u64> = (12..=23).map(|e| 1u64 << e).collect();
    let total = sizes.len() * 2;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut p2p, mut pc) = (Vec::new(), Vec::new());
    for (i, &s) in sizes.iter().enumerate() {
        // P2P: back-to-back reads of this size, untimed for WARM_MS first, then timed for at
        // least MEASURE_MS and 2 * reps reads; their median.
        warm_up(&direct, gpu.slice(s as usize), size, &mut rng)?;
        let t0 = Instant::now();
        let mut tp = Vec::new();
        while tp.len() < 2 * reps || (t0.elapsed().as_millis() < MEASURE_MS && tp.len() < 4096) {
            let off = rng.offset(size, s);
            tp.push(timed_read(&direct, gpu.slice(s as usize), off, "O_DIRECT")?);
        }
        progress(2 * i + 1, total, "measuring");
        // Copies: a range read into host memory (so it is cached), then into GPU memory.
        let mut tc = Vec::with_capacity(reps);
        for _ in 0..reps {
            let off = rng.offset(size, s);
            buffered.read_at(&mut host[..s as usize], off)?;
            tc.push(timed_read(
                &buffered,
                gpu.slice(s as usize),
                off,
                "buffered",
            )?);
        }
        progress(2 * i + 2, total, "measuring");
        p2p.push(Sample {
            bytes: s as f64,
            ns: median(&mut tp),
        });
        pc.push(Sample {
            bytes: s as f64,
            ns: median(&mut tc),
        });
    }
    let overlap = queue_overlap(&direct, &mut gpu, size, &mut rng)?;
    let mut p2p_fit_in = p2p.clone();
    let fp = fit_p2p(&mut p2p_fit_in)
        .ok_or_else(|| Fail("calibrate: the P2P measurements admit no fit".into()))?;
    let fc = fit_pc(&pc).ok_or_else(|| Fail("calibrate: the copies admit no fit".into()))?;
    let params = fp
        .params(PAGE, &fc)
        .and_then(|p| p.with_overlap(overlap.percent()))
        .map_err(|e| {
            Fail(format!(
                "calibrate: the fit gives no valid parameters: {e:?}"
            ))
        })?;

    println!("\n    size   P2P us  model  resid   copy us  model  resid");
    for (a, b) in p2p.iter().zip(&pc) {
        let (ma, mb) = (model_p2p(&fp, a.bytes), model_pc(&fc, b.bytes));
        println!(
            "{:>8} {:>8.1} {:>6.1} {:>5.1}% {:>9.1} {:>6.1} {:>5.1}%",
            if a.bytes >= MIB as f64 {
                format!("{}M", a.bytes as u64 / MIB)
            } else {
                format!("{}K", a.bytes as u64 / KIB)
            },
            a.ns / 1e3,
            ma / 1e3,
            (a.ns - ma) / ma * 100.0,
            b.ns / 1e3,
            mb / 1e3,
            (b.ns - mb) / mb * 100.0
        );
    }
    println!(
        "\nP2P (Eq. 1): C_p2p {:.1} us, S_cutoff {} KiB, BW_p2p {:.1} MB/s, R^2 {:.4}{}",
        fp.c_ns / 1e3,
        fp.s_cutoff as u64 / KIB,
        fp.bw / 1e6,
        fp.r2,
        if fp.constrained {
            " (on the constraint C >= S / BW)"
        } else {
            ""
        }
    );
    println!(
        "page cache: BW_pc {:.1} MB/s, R^2 {:.4}",
        fc.bw / 1e6,
        fc.r2
    );
    println!(
        "legs in flight together: {QD} readers of {} KiB: {:.1} us per read, one reader \
         {:.1} us: overlap {:.2}x, p2p_overlap {} ({})",
        QD_SIZE / KIB,
        overlap.together_ns / 1e3,
        overlap.alone_ns / 1e3,
        overlap.factor(),
        params.overlap(),
        if overlap.factor() < QD_NOISE {
            format!("below {QD_NOISE}x: taken as none, legs one after another")
        } else {
            "the model charges each leg of a request part of C_p2p".into()
        }
    );
    let vals = [
        ("s_cutoff", params.s_cutoff()),
        ("c_p2p_ns", params.c_p2p_ns()),
        ("bw_p2p", params.bw_p2p()),
        ("bw_pc", params.bw_pc()),
        ("p2p_overlap", params.overlap().into()),
    ];
    println!(
        "parameters: {}",
        vals.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if let Some(out) = png {
        fs::write(&out, plot(&p2p, &pc, &fp, &fc))
            .map_err(|e| Fail(format!("calibrate: writing {out}: {e}")))?;
        println!("plot: {out} (red: P2P, blue: page-cache copies; dots measured, lines the model)");
    }
    if apply {
        let dir = Path::new("/sys/block").join(&disk).join("spin");
        // Every step keeps the set consistent (C_p2p >= S_cutoff / BW_p2p): the overhead
        // goes up first and to its value last.
        let steps = [
            ("c_p2p_ns", 1_000_000_000),
            ("s_cutoff", params.s_cutoff()),
            ("bw_p2p", params.bw_p2p()),
            ("bw_pc", params.bw_pc()),
            ("p2p_overlap", params.overlap().into()),
            ("c_p2p_ns", params.c_p2p_ns()),
        ];
        for (k, v) in steps {
            let mut f = OpenOptions::new()
                .write(true)
                .open(dir.join(k))
                .map_err(|e| Fail(format!("calibrate: {}: {e}", dir.join(k).display())))?;
            f.write_all(format!("{v}\n").as_bytes())
                .map_err(|e| Fail(format!("calibrate: writing {v} to {k}: {e}")))?;
        }
        for (k, v) in vals {
            if sys::read_u64(dir.join(k)) != Some(v) {
                return Err(Fail(format!("calibrate: {k} does not read back {v}")));
            }
        }
        println!("applied to {}", dir.display());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(alone_ns: f64, together_ns: f64) -> Overlap {
        Overlap {
            together_ns,
            alone_ns,
        }
    }

    #[test]
    fn overlap_percent_inverts_the_model() {
        // Noise and slower reads in flight together: none.
        assert_eq!(measured(495.0, 508.0).percent(), NO_OVERLAP);
        assert_eq!(measured(119.0, 100.0).percent(), NO_OVERLAP);
        // R = 1.35 gives O = 7 * 1.35 / 6.65 = 1.421.
        assert_eq!(measured(135.0, 100.0).percent(), 142);
        // R = 4: 8 reads take 2 reads' time, C * (1 + 7 / O) = 2 C, O = 7.
        assert_eq!(measured(400.0, 100.0).percent(), 700);
        // At or beyond QD, the measurement cannot tell: the largest overlap.
        assert_eq!(measured(800.0, 100.0).percent(), MAX_OVERLAP);
        assert_eq!(measured(790.0, 100.0).percent(), MAX_OVERLAP);
    }
}
