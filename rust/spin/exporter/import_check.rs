// SPDX-License-Identifier: GPL-2.0

//! A kernel importer for tests: `/sys/kernel/debug/spin_exporter/import_check`.
//!
//! Writing `<dma-buf fd> <pci-bdf> [revocable|nopeer|pinned]` attaches that PCI device to the
//! dma-buf of the writer's file descriptor as an importer of that kind (by default a revocable
//! one, as GPU and RDMA drivers are; `nopeer`: one that needs `struct page`s; `pinned`: a static
//! one), maps the buffer for its DMA, records what the device would use, then unmaps and
//! detaches. The write fails with the error of the attach or the map, e.g. `EINVAL` when the
//! device cannot reach the memory by peer-to-peer DMA, `EOPNOTSUPP` for the other kinds.
//! Reading the file shows the last result:
//!
//! - `ok segments=<n> dma=<first dma address> len=<bytes> bus_address=<0|1>`: mapped; the
//!   addresses are PCI bus addresses (`bus_address=1`) when the two devices talk through a switch;
//! - `error <errno>`: refused;
//! - `none`: nothing asked yet.

use super::policy::{self, ImportMode};
use core::fmt;
use kernel::{
    debugfs::{Dir, File},
    dma::DataDirection,
    dma_buf::{DmaBuf, ImportKind},
    new_mutex, pci,
    prelude::*,
    str::CString,
    sync::Mutex,
    uaccess::UserSliceReader,
};

/// The result of the last check.
#[derive(Clone, Copy)]
enum LastImport {
    None,
    Failed(i32),
    Mapped {
        segments: usize,
        dma_address: u64,
        len: u64,
        bus_address: bool,
    },
}

/// The data of the debugfs file.
#[pin_data]
pub(super) struct ImportCheck {
    #[pin]
    last: Mutex<LastImport>,
}

impl ImportCheck {
    /// Creates `import_check` in `dir`.
    pub(super) fn create(dir: &Dir) -> impl PinInit<File<ImportCheck>, Error> + '_ {
        dir.read_write_callback_file(
            c"import_check",
            try_pin_init!(ImportCheck {
                last <- new_mutex!(LastImport::None),
            }),
            &Self::show,
            &Self::store,
        )
    }

    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self.last.lock() {
            LastImport::None => writeln!(f, "none"),
            LastImport::Failed(errno) => writeln!(f, "error {errno}"),
            LastImport::Mapped {
                segments,
                dma_address,
                len,
                bus_address,
            } => writeln!(
                f,
                "ok segments={segments} dma={dma_address:#x} len={len} bus_address={}",
                u8::from(bus_address)
            ),
        }
    }

    fn store(&self, reader: &mut UserSliceReader) -> Result {
        let mut request = [0u8; 64];
        let len = reader.len();
        if len > request.len() {
            return Err(EINVAL);
        }
        reader.read_slice(&mut request[..len])?;
        let result = check(&request[..len]);
        *self.last.lock() = match result {
            Ok(mapped) => mapped,
            Err(err) => LastImport::Failed(err.to_errno()),
        };
        result.map(|_| ())
    }
}

/// Attaches, maps, records, unmaps and detaches; see the module documentation.
fn check(request: &[u8]) -> Result<LastImport> {
    let (fd, bdf, mode) = policy::parse_import_request(request)?;
    let dmabuf = DmaBuf::get(fd)?;
    let bdf = CString::try_from_fmt(fmt!("{bdf}"))?;
    let pdev = pci::Device::find_by_name(&bdf).ok_or(ENODEV)?;
    let kind = match mode {
        ImportMode::Revocable => ImportKind::Revocable,
        ImportMode::NoPeer => ImportKind::RevocableNoPeer,
        ImportMode::Pinned => ImportKind::Pinned,
    };
    let attachment = dmabuf.attach(pdev.as_ref(), kind)?;
    let mapping = attachment.map(DataDirection::Bidirectional)?;
    let segments = mapping.segments()?;
    let first = segments.first().ok_or(EINVAL)?;
    Ok(LastImport::Mapped {
        segments: segments.len(),
        dma_address: first.dma_address,
        len: segments.iter().map(|segment| u64::from(segment.len)).sum(),
        bus_address: segments.iter().all(|segment| segment.bus_address),
    })
}
