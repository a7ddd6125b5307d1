// SPDX-License-Identifier: GPL-2.0

//! What the tool reads from the system: sysfs files, `statx()`, device numbers.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// `/sys/kernel/spin`, present when the kernel has spin.
pub const SPIN_SYS: &str = "/sys/kernel/spin";

/// Reads a sysfs file, without the trailing newline.
pub fn read(path: impl AsRef<Path>) -> io::Result<String> {
    Ok(fs::read_to_string(path)?.trim_end().to_string())
}

/// Reads a decimal sysfs number.
pub fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read(path).ok()?.trim().parse().ok()
}

/// The "name value" lines of a spin `stat` file, in file order.
pub fn counters(path: impl AsRef<Path>) -> io::Result<Vec<(String, u64)>> {
    Ok(read(path)?
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect())
}

/// Fails with a one-line message unless the kernel has spin.
pub fn need_spin() -> Result<(), crate::Fail> {
    if Path::new(SPIN_SYS).join("mode").exists() {
        Ok(())
    } else {
        Err(crate::Fail(format!(
            "{SPIN_SYS}/mode is missing: this kernel has no spin (CONFIG_SPIN)"
        )))
    }
}

/// The disks that have spin's sysfs directory and a size, sorted by name.
pub fn spin_disks() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("spin/stat").exists())
        // Hidden disks (the paths under an NVMe multipath head) have no device number: no
        // one opens them, their head is the disk.
        .filter(|e| e.path().join("dev").exists())
        // Unbound loop devices and empty drives: nothing to read from.
        .filter(|e| read_u64(e.path().join("size")).unwrap_or(0) > 0)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The whole disk (its `/sys/block` name) of block device `maj:min`, partitions resolved.
pub fn disk_of(maj: u32, min: u32) -> Option<String> {
    let p = fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")).ok()?;
    let p = if p.join("partition").exists() {
        p.parent()?.to_path_buf()
    } else {
        p
    };
    Some(p.file_name()?.to_string_lossy().into_owned())
}

/// The `/sys/block` name of the disk with device number `maj:min` as a string.
pub fn disk_name(devt: &str) -> Option<String> {
    let (a, b) = devt.split_once(':')?;
    disk_of(a.parse().ok()?, b.parse().ok()?)
}

