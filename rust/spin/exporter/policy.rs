// SPDX-License-Identifier: GPL-2.0

//! The exporter's pure decisions: heap names, allocation sizes, mapping requests, fault windows.
//!
//! Nothing here touches the kernel's state, so all of it is tested by the KUnit suite
//! `rust_spin_exporter` below.

use core::ops::Range;
use kernel::{
    mm::virt::{flags, vm_flags_t},
    page::{page_align, PAGE_SIZE},
    prelude::*,
    str::CString,
};

/// Prefix of the heap names: `/dev/dma_heap/p2p-<pci-bdf>`.
pub(crate) const HEAP_PREFIX: &str = "p2p-";

/// Pages mapped by one fault at most: the naturally aligned 2 MiB block around the faulting page,
/// clipped to the mapping. Bounds the work done under the buffer lock; one fault per 2 MiB
/// instead of one per page makes `pin_user_pages()` of a fresh mapping cheap.
pub(crate) const FAULT_AROUND_PAGES: usize = (2 << 20) / PAGE_SIZE;

/// Returns the name of the heap of the PCI device named `bdf` (e.g. `0000:04:00.0`).
pub(crate) fn heap_name(bdf: &str) -> Result<CString> {
    if bdf.is_empty() || bdf.contains('/') {
        return Err(EINVAL);
    }
    CString::try_from_fmt(fmt!("{HEAP_PREFIX}{bdf}"))
}

/// Returns the size of a buffer asked for with `len` bytes and `heap_flags`.
///
/// The length is rounded up to whole pages. No heap flag is defined: any is [`EINVAL`], as is a
/// length of zero or one that overflows when rounded up.
pub(crate) fn alloc_size(len: usize, heap_flags: u64) -> Result<usize> {
    if heap_flags != 0 || len == 0 {
        return Err(EINVAL);
    }
    page_align(len).ok_or(EINVAL)
}

/// Checks the flags of a new user mapping of a buffer.
///
/// Only shared mappings are allowed ([`EINVAL`] otherwise): a private mapping would need
/// copy-on-write copies of device memory in system memory, which defeats the purpose.
pub(crate) fn check_mmap_flags(vm_flags: vm_flags_t) -> Result {
    if vm_flags & flags::MAYSHARE == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Returns the buffer pages that a fault at buffer page `fault_pgoff` maps.
///
/// The mapping covers buffer pages `vma_first_pgoff .. vma_first_pgoff + vma_pages` of a buffer
/// of `buf_pages` pages. The result is the naturally aligned block of `around` pages around the
/// faulting page, clipped to the mapping and to the buffer; it always contains `fault_pgoff`.
/// Returns [`None`] if the faulting page is outside the mapping or the buffer (the fault gets
/// `SIGBUS`) or `around` is zero.
pub(crate) fn fault_window(
    fault_pgoff: usize,
    vma_first_pgoff: usize,
    vma_pages: usize,
    buf_pages: usize,
    around: usize,
) -> Option<Range<usize>> {
    let vma_end = vma_first_pgoff.checked_add(vma_pages)?.min(buf_pages);
    if fault_pgoff < vma_first_pgoff || fault_pgoff >= vma_end || around == 0 {
        return None;
    }
    let block_start = fault_pgoff - fault_pgoff % around;
    let block_end = block_start.saturating_add(around);
    Some(block_start.max(vma_first_pgoff)..block_end.min(vma_end))
}

/// How the `import_check` importer attaches: the optional third word of a request.
#[cfg_attr(not(CONFIG_SPIN_IMPORT_CHECK), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImportMode {
    /// `revocable` (the default): what a GPU or RDMA driver of device memory does.
    Revocable,
    /// `nopeer`: an importer that needs memory with CPU-usable `struct page`s.
    NoPeer,
    /// `pinned`: a static importer, without a way to revoke its mappings.
    Pinned,
}

/// Parses a request to the `import_check` debugfs file: `<dma-buf fd> <pci-bdf> [<mode>]`.
#[cfg_attr(not(CONFIG_SPIN_IMPORT_CHECK), allow(dead_code))]
pub(crate) fn parse_import_request(request: &[u8]) -> Result<(i32, &str, ImportMode)> {
    let request = core::str::from_utf8(request).map_err(|_| EINVAL)?;
    let mut words = request.split_ascii_whitespace();
    let (Some(fd), Some(bdf), mode, None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(EINVAL);
    };
    let fd = fd.parse::<i32>().map_err(|_| EINVAL)?;
    if fd < 0 {
        return Err(EINVAL);
    }
    let mode = match mode {
        None | Some("revocable") => ImportMode::Revocable,
        Some("nopeer") => ImportMode::NoPeer,
        Some("pinned") => ImportMode::Pinned,
        Some(_) => return Err(EINVAL),
    };
    Ok((fd, bdf, mode))
}

#[cfg(CONFIG_SPIN_KUNIT_TEST)]
#[kunit_tests(rust_spin_exporter)]
mod tests {
    use super::*;

