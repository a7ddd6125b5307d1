// SPDX-License-Identifier: GPL-2.0

//! One buffer of p2pdma memory, exported as a dma-buf.
//!
//! The dma-buf's object is a [`Buffer`]; what the buffer shares with its provider's list of live
//! buffers (so the provider can revoke it) is a [`BufferShared`]. The buffer owns one reference
//! on each of its pages until it is released or revoked; every user mapping, pin and importer
//! mapping holds references of its own, so the memory goes back to the provider's pool only when
//! the last of them is gone.

use super::{policy, provider::Provider};
use kernel::{
    bindings,
    dma::DataDirection,
    dma_buf::{self, Attachment, DmaBuf, Fault, SgTableMapping},
    mm::{
        virt::{VmaMixedMap, VmaNew, VmaRef},
        Mm,
    },
    new_mutex,
    page::PAGE_SIZE,
    pci::{self, p2pdma::P2pPages},
    prelude::*,
    sync::{aref::ARef, Arc, Mutex},
};

/// The mutable state of a buffer, under its lock.
///
/// User mappings get their pages only in [`Buffer::fault`], under this lock, on a VMA that is
/// linked to the dma-buf's file: a revocation takes the pages under the lock, then zaps that
/// file's mappings, and so finds every page table entry a fault made before it; faults after it
/// fail. Nothing of the address spaces that map the buffer is kept.
struct BufferState {
    /// The buffer's own reference on its pages; [`None`] once the buffer is revoked.
    pages: Option<P2pPages>,
}

/// The part of a buffer that its provider keeps in its list of live buffers.
#[pin_data]
pub(super) struct BufferShared {
    /// The provider's PCI device, to check importers' peer-to-peer distance.
    pdev: ARef<pci::Device>,
    #[pin]
    state: Mutex<BufferState>,
}

impl BufferShared {
    /// Creates the shared state of a new buffer of `pages`, allocated from `pdev`.
    pub(super) fn new(pdev: ARef<pci::Device>, pages: P2pPages) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                pdev,
                state <- new_mutex!(BufferState { pages: Some(pages) }),
            }),
            GFP_KERNEL,
        )
    }

    /// Revokes the buffer: faults, new mappings and importers' maps fail from now on.
    ///
    /// Returns the buffer's page references, to drop once its user mappings are zapped.
    pub(super) fn revoke(&self) -> Option<P2pPages> {
        self.state.lock().pages.take()
    }

    /// Returns whether the buffer was revoked.
    fn is_revoked(&self) -> bool {
        self.state.lock().pages.is_none()
    }
}

/// Notes in `mm` that a user mapping of p2pdma memory is being made in it (`MMF_P2PDMA`, patch
/// `mm/0002`): the router looks at the requests of such processes only.
fn mark_p2pdma_mapped(mm: &Mm) {
    // SAFETY: `mm` is a valid mm for the duration of the borrow.
    unsafe { bindings::spin_mm_mark_p2pdma(mm.as_raw()) };
}

/// Maps buffer pages `window` into `vma`, whose first page is buffer page `vma_first`.
///
/// Pages mapped already are skipped. An error for a page other than `needed` (the faulting one)
/// is ignored (that page is mapped by its own fault later); for `needed` it is returned.
fn insert_pages(
    vma: &VmaMixedMap,
    pages: &P2pPages,
    vma_first: usize,
    window: core::ops::Range<usize>,
    needed: usize,
) -> Result {
    for index in window {
        let page = pages.page(index).ok_or(EINVAL)?;
        let address = vma.start() + (index - vma_first) * PAGE_SIZE;
        match vma.vm_insert_page(address, &page) {
            Ok(()) => {}
            // Mapped already, by a racing fault.
            Err(err) if err == EBUSY => {}
            Err(err) if index == needed => return Err(err),
            Err(_) => {}
        }
    }
    Ok(())
}

/// The exporter's object of a dma-buf of p2pdma memory.
pub(super) struct Buffer {
    shared: Arc<BufferShared>,
    provider: Arc<Provider>,
}

impl Buffer {
    /// Returns the object of a new dma-buf of `shared`, allocated from `provider`.
    pub(super) fn new(shared: Arc<BufferShared>, provider: Arc<Provider>) -> Self {
        Self { shared, provider }
    }
}

/// Returns the provider of the GPU memory behind `vma` if it is a user mapping of a spin
/// buffer, for the router.
pub(crate) fn mapping_provider(vma: &VmaRef) -> Option<ARef<pci::Device>> {
    dma_buf::vma_exporter_data::<Buffer>(vma).map(|buffer| buffer.shared.pdev.clone())
}