/// The hidden NVMe path disk (`nvmeXcYnZ`, listed under some multipath head's
/// `/sys/block/<head>/multipath/`) whose controller is PCI function `pci`, if exactly one is:
/// a hidden disk has no device number to look it up by.
pub fn mpath_path_of(pci: &str) -> Option<String> {
    let mut found: Vec<String> = fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|e| {
            fs::read_dir(e.path().join("multipath"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|p| p.file_name().to_string_lossy().into_owned())
        .filter(|p| {
            fs::canonicalize(format!("/sys/block/{p}/device/device"))
                .ok()
                .is_some_and(|r| r.file_name().is_some_and(|n| n == pci))
        })
        .collect();
    (found.len() == 1).then(|| found.remove(0))
}

/// The NVMe over Fabrics path disks at the bottom of `disk` (its `/sys/block` name), each with
/// its controller's transport (`tcp`, `rdma`, `loop`, `fc`): the paths of a multipath head
/// (`multipath/`) and of every disk it is built on (`slaves/`), depth first.
pub fn fabric_paths(disk: &str) -> Vec<(String, String)> {
    fn walk(disk: &str, depth: u32, out: &mut Vec<(String, String)>) {
        if depth > 16 {
            return;
        }
        let base = Path::new("/sys/block").join(disk);
        match read(base.join("device/transport")) {
            Ok(t) if t != "pcie" => out.push((disk.to_string(), t)),
            _ => {}
        }
        for sub in ["multipath", "slaves"] {
            let mut below: Vec<String> = fs::read_dir(base.join(sub))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            below.sort();
            for b in below {
                // A slave may be a partition: its disk is the directory above it.
                let name = match fs::canonicalize(base.join(sub).join(&b)) {
                    Ok(p) if p.join("partition").exists() => p
                        .parent()
                        .and_then(|d| d.file_name())
                        .map_or(b.clone(), |n| n.to_string_lossy().into_owned()),
                    _ => b,
                };
                walk(&name, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(disk, 0, &mut out);
    out
}

/// An RDMA device (`/sys/class/infiniband/<name>`).
pub struct RdmaDevice {
    pub name: String,
    /// Its PCI function; `None` for a software device (rxe, siw).
    pub pci: Option<String>,
    /// The network device a software device runs on (`parent`).
    pub netdev: Option<String>,
}

/// The RDMA devices of the system, sorted by name.
pub fn rdma_devices() -> Vec<RdmaDevice> {
    let mut v: Vec<RdmaDevice> = fs::read_dir("/sys/class/infiniband")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let pci = fs::canonicalize(e.path().join("device"))
                .ok()
                .filter(|p| p.join("vendor").exists() && p.join("config").exists())
                .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()));
            RdmaDevice {
                name: e.file_name().to_string_lossy().into_owned(),
                pci,
                netdev: read(e.path().join("parent")).ok(),
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// The PCI functions from the root bus down to `bdf`, from its sysfs path.
pub fn pci_chain(bdf: &str) -> Vec<String> {
    let Ok(p) = fs::canonicalize(format!("/sys/bus/pci/devices/{bdf}")) else {
        return vec![bdf.to_string()];
    };
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|c| is_bdf(c))
        .collect()
}

/// The route between two PCI functions through their closest common upstream function, e.g.
/// `0000:03:00.0 -> 0000:02:01.0 -> 0000:01:00.0 <- 0000:02:00.0 <- 0000:04:00.0`; `None`
/// when they only meet at the root complex.
pub fn pci_route(a: &str, b: &str) -> (String, bool) {
    let (ca, cb) = (pci_chain(a), pci_chain(b));
    let common = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = ca[common..].iter().rev().cloned().collect();
    let meet = if common > 0 {
        ca[common - 1].clone()
    } else {
        "root complex".to_string()
    };
    parts.push(format!("[{meet}]"));
    parts.extend(cb[common..].iter().cloned());
    (parts.join(" - "), common > 0)
}

fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
}

/// What `statx()` says of a file, as far as spin cares.
pub struct FileStat {
    /// Device number of the filesystem.
    pub dev: (u32, u32),
    /// Direct-I/O memory and offset alignment (0: no direct I/O).
    pub dio_mem_align: u32,
    pub dio_offset_align: u32,
    /// Whether `STATX_DIOALIGN` was answered at all.
    pub dio_known: bool,
    /// `STATX_ATTR_*` flags.
    pub attributes: u64,
    pub is_file: bool,
}

pub const STATX_ATTR_ENCRYPTED: u64 = 0x800;
pub const STATX_ATTR_VERITY: u64 = 0x10_0000;
pub const STATX_ATTR_DAX: u64 = 0x20_0000;

#[repr(C)]
#[derive(Default)]
struct StatxTs {
    tv_sec: i64,
    tv_nsec: u32,
    _reserved: i32,
}

/// `struct statx` of the UAPI (256 bytes).
#[repr(C)]
#[derive(Default)]
struct RawStatx {
    mask: u32,
    blksize: u32,
    attributes: u64,
    nlink: u32,
    uid: u32,
    gid: u32,
    mode: u16,
    _spare0: u16,
    ino: u64,
    size: u64,
    blocks: u64,
    attributes_mask: u64,
    atime: StatxTs,
    btime: StatxTs,
    ctime: StatxTs,
    mtime: StatxTs,
    rdev_major: u32,
    rdev_minor: u32,
    dev_major: u32,
    dev_minor: u32,
    mnt_id: u64,
    dio_mem_align: u32,
    dio_offset_align: u32,
    _spare: [u64; 12],
}

extern "C" {
    fn statx(
        dirfd: c_int,
        path: *const c_char,
        flags: c_int,
        mask: u32,
        buf: *mut RawStatx,
    ) -> c_int;
}

const AT_FDCWD: c_int = -100;
const STATX_BASIC_STATS: u32 = 0x7ff;
const STATX_DIOALIGN: u32 = 0x2000;
const S_IFMT: u16 = 0o170000;
const S_IFREG: u16 = 0o100000;

/// `statx()` of `path`.
pub fn stat(path: &Path) -> io::Result<FileStat> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    let mut st = RawStatx::default();
    // SAFETY: `c` is a NUL-terminated path and `st` a `struct statx` the call may fill.
    let r = unsafe {
        statx(
            AT_FDCWD,
            c.as_ptr(),
            0,
            STATX_BASIC_STATS | STATX_DIOALIGN,
            &mut st,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileStat {
        dev: (st.dev_major, st.dev_minor),
        dio_mem_align: st.dio_mem_align,
        dio_offset_align: st.dio_offset_align,
        dio_known: st.mask & STATX_DIOALIGN != 0,
        attributes: st.attributes,
        is_file: st.mode & S_IFMT == S_IFREG,
    })
}

/// Whether `path` opens with `O_DIRECT` (`EINVAL` means the filesystem refuses direct I/O).
pub fn opens_direct(path: &Path) -> io::Result<bool> {
    const O_DIRECT: i32 = 0o40000;
    match fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_DIRECT)
        .open(path)
    {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(22) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The filesystem type of the mount holding `path` (longest mount point prefix).
pub fn fs_type(path: &Path) -> Option<String> {
    let path: PathBuf = fs::canonicalize(path).ok()?;
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_, dir, ty) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(dir).then(|| (dir.len(), ty.to_string()))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, t)| t)
}
