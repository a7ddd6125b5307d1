// SPDX-License-Identifier: GPL-2.0

//! `spin check`: is P2P DMA between storage and GPU memory possible here, and if not, why.
//!
//! The per-disk verdicts come from the kernel (`/sys/block/<disk>/spin/p2p`, computed by the
//! router's own code); the per-file reasons are found as the router's file check finds them:
//! `statx()` (`STATX_DIOALIGN`, the DAX/encrypted/verity attributes) and an `O_DIRECT` open.

use crate::json::Json;
use crate::sys;
use crate::Fail;
use std::fs;
use std::path::Path;

/// A PCI device that published p2pdma memory.
struct Provider {
    pci: String,
    size: u64,
    available: u64,
    published: bool,
    heap: Option<String>,
    iommu_group: Option<String>,
}

/// `sizeof(struct page)` on x86-64: the memory each 4 KiB page of registered BAR costs.
const STRUCT_PAGE: u64 = 64;

fn providers() -> Vec<Provider> {
    let mut v: Vec<Provider> = fs::read_dir("/sys/bus/pci/devices")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("p2pmem/size").exists())
        .map(|e| {
            let pci = e.file_name().to_string_lossy().into_owned();
            let d = e.path();
            let heap = format!("/dev/dma_heap/p2p-{pci}");
            Provider {
                size: sys::read_u64(d.join("p2pmem/size")).unwrap_or(0),
                available: sys::read_u64(d.join("p2pmem/available")).unwrap_or(0),
                published: sys::read_u64(d.join("p2pmem/published")) == Some(1),
                heap: Path::new(&heap).exists().then_some(heap),
                iommu_group: fs::read_link(d.join("iommu_group"))
                    .ok()
                    .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned())),
                pci,
            }
        })
        .collect();
    v.sort_by(|a, b| a.pci.cmp(&b.pci));
    v
}

/// A member of a disk: itself, or a disk at the bottom of its stack.
struct Member {
    devt: String,
    disk: Option<String>,
    pci: Option<String>,
    /// Its queue accepts P2PDMA pages.
    p2pdma: bool,
}

/// What the kernel says of one provider for a disk.
struct Verdict {
    pci: String,
    /// `ok`, `queue` or `distance`.
    reason: String,
    /// The refused member (`distance`).
    member: Option<String>,
    /// `pci_p2pdma_distance()` per member, -1: refused.
    distances: Vec<(String, i64)>,
}

struct Disk {
    name: String,
    devt: String,
    queue: bool,
    members: Vec<Member>,
    verdicts: Vec<Verdict>,
    cost: Vec<(&'static str, u64)>,
    error: Option<String>,
}

fn disk(name: &str) -> Disk {
    let base = Path::new("/sys/block").join(name);
    let mut d = Disk {
        name: name.to_string(),
        devt: sys::read(base.join("dev")).unwrap_or_default(),
        queue: false,
        members: Vec::new(),
        verdicts: Vec::new(),
        cost: Vec::new(),
        error: None,
    };
    for k in ["s_cutoff", "c_p2p_ns", "bw_p2p", "bw_pc", "p2p_overlap"] {
        if let Some(v) = sys::read_u64(base.join("spin").join(k)) {
            d.cost.push((k, v));
        }
    }
    let text = match sys::read(base.join("spin/p2p")) {
        Ok(t) => t,
        Err(e) => {
            d.error = Some(format!("spin/p2p: {e}"));
            return d;
        }
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["queue", q] => d.queue = *q == "1",
            ["member", devt, pci, rest @ ..] => d.members.push(Member {
                devt: devt.to_string(),
                disk: sys::disk_name(devt).or_else(|| sys::mpath_path_of(pci)),
                pci: (*pci != "-").then(|| pci.to_string()),
                p2pdma: rest.first() != Some(&"0"),
            }),
            ["members", "error", e] => {
                d.error = Some(format!("the stack could not be listed ({e})"))
            }
            ["distance", pci, devt, n] => {
                let n = n.parse().unwrap_or(-1);
                match d.verdicts.iter_mut().find(|v| v.pci == *pci) {
                    Some(v) => v.distances.push((devt.to_string(), n)),
                    None => d.verdicts.push(Verdict {
                        pci: pci.to_string(),
                        reason: String::new(),
                        member: None,
                        distances: vec![(devt.to_string(), n)],
                    }),
                }
            }
            ["provider", pci, reason, rest @ ..] => {
                let member = rest.first().map(|s| s.to_string());
                match d.verdicts.iter_mut().find(|v| v.pci == *pci) {
                    Some(v) => {
                        v.reason = reason.to_string();
                        v.member = member;
                    }
                    None => d.verdicts.push(Verdict {
                        pci: pci.to_string(),
                        reason: reason.to_string(),
                        member,
                        distances: Vec::new(),
                    }),
                }
            }
            _ => {}
        }
    }
    d
}

