// SPDX-License-Identifier: GPL-2.0

//! The router's sysfs files: `/sys/kernel/spin/` (the mode, the switches, the GPU read-ahead
//! partition's limit and the system-wide counters) and `/sys/block/<disk>/spin/` (a disk's cost
//! parameters, counters and P2P paths). See `Documentation/ABI/testing/sysfs-kernel-spin` and
//! `Documentation/ABI/testing/sysfs-block-spin`.
//!
//! Every file is one typed attribute (`kernel::sysfs`); this module only parses and formats,
//! the state lives in `super::state`, `super::readahead` and `super::verdict`.

use super::glue::{self, DiskKey, DiskRef};
use super::state::{self, Mode};
use super::{readahead, verdict};
use crate::sched::Params;
use core::fmt::Write;
use kernel::{
    device::Device,
    prelude::*,
    str::Formatter,
    sysfs::{
        AttributeGroup, AttributeList, Dev, DeviceAttribute, DeviceAttributeOps, KernelDir, Kobj,
        KobjAttribute, KobjAttributeOps,
    },
};

/// Parses a sysfs write: one decimal `u64`, optionally followed by a newline.
fn parse_u64(input: &[u8]) -> Result<u64> {
    let s = input.strip_suffix(b"\n").unwrap_or(input);
    if s.is_empty() {
        return Err(EINVAL);
    }
    s.iter().try_fold(0u64, |acc, &c| {
        if !c.is_ascii_digit() {
            return Err(EINVAL);
        }
        acc.checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or(EINVAL)
    })
}

/// Parses a switch: `0` or `1`, with an optional newline.
fn parse_bool(input: &[u8]) -> Result<bool> {
    match parse_u64(input)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(EINVAL),
    }
}

/// Writes one line; a full page is an error.
fn line(f: &mut Formatter<'_>, v: impl core::fmt::Display) -> Result {
    writeln!(f, "{v}").map_err(|_| EINVAL)
}

/// `/sys/kernel/spin/mode`: `auto`, `p2p`, `pagecache` or `off`.
struct ModeFile;

#[vtable]
impl KobjAttributeOps for ModeFile {
    fn show(f: &mut Formatter<'_>) -> Result {
        line(f, state::mode().name().to_str().map_err(|_| EINVAL)?)
    }

    fn store(input: &[u8]) -> Result {
        let s = input.strip_suffix(b"\n").unwrap_or(input);
        state::set_mode(Mode::from_name(s).ok_or(EINVAL)?);
        Ok(())
    }
}

/// `/sys/kernel/spin/stat`: the system-wide counters.
struct GlobalStat;

#[vtable]
impl KobjAttributeOps for GlobalStat {
    fn show(f: &mut Formatter<'_>) -> Result {
        let (hits, misses) = verdict::counts();
        state::show_global(f)
            .and_then(|()| readahead::show_stat(f))
            .and_then(|()| writeln!(f, "disk_entries {}", state::disk_entries()))
            .and_then(|()| writeln!(f, "file_verdict_hits {hits}"))
            .and_then(|()| writeln!(f, "file_verdict_misses {misses}"))
            .map_err(|_| EINVAL)
    }
}

/// `/sys/kernel/spin/ra_partition_pages`: the GPU read-ahead partition's limit, in pages.
struct RaLimit;

#[vtable]
impl KobjAttributeOps for RaLimit {
    fn show(f: &mut Formatter<'_>) -> Result {
        line(f, readahead::limit())
    }

    fn store(input: &[u8]) -> Result {
        readahead::set_limit(parse_u64(input)?)
    }
}

/// `/sys/kernel/spin/atomic_reads`: whether P2P legs keep XFS's read/write exclusion.
struct AtomicReads;

#[vtable]
impl KobjAttributeOps for AtomicReads {
    fn show(f: &mut Formatter<'_>) -> Result {
        line(f, u8::from(state::atomic_reads()))
    }

    fn store(input: &[u8]) -> Result {
        state::set_atomic_reads(parse_bool(input)?);
        Ok(())
    }
}

/// `/sys/kernel/spin/pipeline`: whether the chunks of a read are pipelined.
struct Pipeline;

