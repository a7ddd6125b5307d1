// SPDX-License-Identifier: GPL-2.0

//! One buffer of p2pdma memory, exported as a dma-buf.
//!
//! The dma-buf's object is a [`Buffer`]; what the buffer shares with its provider's list of live
//! buffers (so the provider can revoke it) is a [`BufferShared`]. The buffer owns one reference
//! on each of its pages until it is released or revoked; every user mapping, pin and importer
//! mapping holds references of its own, so the memory goes back to the provider's pool only when
//! the last of them is gone.

use super::{policy, provider::Provider};
use crate::router::mark_p2pdma_mapped;
use kernel::{
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
struct BufferState {
    /// The buffer's own reference on its pages; [`None`] once the buffer is revoked.
    pages: Option<P2pPages>,
    /// The address spaces the buffer was mapped into (once each).
    ///
    /// A new mapping gets its pages in `mmap`, before the core links the VMA to the dma-buf's
    /// file; a revocation racing with it would not find those page table entries. Revocation
    /// waits for the mmaps in flight by taking the mmap lock of each of these address spaces,
    /// then zaps again.
    mapped_in: KVec<ARef<Mm>>,
}

/// The part of a buffer that its provider keeps in its list of live buffers.
#[pin_data]
pub(super) struct BufferShared {
    /// The provider's PCI device, to check importers' peer-to-peer distance.
    pdev: ARef<pci::Device>,
    #[pin]
    state: Mutex<BufferState>,
}

/// What a revocation took from a buffer, see [`BufferShared::revoke`].
pub(super) struct Revoked {
    /// The buffer's page references, to drop once the user mappings are gone.
    pub(super) pages: Option<P2pPages>,
    /// The address spaces whose mmaps in flight must be waited for.
    pub(super) mapped_in: KVec<ARef<Mm>>,
}

impl BufferShared {
    /// Creates the shared state of a new buffer of `pages`, allocated from `pdev`.
    pub(super) fn new(pdev: ARef<pci::Device>, pages: P2pPages) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                pdev,
                state <- new_mutex!(BufferState {
                    pages: Some(pages),
                    mapped_in: KVec::new(),
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Revokes the buffer: faults, new mappings and importers' maps fail from now on.
    pub(super) fn revoke(&self) -> Revoked {
        let mut state = self.state.lock();
        Revoked {
            pages: state.pages.take(),
            mapped_in: core::mem::take(&mut state.mapped_in),
        }
    }

    /// Returns whether the buffer was revoked.
    fn is_revoked(&self) -> bool {
        self.state.lock().pages.is_none()
    }
}

/// Maps buffer pages `window` into `vma`, whose first page is buffer page `vma_first`.
///
/// Pages mapped already are skipped. An error for a page other than `needed` is ignored (that
/// page is mapped by its own fault later); for `needed` it is returned.
fn insert_pages(
    vma: &VmaMixedMap,
    pages: &P2pPages,
    vma_first: usize,
    window: core::ops::Range<usize>,
    needed: Option<usize>,
) -> Result {
    for index in window {
        let page = pages.page(index).ok_or(EINVAL)?;
        let address = vma.start() + (index - vma_first) * PAGE_SIZE;
        match vma.vm_insert_page(address, &page) {
            Ok(()) => {}
            // Mapped already, by a racing fault.
            Err(err) if err == EBUSY => {}
            Err(err) if needed.is_none_or(|needed| needed == index) => return Err(err),
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

    /// Refuses importers that cannot reach the provider by peer-to-peer DMA ([`EINVAL`]) and all
    /// of them once the buffer is revoked ([`ENODEV`]).
    fn attach(&self, attachment: &Attachment) -> Result {
        if self.shared.is_revoked() {
            return Err(ENODEV);
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

    /// Sets up a shared, write-combining mapping and maps all its pages.
    fn mmap(&self, _dmabuf: &DmaBuf, vma: &VmaNew) -> Result {
        policy::check_mmap_flags(vma.flags())?;
        let vma_first = vma.pgoff();
        let vma_pages = (vma.end() - vma.start()) / PAGE_SIZE;

        let mut state = self.shared.state.lock();
        let state = &mut *state;
        let pages = state.pages.as_ref().ok_or(ENODEV)?;
        let window = vma_first..vma_first.checked_add(vma_pages).ok_or(EINVAL)?;
        if window.end > pages.page_count() {
            return Err(EINVAL);
        }
        let mm: &Mm = vma.mm();
        // The router looks at the I/O of processes that mapped p2pdma memory only.
        mark_p2pdma_mapped(mm);
        if !state
            .mapped_in
            .iter()
            .any(|seen| core::ptr::eq(&**seen, mm))
        {
            state.mapped_in.push(mm.into(), GFP_KERNEL)?;
        }

        vma.set_dontexpand();
        vma.set_dontdump();
        vma.set_page_prot_writecombine();
        let vma = vma.set_mixedmap();
        // On error the core unmaps the VMA, and with it the pages mapped so far.
        insert_pages(vma, pages, vma_first, window, None)
    }

    /// Maps the faulting page again (after `madvise(MADV_DONTNEED)`, for instance), with its
    /// neighbours in the same 2 MiB block.
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
        insert_pages(vma, pages, vma_first, window, Some(fault_pgoff))
    }
}
