// SPDX-License-Identifier: GPL-2.0

//! The exporter: GPU memory (PCI p2pdma memory) as dma-bufs, one DMA-BUF heap per provider.
//!
//! For every PCI device that has published p2pdma memory (the stand-in GPU bound to
//! `p2pdma_bar`, an NVMe controller's CMB, a real GPU whose driver publishes its BAR) spin
//! registers the heap `/dev/dma_heap/p2p-<pci-bdf>`. User space allocates with
//! `DMA_HEAP_IOCTL_ALLOC` and gets a dma-buf; `mmap()` of it (shared only) maps the memory
//! write-combining, page by page with real `ZONE_DEVICE` struct pages, so `pin_user_pages()`
//! with `FOLL_PCI_P2PDMA` and thus O_DIRECT reads and writes accept it. Importing devices get PCI
//! bus addresses when the topology allows peer-to-peer DMA.
//!
//! The pieces, one job each:
//!
//! - [`policy`]: pure decisions (names, sizes, mapping checks, fault windows) and their KUnit
//!   suite `rust_spin_exporter`;
//! - [`provider`]: a provider and its heap: allocation, the list of live buffers, revocation;
//! - [`buffer`]: a buffer's dma-buf operations: attach/map for importers, mmap and fault;
//! - `import_check`: a kernel importer in debugfs, for tests (`CONFIG_SPIN_IMPORT_CHECK`);
//! - this file: finding providers (at init and through a PCI bus notifier).
//!
//! # Lifetimes
//!
//! A buffer's memory is a run of p2pdma pages, each with its own reference count. The buffer
//! holds one reference per page; every user mapping of a page, every pin (`pin_user_pages()`, as
//! taken by O_DIRECT) and every importer's DMA mapping holds another. A page goes back to the
//! provider's pool when its last reference is dropped: closing the file descriptor does not
//! invalidate mappings (they hold the dma-buf file), `fork()` copies the page table entries with
//! their references.
//!
//! When the provider's driver unbinds, the buffers are revoked ([`provider::Provider::revoke`]),
//! from the bus notifier, before the driver's `remove()`: user mappings are zapped and fault with
//! `SIGBUS` afterwards, importers (all revocable: others cannot attach) are asked to drop their
//! mappings, new mmaps and attaches fail with `ENODEV`, and the buffers drop their own page
//! references. Then, with no lock of spin held, the unbind waits until every page of the revoked
//! buffers was free once ([`P2pPages::release_and_wait`](kernel::pci::p2pdma::P2pPages)): the
//! DMA of I/O in flight and of importers is over before `remove()` may reset the device. The
//! heap stays (heaps cannot be removed) and fails allocations with `ENODEV` until a driver binds
//! to the device again.
//!
//! # Lock order
//!
//! device lock (of the unbinding provider, held around the bus notifier) → registry lock →
//! provider lock → the dma-buf file's `i_mmap_rwsem` (zap) and reservation lock (importers'
//! invalidation). The buffer lock is innermost: it is taken under the mmap lock (mmap), the VMA
//! lock or the mmap lock (fault) and the reservation lock (importer map), and nothing is acquired
//! while it is held, except page table locks when a fault inserts pages. The wait for the pages
//! holds only the device lock.

mod buffer;
#[cfg(CONFIG_SPIN_IMPORT_CHECK)]
mod import_check;
mod policy;
mod provider;

pub(crate) use buffer::mapping_provider;
#[cfg(CONFIG_SPIN_IMPORT_CHECK)]
use import_check::ImportCheck;
#[cfg(CONFIG_SPIN_IMPORT_CHECK)]
use kernel::debugfs::{Dir, File};
use kernel::{
    device,
    dma_heap::Heap,
    new_mutex,
    pci::{
        self,
        p2pdma::{ProviderEvents, ProviderNotifier},
    },
    prelude::*,
    sync::{Arc, Mutex},
    time::{Instant, Monotonic},
};
use provider::Provider;

/// The providers found so far.
#[pin_data]
struct Registry {
    #[pin]
    providers: Mutex<KVec<Arc<Provider>>>,
}

impl Registry {
    fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            providers <- new_mutex!(KVec::new()),
        })
    }

    /// Serves `pdev`'s published p2pdma memory: with its existing heap or with a new one.
    fn add(&self, pdev: &pci::Device) -> Result {
        let bdf = pdev.as_ref().name();
        let mut providers = self.providers.lock();
        if let Some(provider) = providers.iter().find(|provider| provider.is(pdev)) {
            if provider.bind(pdev) {
                pr_info!("/dev/dma_heap/p2p-{}: provider bound again\n", bdf);
            }
            return Ok(());
        }

        let name = policy::heap_name(bdf.to_str().map_err(|_| EINVAL)?)?;
        let provider = Provider::new(bdf)?;
        providers.reserve(1, GFP_KERNEL)?;
        // A new provider was unbound: nothing to report.
        let _ = provider.bind(pdev);
        Heap::register(name, provider.clone())?;
        providers.push(provider, GFP_KERNEL)?;
        pr_info!(
            "/dev/dma_heap/p2p-{}: new heap for the p2pdma memory of {}\n",
            bdf,
            bdf
        );
        Ok(())
    }
}

impl ProviderEvents for Registry {
    fn bound(&self, pdev: &pci::Device<device::Bound>) {
        if !pdev.has_p2pmem() {
            return;
        }
        if let Err(err) = self.add(pdev) {
            pr_err!(
                "no DMA-BUF heap for {}: error {}\n",
                pdev.as_ref().name(),
                err.to_errno()
            );
        }
    }

    /// Revokes the buffers of `pdev` and waits until the DMA into them is over: this runs before
    /// the driver's `remove()`, which may reset the device.
    fn unbinding(&self, pdev: &pci::Device<device::Bound>) {
        let mut revoked = KVec::new();
        {
            let providers = self.providers.lock();
            for provider in providers.iter().filter(|provider| provider.is(pdev)) {
                revoked = provider.revoke(pdev);
            }
        }
        let count = revoked.len();
        if count == 0 {
            return;
        }
        let start = Instant::<Monotonic>::now();
        for pages in revoked.drain_all() {
            pages.release_and_wait(pdev);
        }
        pr_info!(
            "p2p-{}: the DMA into {} revoked buffer(s) is over after {} us\n",
            pdev.as_ref().name(),
            count,
            start.elapsed().as_micros_ceil()
        );
    }
}

/// The exporter: follows the providers for as long as it lives.
pub(crate) struct Exporter {
    _notifier: Pin<KBox<ProviderNotifier<Registry>>>,
    // Dropped before the directory it is in.
    #[cfg(CONFIG_SPIN_IMPORT_CHECK)]
    _import_check: Pin<KBox<File<ImportCheck>>>,
    #[cfg(CONFIG_SPIN_IMPORT_CHECK)]
    _debugfs: Dir,
}

impl Exporter {
    /// Serves every PCI device that has published p2pdma memory, now and as drivers bind.
    pub(crate) fn new() -> Result<Self> {
        #[cfg(CONFIG_SPIN_IMPORT_CHECK)]
        let debugfs = Dir::new(c"spin_exporter");
        Ok(Self {
            _notifier: KBox::pin_init(ProviderNotifier::new(Registry::new()), GFP_KERNEL)?,
            #[cfg(CONFIG_SPIN_IMPORT_CHECK)]
            _import_check: KBox::pin_init(ImportCheck::create(&debugfs), GFP_KERNEL)?,
            #[cfg(CONFIG_SPIN_IMPORT_CHECK)]
            _debugfs: debugfs,
        })
    }
}