#[vtable]
impl KobjAttributeOps for Pipeline {
    fn show(f: &mut Formatter<'_>) -> Result {
        line(f, u8::from(state::pipeline()))
    }

    fn store(input: &[u8]) -> Result {
        state::set_pipeline(parse_bool(input)?);
        Ok(())
    }
}

static MODE: KobjAttribute<ModeFile> = KobjAttribute::new(c"mode", 0o644);
static GLOBAL_STAT: KobjAttribute<GlobalStat> = KobjAttribute::new(c"stat", 0o444);
static RA_LIMIT: KobjAttribute<RaLimit> = KobjAttribute::new(c"ra_partition_pages", 0o644);
static ATOMIC_READS: KobjAttribute<AtomicReads> = KobjAttribute::new(c"atomic_reads", 0o644);
static PIPELINE: KobjAttribute<Pipeline> = KobjAttribute::new(c"pipeline", 0o644);

static KERNEL_ATTRS: AttributeList<Kobj, 5> = AttributeList::new([
    MODE.as_attr(),
    GLOBAL_STAT.as_attr(),
    RA_LIMIT.as_attr(),
    ATOMIC_READS.as_attr(),
    PIPELINE.as_attr(),
]);

static KERNEL_GROUP: AttributeGroup<Kobj> = AttributeGroup::new(None, &KERNEL_ATTRS);

/// `/sys/kernel/spin`, there while the router is.
pub(crate) struct Sysfs {
    _dir: KernelDir,
}

/// Creates `/sys/kernel/spin`.
pub(crate) fn init() -> Result<Sysfs> {
    Ok(Sysfs {
        _dir: KernelDir::new(c"spin", &KERNEL_GROUP)?,
    })
}

/// The disk whose `/sys/block/<disk>/spin/` file is used.
fn disk(dev: &Device) -> Result<DiskRef<'_>> {
    DiskRef::from_device(dev).ok_or(ENODEV)
}

/// The table key of that disk.
fn key(dev: &Device) -> Result<DiskKey> {
    Ok(disk(dev)?.key())
}

/// `/sys/block/<disk>/spin/stat`: the disk's counters.
struct DiskStat;

#[vtable]
impl DeviceAttributeOps for DiskStat {
    fn show(dev: &Device, f: &mut Formatter<'_>) -> Result {
        state::show_disk(key(dev)?, f).map_err(|_| EINVAL)
    }
}

/// One cost parameter of a disk, `/sys/block/<disk>/spin/<name>`: read with `get`, changed by
/// `set`, validated together with the others (`Params::new`).
trait Param {
    fn get(p: &Params) -> u64;
    fn set(p: &Params, v: u64) -> Result<Params>;
}

/// Returns `p` with its four Eq. 1 parameters replaced by `f` of them, validated together.
fn with(p: &Params, f: impl FnOnce(&mut [u64; 4])) -> Result<Params> {
    let mut v = [p.s_cutoff(), p.c_p2p_ns(), p.bw_p2p(), p.bw_pc()];
    f(&mut v);
    Params::new(p.page_size(), v[0], v[1], v[2], v[3])
        .and_then(|q| q.with_overlap(p.overlap()))
        .map_err(|_| EINVAL)
}

/// `s_cutoff`: the smallest transfer, in bytes, that P2P DMA runs at full bandwidth.
struct SCutoff;
impl Param for SCutoff {
    fn get(p: &Params) -> u64 {
        p.s_cutoff()
    }
    fn set(p: &Params, v: u64) -> Result<Params> {
        with(p, |a| a[0] = v)
    }
}

/// `c_p2p_ns`: the fixed cost of one P2P transfer, in nanoseconds.
struct CP2pNs;
impl Param for CP2pNs {
    fn get(p: &Params) -> u64 {
        p.c_p2p_ns()
    }
    fn set(p: &Params, v: u64) -> Result<Params> {
        with(p, |a| a[1] = v)
    }
}

/// `bw_p2p`: P2P DMA bandwidth, in bytes per second.
struct BwP2p;
impl Param for BwP2p {
    fn get(p: &Params) -> u64 {
        p.bw_p2p()
    }
    fn set(p: &Params, v: u64) -> Result<Params> {
        with(p, |a| a[2] = v)
    }
}