    #[test]
    fn heap_names() -> Result {
        assert_eq!(heap_name("0000:04:00.0")?.to_bytes(), b"p2p-0000:04:00.0");
        assert_eq!(heap_name("0001:c1:1f.7")?.to_bytes(), b"p2p-0001:c1:1f.7");
        assert!(heap_name("").is_err());
        assert!(heap_name("../x").is_err());
        Ok(())
    }

    #[test]
    fn alloc_sizes_are_whole_pages() {
        assert_eq!(alloc_size(1, 0), Ok(PAGE_SIZE));
        assert_eq!(alloc_size(PAGE_SIZE, 0), Ok(PAGE_SIZE));
        assert_eq!(alloc_size(PAGE_SIZE + 1, 0), Ok(2 * PAGE_SIZE));
        assert_eq!(alloc_size(64 << 20, 0), Ok(64 << 20));
    }

    #[test]
    fn alloc_refuses_bad_requests() {
        assert_eq!(alloc_size(0, 0), Err(EINVAL));
        assert_eq!(alloc_size(PAGE_SIZE, 1), Err(EINVAL));
        assert_eq!(alloc_size(PAGE_SIZE, 1 << 63), Err(EINVAL));
        assert_eq!(alloc_size(usize::MAX, 0), Err(EINVAL));
    }

    #[test]
    fn only_shared_mappings() {
        let shared = flags::READ | flags::WRITE | flags::SHARED | flags::MAYSHARE;
        assert_eq!(check_mmap_flags(shared), Ok(()));
        // A read-only shared mapping of a read-only file has VM_MAYSHARE without VM_SHARED.
        assert_eq!(check_mmap_flags(flags::READ | flags::MAYSHARE), Ok(()));
        assert_eq!(check_mmap_flags(flags::READ | flags::WRITE), Err(EINVAL));
        assert_eq!(check_mmap_flags(flags::NONE), Err(EINVAL));
    }

    #[test]
    fn fault_window_is_aligned_and_clipped() {
        // Whole-buffer mapping of 1024 pages, 512-page blocks.
        assert_eq!(fault_window(0, 0, 1024, 1024, 512), Some(0..512));
        assert_eq!(fault_window(700, 0, 1024, 1024, 512), Some(512..1024));
        // Mapping of buffer pages 100..300: clipped on both sides.
        assert_eq!(fault_window(100, 100, 200, 1024, 512), Some(100..300));
        assert_eq!(fault_window(299, 100, 200, 1024, 512), Some(100..300));
        // Mapping across a block boundary: only the faulting page's block.
        assert_eq!(fault_window(600, 500, 200, 1024, 512), Some(512..700));
        assert_eq!(fault_window(510, 500, 200, 1024, 512), Some(500..512));
        // A mapping larger than the buffer is clipped to the buffer.
        assert_eq!(fault_window(5, 0, 100, 10, 512), Some(0..10));
    }

    #[test]
    fn fault_window_refuses_outside() {
        assert_eq!(fault_window(99, 100, 200, 1024, 512), None);
        assert_eq!(fault_window(300, 100, 200, 1024, 512), None);
        assert_eq!(fault_window(10, 0, 100, 10, 512), None);
        assert_eq!(fault_window(0, 0, 1, 1, 0), None);
        assert_eq!(fault_window(0, usize::MAX, 2, 4, 512), None);
    }

    #[test]
    fn import_requests() {
        assert_eq!(
            parse_import_request(b"3 0000:01:00.0\n"),
            Ok((3, "0000:01:00.0", ImportMode::Revocable))
        );
        assert_eq!(
            parse_import_request(b"  17\t0000:c1:00.1 "),
            Ok((17, "0000:c1:00.1", ImportMode::Revocable))
        );
        assert_eq!(
            parse_import_request(b"3 0000:01:00.0 nopeer\n"),
            Ok((3, "0000:01:00.0", ImportMode::NoPeer))
        );
        assert_eq!(
            parse_import_request(b"3 0000:01:00.0 pinned"),
            Ok((3, "0000:01:00.0", ImportMode::Pinned))
        );
        assert_eq!(parse_import_request(b"3 0000:01:00.0 static"), Err(EINVAL));
        assert_eq!(parse_import_request(b"3"), Err(EINVAL));
        assert_eq!(parse_import_request(b"-1 0000:01:00.0"), Err(EINVAL));
        assert_eq!(parse_import_request(b"x 0000:01:00.0"), Err(EINVAL));
        assert_eq!(
            parse_import_request(b"3 0000:01:00.0 pinned more"),
            Err(EINVAL)
        );
        assert_eq!(parse_import_request(b"3 \xff"), Err(EINVAL));
    }

    #[test]
    fn fault_around_is_two_mib() {
        assert_eq!(FAULT_AROUND_PAGES * PAGE_SIZE, 2 << 20);
    }
}
