// SPDX-License-Identifier: GPL-2.0

//! One provider: a PCI device with published p2pdma memory, and the DMA-BUF heap that serves it.
//!
//! A provider outlives its device's driver: DMA-BUF heaps cannot be removed, so the heap (and this
//! object, its data) stays when the driver unbinds and serves the device again when a driver binds
//! and publishes p2pdma memory anew. In between, allocations fail with [`ENODEV`].

use super::{
    buffer::{Buffer, BufferShared},
    policy,
};
use kernel::{
    dma_buf::{DmaBuf, WeakDmaBuf},
    dma_heap::HeapOperations,
    new_mutex,
    pci::{self, p2pdma::P2pPages},
    prelude::*,
    str::{CStr, CString},
    sync::{aref::ARef, Arc, ArcBorrow, Mutex},
};

/// A live buffer of a provider.
struct Entry {
    shared: Arc<BufferShared>,
    /// Valid while the entry is in the list: [`Buffer`]'s drop removes it under the list's lock.
    dmabuf: WeakDmaBuf,
}

/// The state of a provider, under its lock.
struct ProviderInner {
    /// The device while its driver is bound and the memory published; [`None`] otherwise.
    pdev: Option<ARef<pci::Device>>,
    /// Number of revocations so far; an allocation that raced with one fails.
    generation: u64,
    /// The buffers that are neither released nor revoked.
    buffers: KVec<Entry>,
}

/// A PCI device with published p2pdma memory, and the data of its DMA-BUF heap.
#[pin_data]
pub(super) struct Provider {
    /// The device's PCI name, e.g. `0000:04:00.0`.
    bdf: CString,
    #[pin]
    inner: Mutex<ProviderInner>,
}

impl Provider {
    /// Creates the provider of the device named `bdf`, with no device bound yet.
    pub(super) fn new(bdf: &CStr) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                bdf: bdf.to_cstring()?,
                inner <- new_mutex!(ProviderInner {
                    pdev: None,
                    generation: 0,
                    buffers: KVec::new(),
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Returns the PCI name of the provider's device.
    pub(super) fn bdf(&self) -> &CStr {
        &self.bdf
    }

    /// Returns whether `pdev` is the provider's device.
    pub(super) fn is(&self, pdev: &pci::Device) -> bool {
        pdev.as_ref().name() == self.bdf()
    }

    /// The provider's device is bound and has published p2pdma memory: serve allocations.
    ///
    /// Returns whether the provider was unbound before (a device may be reported twice).
    pub(super) fn bind(&self, pdev: &pci::Device) -> bool {
        self.inner.lock().pdev.replace(pdev.into()).is_none()
    }

    /// The provider's device is unbinding: revoke every buffer.
    ///
    /// New allocations fail with [`ENODEV`]; every buffer is revoked (see
    /// [`BufferShared::revoke`]), its user mappings are zapped (a later access gets `SIGBUS`) and
    /// importers are told to drop their mappings (all of them are revocable, see
    /// [`Buffer`]'s `attach`). Returns the buffers' own page references: the caller drops them
    /// with [`P2pPages::release_and_wait`] once no lock is held, so that the DMA still in flight
    /// (pins of I/O, importers' mappings) is over before the driver's `remove()` runs.
    pub(super) fn revoke(&self, pdev: &pci::Device) -> KVec<P2pPages> {
        let mut revoked = KVec::new();
        let mut inner = self.inner.lock();
        if inner
            .pdev
            .as_deref()
            .is_none_or(|bound| !core::ptr::eq(bound, pdev))
        {
            return revoked;
        }
        inner.pdev = None;
        inner.generation += 1;

        let count = inner.buffers.len();
        // Without room for the page references, they are dropped here, without waiting.
        let _ = revoked.reserve(count, GFP_KERNEL);
        for entry in inner.buffers.drain_all() {
            // SAFETY: The entry was in the list until now and the list's lock is held: the
            // buffer's drop, which removes the entry under this lock, has not run.
            let dmabuf = unsafe { entry.dmabuf.upgrade() };
            let pages = entry.shared.revoke();
            // Without a reference to the dma-buf there is no mapping (each holds one) and no
            // mmap in flight (it holds one too).
            if let Some(dmabuf) = dmabuf {
                // Every page table entry was made by a fault before the revocation, on a VMA
                // linked to the dma-buf's file: the zap finds them all.
                dmabuf.zap_user_mappings();
                dmabuf.invalidate_importer_mappings();
                // `dma_buf_put()` defers the final release (to task work or a work item), so
                // dropping the reference under the lock cannot re-enter `Buffer::drop`.
                drop(dmabuf);
            }
            if let Some(pages) = pages {
                // A failed push drops the references, without waiting.
                let _ = revoked.push(pages, GFP_KERNEL);
            }
        }
        drop(inner);
        pr_info!(
            "p2p-{}: provider unbinding, {} buffer(s) revoked\n",
            self.bdf(),
            count
        );
        revoked
    }

    /// Forgets a released buffer.
    pub(super) fn forget(&self, shared: &Arc<BufferShared>) {
        self.inner
            .lock()
            .buffers
            .retain(|entry| !Arc::ptr_eq(&entry.shared, shared));
    }
}

#[vtable]
impl HeapOperations for Provider {
    /// Allocates a buffer of the provider's p2pdma memory.
    ///
    /// Errors: [`EINVAL`] for heap flags or a zero length, [`ENODEV`] while no driver has the
    /// device bound (or if it unbinds meanwhile), [`ENOMEM`] if the provider has no free
    /// contiguous range of the size (nothing is allocated then).
    fn allocate(
        this: ArcBorrow<'_, Self>,
        len: usize,
        fd_flags: u32,
        heap_flags: u64,
    ) -> Result<ARef<DmaBuf>> {
        let size = policy::alloc_size(len, heap_flags)?;
        let (pdev, generation) = {
            let inner = this.inner.lock();
            (inner.pdev.clone().ok_or(ENODEV)?, inner.generation)
        };

        let pages = P2pPages::alloc(&pdev, size)?;
        let shared = BufferShared::new(pdev, pages)?;
        let buffer = Buffer::new(shared.clone(), this.into());
        let dmabuf = DmaBuf::export(buffer, size, fd_flags)?;

        let mut inner = this.inner.lock();
        if inner.pdev.is_none() || inner.generation != generation {
            // The provider was revoked meanwhile, without this buffer (not mapped yet).
            drop(inner);
            drop(shared.revoke());
            return Err(ENODEV);
        }
        inner.buffers.push(
            Entry {
                shared,
                dmabuf: dmabuf.downgrade(),
            },
            GFP_KERNEL,
        )?;
        drop(inner);
        Ok(dmabuf)
    }
}