/// `bw_pc`: page-cache copy bandwidth, in bytes per second.
struct BwPc;
impl Param for BwPc {
    fn get(p: &Params) -> u64 {
        p.bw_pc()
    }
    fn set(p: &Params, v: u64) -> Result<Params> {
        with(p, |a| a[3] = v)
    }
}

/// `p2p_overlap`: how much of a copy P2P DMA hides, in hundredths.
struct P2pOverlap;
impl Param for P2pOverlap {
    fn get(p: &Params) -> u64 {
        p.overlap().into()
    }
    fn set(p: &Params, v: u64) -> Result<Params> {
        p.with_overlap(u32::try_from(v).map_err(|_| EINVAL)?)
            .map_err(|_| EINVAL)
    }
}

/// The sysfs file of parameter `P` of a disk.
struct ParamFile<P>(core::marker::PhantomData<P>);

#[vtable]
impl<P: Param> DeviceAttributeOps for ParamFile<P> {
    fn show(dev: &Device, f: &mut Formatter<'_>) -> Result {
        line(f, P::get(&state::disk_params(key(dev)?)?))
    }

    fn store(dev: &Device, input: &[u8]) -> Result {
        let v = parse_u64(input)?;
        state::update_disk_params(key(dev)?, |p| P::set(p, v))
    }
}

/// Writes `MAJ:MIN` of a device number.
fn devt_fmt(f: &mut Formatter<'_>, devt: u32) -> core::fmt::Result {
    write!(f, "{}:{}", devt >> 20, devt & ((1 << 20) - 1))
}

/// `/sys/block/<disk>/spin/p2p`: whether P2P DMA between the disk and each p2pdma provider is
/// possible, as the router decides it, and why not (see
/// `Documentation/ABI/testing/sysfs-block-spin`).
fn p2p_show(disk: &DiskRef<'_>, f: &mut Formatter<'_>) -> core::fmt::Result {
    let queue = disk.p2pdma();
    let members = disk.members();
    writeln!(f, "queue {}", u8::from(queue))?;
    match &members {
        Ok(members) => {
            for m in members.iter() {
                write!(f, "member ")?;
                devt_fmt(f, m.devt)?;
                match &m.pdev {
                    Some(p) => write!(f, " {}", (**p).as_ref().name().to_str().unwrap_or("?"))?,
                    None => write!(f, " -")?,
                }
                writeln!(f, " {}", u8::from(m.p2pdma))?;
            }
        }
        Err(e) => writeln!(f, "members error {}", e.to_errno())?,
    }
    for gpu in glue::p2p_providers().iter().flatten() {
        let name = (**gpu).as_ref().name().to_str().unwrap_or("?");
        let Ok(members) = &members else {
            writeln!(f, "provider {name} distance")?;
            continue;
        };
        for m in members.iter() {
            write!(f, "distance {name} ")?;
            devt_fmt(f, m.devt)?;
            match m
                .pdev
                .as_deref()
                .and_then(|p| gpu.p2pdma_distance(p.as_ref()))
            {
                Some(d) => writeln!(f, " {d}")?,
                None => writeln!(f, " -1")?,
            }
        }
        if !queue {
            write!(f, "provider {name} queue")?;
            if let Some(devt) = state::queue_refused_member(members) {
                write!(f, " ")?;
                devt_fmt(f, devt)?;
            }
            writeln!(f)?;
        } else if let Some(refused) = state::refused_member(gpu, members) {
            write!(f, "provider {name} distance ")?;
            devt_fmt(f, refused)?;
            writeln!(f)?;
        } else {
            writeln!(f, "provider {name} ok")?;
        }
    }
    Ok(())
}

/// `/sys/block/<disk>/spin/p2p`: the disk's P2P paths to every p2pdma provider.
struct P2pPaths;

#[vtable]
impl DeviceAttributeOps for P2pPaths {
    fn show(dev: &Device, f: &mut Formatter<'_>) -> Result {
        // A full page truncates the report; what was written stays.
        let _ = p2p_show(&disk(dev)?, f);
        Ok(())
    }
}