impl Drop for Buffer {
    /// The dma-buf is released: no file descriptor, mapping or kernel reference is left.
    fn drop(&mut self) {
        self.provider.forget(&self.shared);
    }
}

/// The VMA operations of spin's user mappings: their address tells the router a mapping is
/// spin's ([`mapping_provider`]).
static BUFFER_VM_OPS: dma_buf::VmOps<Buffer> = dma_buf::VmOps::new();

#[vtable]
impl dma_buf::Operations for Buffer {
    type MapPages = P2pPages;

    const VM_OPS: Option<&'static dma_buf::VmOps<Self>> = Some(&BUFFER_VM_OPS);

    /// Refuses importers that cannot reach the provider by peer-to-peer DMA ([`EINVAL`]), that
    /// do not take peer memory or do not drop their mappings when asked to ([`EOPNOTSUPP`], as
    /// vfio-pci's exporter does: their mappings would keep the provider's unbind waiting for as
    /// long as they like), and all of them once the buffer is revoked ([`ENODEV`]).
    fn attach(&self, attachment: &Attachment) -> Result {
        if self.shared.is_revoked() {
            return Err(ENODEV);
        }
        if !attachment.peer2peer() || !attachment.is_revocable() {
            pr_debug!(
                "p2p-{}: refused importer {}: {}\n",
                self.provider.bdf(),
                attachment.device().name(),
                if attachment.peer2peer() {
                    "it cannot be revoked"
                } else {
                    "it does not take peer memory"
                }
            );
            return Err(EOPNOTSUPP);
        }
        if self
            .shared
            .pdev
            .p2pdma_distance(attachment.device())
            .is_none()
        {
            pr_debug!(
                "p2p-{}: refused importer {}: no peer-to-peer path\n",
                self.provider.bdf(),
                attachment.device().name()
            );
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Maps the pages for the importer; the mapping holds its own page references.
    fn map(
        &self,
        attachment: &Attachment,
        dir: DataDirection,
    ) -> Result<KBox<SgTableMapping<P2pPages>>> {
        let pages = self
            .shared
            .state
            .lock()
            .pages
            .as_ref()
            .ok_or(ENODEV)?
            .clone_ref();
        SgTableMapping::new(attachment.device(), pages, dir)
    }

    /// Sets up a shared, write-combining mapping. Its pages are mapped by [`Buffer::fault`], 2 MiB
    /// at a time, as they are first touched (by the CPU or by `pin_user_pages()`).
    fn mmap(&self, _dmabuf: &DmaBuf, vma: &VmaNew) -> Result {
        policy::check_mmap_flags(vma.flags())?;
        let vma_first = vma.pgoff();
        let vma_pages = (vma.end() - vma.start()) / PAGE_SIZE;

        let state = self.shared.state.lock();
        let pages = state.pages.as_ref().ok_or(ENODEV)?;
        let end = vma_first.checked_add(vma_pages).ok_or(EINVAL)?;
        if end > pages.page_count() {
            return Err(EINVAL);
        }
        drop(state);
        // The router looks at the I/O of processes that mapped p2pdma memory only.
        mark_p2pdma_mapped(vma.mm());

        vma.set_dontexpand();
        vma.set_dontdump();
        vma.set_page_prot_writecombine();
        vma.set_mixedmap();
        Ok(())
    }

    /// Maps the faulting page, with its neighbours in the same 2 MiB block: on first touch, and
    /// again after `madvise(MADV_DONTNEED)`, for instance.
    fn fault(&self, fault: &Fault) -> Result {
        let state = self.shared.state.lock();
        // Revoked: the mapping now faults with SIGBUS.
        let pages = state.pages.as_ref().ok_or(ENODEV)?;
        let vma = fault.vma().as_mixedmap_vma().ok_or(EINVAL)?;

        let fault_pgoff = fault.pgoff();
        let vma_first = fault_pgoff
            .checked_sub((fault.address() - vma.start()) / PAGE_SIZE)
            .ok_or(EINVAL)?;
        let vma_pages = (vma.end() - vma.start()) / PAGE_SIZE;
        let window = policy::fault_window(
            fault_pgoff,
            vma_first,
            vma_pages,
            pages.page_count(),
            policy::FAULT_AROUND_PAGES,
        )
        .ok_or(EFAULT)?;
        insert_pages(vma, pages, vma_first, window, fault_pgoff)
    }
}