impl Disk {
    fn member(&self, devt: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.devt == devt)
    }

    /// Why P2P between this disk and `v`'s provider is impossible, in words.
    fn why(&self, v: &Verdict) -> String {
        match v.reason.as_str() {
            "queue" => match self.fabric_path() {
                Some((path, transport)) => format!(
                    "queue: {} lacks BLK_FEAT_PCI_P2PDMA: {path} {}",
                    self.name,
                    transport_why(&transport)
                ),
                None => "queue: the disk's queue does not accept P2PDMA pages \
                         (BLK_FEAT_PCI_P2PDMA; virtio-blk, dm-crypt, md RAID-5, ... see \
                         Documentation/spin/stacking.rst)"
                    .to_string(),
            },
            "distance" => match v.member.as_deref().and_then(|m| self.member(m)) {
                Some(m) => {
                    let name = m.disk.clone().unwrap_or_else(|| m.devt.clone());
                    match &m.pci {
                        Some(pci) => {
                            let (route, shared) = sys::pci_route(&v.pci, pci);
                            format!(
                                "distance: pci_p2pdma_distance() refuses {} and {name}'s PCI \
                                 device {pci}; route {route}{}",
                                v.pci,
                                if shared {
                                    ""
                                } else {
                                    " (they meet only at the root complex, whose host \
                                     bridge is not on the P2P whitelist)"
                                }
                            )
                        }
                        None => format!(
                            "distance: {name} has no PCI device (an NVMe multipath head, a \
                             loop device, ...), so no P2P path can be proven"
                        ),
                    }
                }
                None => "distance: the disks under this one could not be listed".to_string(),
            },
            other => other.to_string(),
        }
    }

    /// The first NVMe over Fabrics path under this disk whose queue refuses P2PDMA pages,
    /// and its transport (`tcp`, `rdma`, `loop`, `fc`), if a refused member has no PCI device
    /// and is one: the kernel names members by device number, which a hidden path disk has
    /// no file for, so the paths are found by walking the stack.
    fn fabric_path(&self) -> Option<(String, String)> {
        if !self.members.iter().any(|m| !m.p2pdma && m.pci.is_none()) {
            return None;
        }
        sys::fabric_paths(&self.name).into_iter().find(|(path, _)| {
            self.members
                .iter()
                .any(|m| !m.p2pdma && m.disk.as_deref().is_none_or(|d| d == path))
        })
    }

    fn ok_for(&self, pci: &str) -> bool {
        self.verdicts
            .iter()
            .any(|v| v.pci == pci && v.reason == "ok")
    }

    fn json(&self) -> Json {
        Json::Obj(vec![
            ("disk", Json::Str(self.name.clone())),
            ("devt", Json::Str(self.devt.clone())),
            ("queue_p2pdma", Json::Bool(self.queue)),
            (
                "members",
                Json::Arr(
                    self.members
                        .iter()
                        .map(|m| {
                            Json::Obj(vec![
                                ("devt", Json::Str(m.devt.clone())),
                                ("disk", m.disk.clone().map_or(Json::Null, Json::Str)),
                                ("pci", m.pci.clone().map_or(Json::Null, Json::Str)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "providers",
                Json::Arr(
                    self.verdicts
                        .iter()
                        .map(|v| {
                            Json::Obj(vec![
                                ("pci", Json::Str(v.pci.clone())),
                                ("p2p", Json::Bool(v.reason == "ok")),
                                (
                                    "reason",
                                    if v.reason == "ok" {
                                        Json::Null
                                    } else {
                                        Json::Str(v.reason.clone())
                                    },
                                ),
                                (
                                    "member",
                                    v.member
                                        .as_deref()
                                        .and_then(|m| self.member(m))
                                        .map_or(Json::Null, |m| {
                                            Json::Str(m.disk.clone().unwrap_or(m.devt.clone()))
                                        }),
                                ),
                                (
                                    "detail",
                                    if v.reason == "ok" {
                                        Json::Null
                                    } else {
                                        Json::Str(self.why(v))
                                    },
                                ),
                                (
                                    "distances",
                                    Json::Arr(
                                        v.distances
                                            .iter()
                                            .map(|(m, n)| {
                                                Json::Obj(vec![
                                                    ("member", Json::Str(m.clone())),
                                                    ("distance", Json::Num(*n)),
                                                ])
                                            })
                                            .collect(),
                                    ),
                                ),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "cost",
                Json::Obj(
                    self.cost
                        .iter()
                        .map(|(k, v)| (*k, Json::Num(*v as i64)))
                        .collect(),
                ),
            ),
            ("error", self.error.clone().map_or(Json::Null, Json::Str)),
        ])
    }
}

/// Why an NVMe over Fabrics transport's queue refuses P2PDMA pages.
fn transport_why(transport: &str) -> String {
    match transport {
        "tcp" => "is an NVMe/TCP path: nvme-tcp moves the data through socket buffers with \
                  the CPU, so its queue cannot carry P2PDMA pages"
            .to_string(),
        "loop" => "is an NVMe loop path: nvmet's loop transport hands the data to the target's \
                   own disk in host memory, so its queue cannot carry P2PDMA pages"
            .to_string(),
        "rdma" => {
            let devs = sys::rdma_devices();
            let soft: Vec<String> = devs
                .iter()
                .filter(|d| d.pci.is_none())
                .map(|d| match &d.netdev {
                    Some(n) => format!("{} on {n}", d.name),
                    None => d.name.clone(),
                })
                .collect();
            if !devs.is_empty() && soft.len() == devs.len() {
                format!(
                    "is an NVMe/RDMA path over software RDMA ({}): the NIC is not a PCI device \
                     the GPU can reach, so the queue cannot carry P2PDMA pages",
                    soft.join(", ")
                )
            } else {
                "is an NVMe/RDMA path whose RDMA device refuses PCI P2PDMA \
                 (ib_dma_pci_p2p_dma_supported(): a software device such as rxe or siw, or a \
                 NIC whose DMA ops cannot map P2PDMA pages)"
                    .to_string()
            }
        }
        other => format!(
            "is an NVMe over Fabrics path (transport {other}) whose queue cannot carry P2PDMA \
             pages"
        ),
    }
}

/// The check of one path.
struct PathReport {
    path: String,
    fs: Option<String>,
    disk: Option<String>,
    /// A reason that holds whatever the provider (no_bdev, no_direct_io, inode), or an error.
    reason: Option<(String, String)>,
    dio: (u32, u32),
}

fn check_path(p: &str) -> PathReport {
    let path = Path::new(p);
    let mut r = PathReport {
        path: p.to_string(),
        fs: sys::fs_type(path),
        disk: None,
        reason: None,
        dio: (0, 0),
    };
    let st = match sys::stat(path) {
        Ok(st) => st,
        Err(e) => {
            r.reason = Some(("error".into(), format!("statx: {e}")));
            return r;
        }
    };
    r.dio = (st.dio_offset_align, st.dio_mem_align);
    if st.dev.0 == 0 {
        r.reason = Some((
            "no_bdev".into(),
            "the filesystem has no block device (tmpfs, NFS, overlayfs, ...)".into(),
        ));
        return r;
    }
    r.disk = sys::disk_of(st.dev.0, st.dev.1);
    if !st.is_file {
        r.reason = Some(("error".into(), "not a regular file".into()));
        return r;
    }
    let direct = sys::opens_direct(path);
    if matches!(direct, Ok(false)) || !st.dio_known || st.dio_offset_align == 0 {
        r.reason = Some((
            "no_direct_io".into(),
            "the file cannot do direct I/O (statx reports no STATX_DIOALIGN alignment or \
             O_DIRECT is refused: ext4 data=journal or inline data, ...)"
                .into(),
        ));
    } else if st.attributes
        & (sys::STATX_ATTR_DAX | sys::STATX_ATTR_ENCRYPTED | sys::STATX_ATTR_VERITY)
        != 0
    {
        r.reason = Some(("inode".into(), "a DAX, encrypted or verity file".into()));
    } else if let Err(e) = direct {
        r.reason = Some(("error".into(), format!("open: {e}")));
    }
    r
}

/// The provider that P2P DMA with disk `name` is possible with (`want`, or else the one with
/// the most p2pdma memory: a GPU's BAR rather than an NVMe CMB), or why there is none.
pub fn usable_provider(name: &str, want: Option<&str>) -> Result<String, String> {
    let d = disk(name);
    let provs = providers();
    let size = |pci: &str| provs.iter().find(|p| p.pci == pci).map_or(0, |p| p.size);
    let ok = d
        .verdicts
        .iter()
        .filter(|v| v.reason == "ok" && want.is_none_or(|w| w == v.pci))
        .max_by_key(|v| size(&v.pci));
    if let Some(v) = ok {
        return Ok(v.pci.clone());
    }
    if let Some(w) = want {
        return match d.verdicts.iter().find(|v| v.pci == w) {
            Some(v) => Err(d.why(v)),
            None => Err(format!("{w} is not a p2pdma provider")),
        };
    }
    if let Some(e) = &d.error {
        return Err(e.clone());
    }
    match d.verdicts.first() {
        Some(v) => Err(d.why(v)),
        None => Err("no GPU memory provider: no PCI device published p2pdma memory".into()),
    }
}

/// The disk of file `p` and, if its data cannot go by P2P whatever the provider, why.
pub fn file_reason(p: &str) -> (Option<String>, Option<(String, String)>) {
    let r = check_path(p);
    (r.disk, r.reason)
}

/// What `/sys/kernel/spin/mode` `mode` means for P2P, if it sends nothing by P2P: the
/// verdicts that follow then say what `auto` would do.
fn mode_note(mode: &str) -> Option<&'static str> {
    match mode {
        "off" => Some(
            "routing off: reads and writes go as without spin, nothing by P2P; \
             the verdicts below are what auto would do",
        ),
        "pagecache" => Some(
            "every read and write goes through the page cache, nothing by P2P; \
             the verdicts below are what auto would do",
        ),
        _ => None,
    }
}

pub fn main(args: &[String]) -> Result<u8, Fail> {
    let mut as_json = false;
    let mut paths = Vec::new();
    for a in args {
        match a.as_str() {
            "--json" => as_json = true,
            "-h" | "--help" => {
                println!("usage: spin check [--json] [PATH...]");
                return Ok(0);
            }
            s if s.starts_with('-') => return Err(Fail(format!("check: unknown option '{s}'"))),
            s => paths.push(s.to_string()),
        }
    }
    sys::need_spin()?;
    let mode = sys::read(Path::new(sys::SPIN_SYS).join("mode"))?;
    let provs = providers();
    let disks: Vec<Disk> = sys::spin_disks().iter().map(|n| disk(n)).collect();
    let reports: Vec<PathReport> = paths.iter().map(|p| check_path(p)).collect();

    // P2P for a path: no file reason, and its disk reaches some provider.
    let path_ok = |r: &PathReport| -> Vec<String> {
        if r.reason.is_some() {
            return Vec::new();
        }
        let Some(d) = r
            .disk
            .as_deref()
            .and_then(|n| disks.iter().find(|d| d.name == n))
        else {
            return Vec::new();
        };
        provs
            .iter()
            .filter(|p| d.ok_for(&p.pci))
            .map(|p| p.pci.clone())
            .collect()
    };
    let reachable = if reports.is_empty() {
        disks.iter().any(|d| provs.iter().any(|p| d.ok_for(&p.pci)))
    } else {
        reports.iter().all(|r| !path_ok(r).is_empty())
    };
    // The verdicts say what `auto` and `p2p` would do; the other modes send nothing by P2P.
    let mode_note = mode_note(&mode);
    let possible = reachable && mode_note.is_none();

    if as_json {
        let j = Json::Obj(vec![
            ("mode", Json::Str(mode)),
            (
                "providers",
                Json::Arr(
                    provs
                        .iter()
                        .map(|p| {
                            Json::Obj(vec![
                                ("pci", Json::Str(p.pci.clone())),
                                ("p2pmem_bytes", Json::Num(p.size as i64)),
                                ("available_bytes", Json::Num(p.available as i64)),
                                ("published", Json::Bool(p.published)),
                                ("heap", p.heap.clone().map_or(Json::Null, Json::Str)),
                                (
                                    "struct_page_bytes",
                                    Json::Num((p.size / 4096 * STRUCT_PAGE) as i64),
                                ),
                                ("mapping", Json::Str("write-combining".into())),
                                (
                                    "iommu_group",
                                    p.iommu_group.clone().map_or(Json::Null, Json::Str),
                                ),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("disks", Json::Arr(disks.iter().map(Disk::json).collect())),
            (
                "paths",
                Json::Arr(
                    reports
                        .iter()
                        .map(|r| {
                            let ok = path_ok(r);
                            let (reason, detail) = match (&r.reason, r.disk.as_deref()) {
                                (Some((a, b)), _) => (Json::Str(a.clone()), Json::Str(b.clone())),
                                (None, Some(n)) if ok.is_empty() => {
                                    let d = disks.iter().find(|d| d.name == n);
                                    match d.and_then(|d| {
                                        d.verdicts.iter().find(|v| v.reason != "ok").map(|v| (d, v))
                                    }) {
                                        Some((d, v)) => {
                                            (Json::Str(v.reason.clone()), Json::Str(d.why(v)))
                                        }
                                        None => (
                                            Json::Str("no_provider".into()),
                                            Json::Str("no GPU memory provider".into()),
                                        ),
                                    }
                                }
                                _ => (Json::Null, Json::Null),
                            };
                            Json::Obj(vec![
                                ("path", Json::Str(r.path.clone())),
                                ("fs", r.fs.clone().map_or(Json::Null, Json::Str)),
                                ("disk", r.disk.clone().map_or(Json::Null, Json::Str)),
                                ("p2p", Json::Bool(!ok.is_empty())),
                                (
                                    "providers",
                                    Json::Arr(ok.into_iter().map(Json::Str).collect()),
                                ),
                                ("reason", reason),
                                ("detail", detail),
                                ("dio_offset_align", Json::Num(i64::from(r.dio.0))),
                                ("dio_mem_align", Json::Num(i64::from(r.dio.1))),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("mode_allows_p2p", Json::Bool(mode_note.is_none())),
            ("p2p_possible", Json::Bool(possible)),
        ]);
        print!("{}", j.render());
        return Ok(if possible { 0 } else { 1 });
    }

    match mode_note {
        Some(note) => println!("mode: {mode} ({note})"),
        None => println!("mode: {mode}"),
    }
    println!("GPU memory providers:");
    if provs.is_empty() {
        println!(
            "  none: no PCI device published p2pdma memory (a GPU driver must call \
             pci_p2pdma_add_resource() and pci_p2pmem_publish())"
        );
    }
    for p in &provs {
        println!(
            "  {}: p2pmem {} MiB{} (available {} MiB), struct pages {} KiB, heap {}, mappings write-combining, IOMMU {}",
            p.pci,
            p.size >> 20,
            if p.published { " published" } else { " not published" },
            p.available >> 20,
            (p.size / 4096 * STRUCT_PAGE) >> 10,
            p.heap.as_deref().unwrap_or("none"),
            p.iommu_group.as_deref().map_or("none".to_string(), |g| format!("group {g}")),
        );
    }
    println!("Disks:");
    for d in &disks {
        let members = if d.members.len() == 1 && d.members[0].devt == d.devt {
            d.members[0]
                .pci
                .as_deref()
                .map_or(String::new(), |p| format!(", PCI {p}"))
        } else {
            format!(
                ", members {}",
                d.members
                    .iter()
                    .map(|m| format!(
                        "{} ({})",
                        m.disk.as_deref().unwrap_or(&m.devt),
                        m.pci.as_deref().unwrap_or("no PCI device")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        println!("  {} ({}){members}", d.name, d.devt);
        if let Some(e) = &d.error {
            println!("    error: {e}");
        }
        for v in &d.verdicts {
            if v.reason == "ok" {
                let dist: Vec<String> = v.distances.iter().map(|(_, n)| n.to_string()).collect();
                println!("    {}: P2P possible (distance {})", v.pci, dist.join(", "));
            } else {
                println!("    {}: no P2P: {}", v.pci, d.why(v));
            }
        }
        if !d.cost.is_empty() {
            let c: Vec<String> = d.cost.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("    cost model: {}", c.join(" "));
        }
    }
    if !reports.is_empty() {
        println!("Paths:");
    }
    for r in &reports {
        let on = match (&r.fs, &r.disk) {
            (Some(f), Some(d)) => format!("{f} on {d}"),
            (Some(f), None) => f.clone(),
            _ => "?".to_string(),
        };
        let ok = path_ok(r);
        match &r.reason {
            Some((reason, detail)) => println!("  {}: {on}: no P2P: {reason}: {detail}", r.path),
            None if !ok.is_empty() => println!(
                "  {}: {on}: P2P possible to {} (direct I/O alignment: offset {}, memory {}; \
                 a GPU address must match the file offset modulo the offset alignment)",
                r.path,
                ok.join(", "),
                r.dio.0,
                r.dio.1
            ),
            None => {
                let d = r
                    .disk
                    .as_deref()
                    .and_then(|n| disks.iter().find(|d| d.name == n));
                match d.and_then(|d| d.verdicts.iter().find(|v| v.reason != "ok").map(|v| (d, v))) {
                    Some((d, v)) => println!("  {}: {on}: no P2P: {}", r.path, d.why(v)),
                    None => println!("  {}: {on}: no P2P: no GPU memory provider", r.path),
                }
            }
        }
    }
    Ok(if possible { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::mode_note;

    #[test]
    fn modes_that_send_nothing_by_p2p_are_named() {
        assert!(mode_note("auto").is_none());
        assert!(mode_note("p2p").is_none());
        assert!(mode_note("off").unwrap().contains("as without spin"));
        assert!(mode_note("pagecache").unwrap().contains("page cache"));
    }
}