static DISK_STAT: DeviceAttribute<DiskStat> = DeviceAttribute::new(c"stat", 0o444);
static S_CUTOFF: DeviceAttribute<ParamFile<SCutoff>> = DeviceAttribute::new(c"s_cutoff", 0o644);
static C_P2P_NS: DeviceAttribute<ParamFile<CP2pNs>> = DeviceAttribute::new(c"c_p2p_ns", 0o644);
static BW_P2P: DeviceAttribute<ParamFile<BwP2p>> = DeviceAttribute::new(c"bw_p2p", 0o644);
static BW_PC: DeviceAttribute<ParamFile<BwPc>> = DeviceAttribute::new(c"bw_pc", 0o644);
static P2P_OVERLAP: DeviceAttribute<ParamFile<P2pOverlap>> =
    DeviceAttribute::new(c"p2p_overlap", 0o644);
static P2P: DeviceAttribute<P2pPaths> = DeviceAttribute::new(c"p2p", 0o444);

static DISK_ATTRS: AttributeList<Dev, 7> = AttributeList::new([
    DISK_STAT.as_attr(),
    S_CUTOFF.as_attr(),
    C_P2P_NS.as_attr(),
    BW_P2P.as_attr(),
    BW_PC.as_attr(),
    P2P_OVERLAP.as_attr(),
    P2P.as_attr(),
]);

/// `/sys/block/<disk>/spin/`: every disk's attribute group, listed by `block/genhd.c`
/// (`include/linux/spin.h`).
#[no_mangle]
#[allow(non_upper_case_globals)]
static spin_disk_attr_group: AttributeGroup<Dev> = AttributeGroup::new(Some(c"spin"), &DISK_ATTRS);

#[cfg(CONFIG_SPIN_KUNIT_TEST)]
#[kunit_tests(rust_spin_sysfs)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_numbers() {
        assert_eq!(parse_u64(b"0"), Ok(0));
        assert_eq!(parse_u64(b"131072\n"), Ok(131072));
        assert_eq!(parse_u64(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), Err(EINVAL));
        assert_eq!(parse_u64(b""), Err(EINVAL));
        assert_eq!(parse_u64(b"\n"), Err(EINVAL));
        assert_eq!(parse_u64(b"12a"), Err(EINVAL));
        assert_eq!(parse_u64(b"-1"), Err(EINVAL));
        assert_eq!(parse_u64(b" 1"), Err(EINVAL));
        assert_eq!(parse_u64(b"1\n\n"), Err(EINVAL));
        assert_eq!(parse_bool(b"1\n"), Ok(true));
        assert_eq!(parse_bool(b"2"), Err(EINVAL));
    }

    #[test]
    fn params_are_validated_together() -> Result {
        let p = state::default_params()?;
        assert_eq!(CP2pNs::set(&p, 100_000)?.c_p2p_ns(), 100_000);
        // The overlap survives a change of the other parameters, and is range-checked.
        let q = P2pOverlap::set(&p, 400)?;
        assert_eq!(CP2pNs::set(&q, 100_000)?.overlap(), 400);
        assert_eq!(P2pOverlap::set(&q, 100)?, p);
        assert_eq!(P2pOverlap::set(&p, 99), Err(EINVAL));
        assert_eq!(P2pOverlap::set(&p, 6401), Err(EINVAL));
        assert_eq!(P2pOverlap::set(&p, 1 << 32), Err(EINVAL));
        assert_eq!(SCutoff::set(&p, 0)?.s_cutoff(), 0);
        // 128 KiB at 6.5 GB/s takes 20.2 us: an overhead of 1 ns is inconsistent.
        assert_eq!(CP2pNs::set(&p, 1), Err(EINVAL));
        assert_eq!(BwP2p::set(&p, 0), Err(EINVAL));
        assert_eq!(SCutoff::set(&p, (16 << 20) + 1), Err(EINVAL));
        assert_eq!(BwPc::get(&BwPc::set(&p, 1 << 30)?), 1 << 30);
        // The source set is left as it was.
        assert_eq!(p, state::default_params()?);
        Ok(())
    }

    #[test]
    fn mode_names_round_trip() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name().to_bytes()), Some(m));
        }
        assert_eq!(Mode::from_name(b"Auto"), None);
        // `MODE` starts at 0: the default mode.
        assert_eq!(Mode::Auto as i32, 0);
    }
}
