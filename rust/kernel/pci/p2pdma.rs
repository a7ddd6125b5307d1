// SPDX-License-Identifier: GPL-2.0

//! PCI peer-to-peer DMA (p2pdma).
//!
//! C header: [`include/linux/pci-p2pdma.h`](srctree/include/linux/pci-p2pdma.h)
//!
//! A *provider* is a PCI device whose driver registers (part of) a memory BAR as p2pdma memory
//! with [`Device::p2pdma_add_resource`]: the range gets `ZONE_DEVICE` `struct page`s, so other
//! devices can DMA into it through the block layer and the DMA API like into system memory. A
//! driver that lets other subsystems allocate from that memory also *publishes* it with
//! [`Device::p2pmem_publish`].
//!
//! Memory is allocated from a provider as [`P2pPages`]: a physically contiguous run of pages,
//! each holding one reference on its folio (a provider may give its memory folios larger than a
//! page, [`Device::p2pdma_add_resource_order`]; a run then takes whole folios). A folio lives as
//! long as the last reference on any of its pages (a user mapping, a pin taken by
//! `pin_user_pages()`, a DMA mapping); the provider's teardown at unbind waits until every folio
//! is back in its pool.
//!
//! [`ProviderNotifier`] tells a subsystem when drivers bind to and unbind from PCI devices, so it
//! can follow the providers that come and go.

use crate::{
    bindings, container_of, device,
    error::to_result,
    page::{AsPageIter, BorrowedPage, PAGE_SHIFT, PAGE_SIZE},
    pci::Device,
    prelude::*,
    types::Opaque,
};
use core::{ops::Range, ptr::NonNull};

/// Returns whether `bar` is a standard BAR index, the only ones p2pdma accepts.
fn std_bar_is_valid(bar: u32) -> bool {
    bar < bindings::PCI_STD_NUM_BARS
}

impl<'a> Device<device::Core<'a>> {
    /// Registers memory of a BAR as peer-to-peer DMA memory.
    ///
    /// Gives `size` bytes of BAR `bar`, starting `offset` bytes into it, `ZONE_DEVICE` struct
    /// pages and adds them to the device's p2pdma pool. A `size` of zero means the rest of the BAR
    /// from `offset`. The registration is device managed: it is undone when the driver unbinds,
    /// after every page allocated from it has been released.
    ///
    /// Returns [`EINVAL`] if `bar` is not a standard memory BAR or the range does not fit in it,
    /// and the error of `devm_memremap_pages()` (e.g. for a range that is not aligned to the
    /// memory hotplug granularity) otherwise.
    pub fn p2pdma_add_resource(&self, bar: u32, size: usize, offset: u64) -> Result {
        self.p2pdma_add_resource_order(bar, size, offset, 0)
    }

    /// Registers memory of a BAR as peer-to-peer DMA memory in folios of order `order`.
    ///
    /// As [`Device::p2pdma_add_resource`], but the struct pages are compound pages of `order`
    /// (0: single pages). Where the architecture dedups their vmemmap, a folio's struct pages
    /// take two pages of host memory however large it is, instead of 64 bytes per 4 KiB page; in
    /// exchange, [`P2pPages::alloc`] hands the memory out in whole folios. The start and size of
    /// the range must be multiples of the folio size.
    ///
    /// Returns [`EINVAL`] if `bar` is not a standard memory BAR, the range does not fit in it or
    /// is not aligned to the folio size, or `order` is larger than the kernel's largest folio,
    /// and the error of `devm_memremap_pages()` otherwise.
    pub fn p2pdma_add_resource_order(
        &self,
        bar: u32,
        size: usize,
        offset: u64,
        order: u32,
    ) -> Result {
        if !std_bar_is_valid(bar) {
            return Err(EINVAL);
        }

        // SAFETY:
        // - `self.as_raw()` is a valid pointer to a `struct pci_dev`.
        // - The `Core` context guarantees that the device is bound and its device lock is held,
        //   as the device managed resources registered here require.
        // - `bar` is a standard BAR index, as checked above.
        to_result(unsafe {
            bindings::pci_p2pdma_add_resource_order(
                self.as_raw(),
                bar.try_into()?,
                size,
                offset,
                order,
            )
        })
    }
}

impl Device<device::Bound> {
    /// Publishes (or withdraws) the device's p2pdma memory for use by other drivers.
    ///
    /// Published memory is found by `pci_p2pmem_find()` and [`Device::has_p2pmem`]; memory that
    /// is not published is reserved for the driver that registered it. A change is reported to
    /// the p2pdma notifiers ([`ProviderNotifier`]) before this returns; withdrawing memory may
    /// therefore wait until the DMA into buffers of it that are revoked is over. Only the bound
    /// driver may call it, in any context that may sleep.
    pub fn p2pmem_publish(&self, publish: bool) {
        // SAFETY: `self.as_raw()` is a valid pointer to a `struct pci_dev`; the function handles a
        // device without p2pdma memory.
        unsafe { bindings::pci_p2pmem_publish(self.as_raw(), publish) };
    }
}

impl Device {
    /// Returns how many bytes of the device's p2pdma memory are allocated or still referenced:
    /// zero if it has none, or all of it is back in its pool.
    pub fn p2pmem_in_use(&self) -> usize {
        // SAFETY: `self.as_raw()` is a valid pointer to a `struct pci_dev`; the function reads the
        // device's p2pdma state under RCU.
        unsafe { bindings::pci_p2pmem_in_use(self.as_raw()) }
    }

    /// Returns whether the device registered peer-to-peer DMA memory and published it.
    pub fn has_p2pmem(&self) -> bool {
        // SAFETY: `self.as_raw()` is a valid pointer to a `struct pci_dev`; the function reads the
        // device's p2pdma state under RCU.
        unsafe { bindings::pci_has_p2pmem(self.as_raw()) }
    }

    /// Returns the p2pdma distance from this device, as a provider, to `client`.
    ///
    /// The distance is the number of PCI hops between the two devices. Returns [`None`] if the two
    /// cannot do peer-to-peer DMA: they share no upstream bridge and their host bridge is not
    /// known to forward peer-to-peer traffic, or an ACS redirect is on the path.
    pub fn p2pdma_distance(&self, client: &device::Device) -> Option<u32> {
        // SAFETY: `self.as_raw()` is a valid pointer to a `struct pci_dev` and `client.as_raw()`
        // a valid pointer to a `struct device`; both stay valid for the duration of the call.
        let distance =
            unsafe { bindings::pci_p2pdma_distance(self.as_raw(), client.as_raw(), false) };
        u32::try_from(distance).ok()
    }
}

/// A physically contiguous run of peer-to-peer DMA pages of one provider.
///
/// Obtained with [`P2pPages::alloc`]. Every page holds a reference on its folio (a single page,
/// or a compound page of memory registered with [`Device::p2pdma_add_resource_order`]), and
/// every folio a reference on the provider's page map; a [`P2pPages`] owns one reference on each
/// of its pages and drops them when it is dropped. The last reference to a folio, wherever it is
/// held, frees the folio back into the provider's pool.
///
/// # Invariants
///
/// The `count` pages starting at page frame number `first_pfn` are `count > 0` consecutive
/// p2pdma pages, and `self` owns one reference on each of them.
pub struct P2pPages {
    first_pfn: usize,
    count: usize,
}

// SAFETY: The references a `P2pPages` owns can be dropped on any thread.
unsafe impl Send for P2pPages {}

// SAFETY: `P2pPages` has no interior mutability; its methods only read immutable fields.
unsafe impl Sync for P2pPages {}

impl P2pPages {
    /// Allocates `size` bytes of peer-to-peer DMA memory from `provider`.
    ///
    /// `size` must be a non-zero multiple of [`PAGE_SIZE`] ([`EINVAL`] otherwise). Returns
    /// [`ENOMEM`] if `provider` has no p2pdma memory or no free contiguous range of `size` bytes
    /// rounded up to whole folios.
    /// Nothing is allocated on error. Memory in folios larger than a page is handed out in whole
    /// folios: the run's last folio may extend past `size`, unused until the run is freed.
    pub fn alloc(provider: &Device, size: usize) -> Result<Self> {
        if size == 0 || size % PAGE_SIZE != 0 {
            return Err(EINVAL);
        }

        // SAFETY: `provider.as_raw()` is a valid pointer to a `struct pci_dev`. The function reads
        // the device's p2pdma state under RCU and refuses once the provider's memory is being
        // unmapped, so it may race with the provider's unbind: it then fails.
        let page = unsafe { bindings::pci_p2pmem_alloc_pages(provider.as_raw(), size) };
        if page.is_null() {
            return Err(ENOMEM);
        }

        // SAFETY: `page` is a valid page, just allocated.
        let first_pfn = unsafe { bindings::page_to_pfn(page) };

        // INVARIANT: `pci_p2pmem_alloc_pages()` returned `size / PAGE_SIZE > 0` consecutive pages,
        // each with one reference that is now owned by the new object.
        Ok(Self {
            first_pfn,
            count: size >> PAGE_SHIFT,
        })
    }

    /// Returns the number of pages.
    pub fn page_count(&self) -> usize {
        self.count
    }

    /// Returns the size in bytes.
    pub fn size(&self) -> usize {
        self.count << PAGE_SHIFT
    }

    /// Returns the CPU physical address of the first byte.
    pub fn phys_addr(&self) -> bindings::phys_addr_t {
        // CAST: a page frame number shifted by `PAGE_SHIFT` is a physical address.
        (self.first_pfn as bindings::phys_addr_t) << PAGE_SHIFT
    }

    /// Returns a raw pointer to page `index`, which must be less than `self.count`.
    fn page_ptr(&self, index: usize) -> NonNull<bindings::page> {
        debug_assert!(index < self.count);
        // SAFETY: By the type invariants, `first_pfn + index` is the page frame number of one of
        // our pages, which has a valid `struct page`.
        let page = unsafe { bindings::pfn_to_page(self.first_pfn + index) };
        // SAFETY: `pfn_to_page()` of a valid page frame number is not null.
        unsafe { NonNull::new_unchecked(page) }
    }

    /// Returns page `index`, or [`None`] if `index` is not less than [`P2pPages::page_count`].
    pub fn page(&self, index: usize) -> Option<BorrowedPage<'_>> {
        if index >= self.count {
            return None;
        }
        // SAFETY: `self` owns a reference on the page, so it stays valid while `self` is borrowed.
        Some(unsafe { BorrowedPage::from_raw(self.page_ptr(index)) })
    }

    /// Takes one more reference on every page and returns it as a new [`P2pPages`].
    ///
    /// The pages go back to the pool only when both `self` and the returned object are dropped
    /// (and every other reference is gone). May sleep: a large run is referenced with reschedule
    /// points.
    pub fn clone_ref(&self) -> Self {
        // SAFETY: The pages are a run allocated by `pci_p2pmem_alloc_pages()` of `self.size()`
        // bytes, and we own a reference on each of them (type invariants).
        unsafe { bindings::pci_p2pmem_get_pages(self.page_ptr(0).as_ptr(), self.size()) };
        // INVARIANT: We just took one reference on each page for the new object.
        Self {
            first_pfn: self.first_pfn,
            count: self.count,
        }
    }

    /// Drops the references of `self`, then waits until every page of the run has been free
    /// once: until the references others held (pins of DMA in flight, importers' DMA mappings)
    /// are gone too.
    ///
    /// For the owner of memory of a provider whose driver is unbinding: once this returns, no
    /// DMA into the run is in flight, and the driver may reset its device. A page that is
    /// allocated anew after it was free does not extend the wait. If `provider` is not the
    /// provider of the pages, the references are dropped without waiting.
    ///
    /// Sleeps, without a time limit, warning periodically while a page is still held.
    pub fn release_and_wait(self, provider: &Device<device::Bound>) {
        let this = core::mem::ManuallyDrop::new(self);
        let first = this.page_ptr(0);
        // SAFETY: `first` is a valid p2pdma page (type invariants).
        let owner = NonNull::new(unsafe { bindings::pci_p2pdma_page_provider(first.as_ptr()) });
        let ours = owner.is_some_and(|o| core::ptr::eq(o.as_ptr(), provider.as_raw()));
        if let Some(owner) = owner {
            // SAFETY: `pci_p2pdma_page_provider()` returned the device with a reference held,
            // which is dropped here, once; only its address was used.
            unsafe { bindings::pci_dev_put(owner.as_ptr()) };
        }
        // SAFETY: The pages are a run of `this.size()` bytes allocated by
        // `pci_p2pmem_alloc_pages()`, on which we own one reference each (type invariants);
        // `this` is never dropped, so they are dropped exactly once.
        unsafe { bindings::pci_p2pmem_put_pages(first.as_ptr(), this.size()) };
        if !ours {
            return;
        }
        // SAFETY: The run was allocated from `provider`, whose driver is bound (`Bound`
        // context): its page map, and with it the pages' `struct page`s, stay valid.
        unsafe { bindings::pci_p2pmem_wait_free(first.as_ptr(), this.size()) };
    }
}

impl Drop for P2pPages {
    /// Drops the references; may sleep (a large run is released with reschedule points).
    fn drop(&mut self) {
        // SAFETY: The pages are a run of `self.size()` bytes allocated by
        // `pci_p2pmem_alloc_pages()`; by the type invariants we own one reference on each page,
        // dropped here, exactly once.
        unsafe { bindings::pci_p2pmem_put_pages(self.page_ptr(0).as_ptr(), self.size()) };
    }
}

/// An iterator over the pages of a [`P2pPages`].
pub struct P2pPageIter<'a> {
    pages: &'a P2pPages,
    range: Range<usize>,
}

impl<'a> Iterator for P2pPageIter<'a> {
    type Item = BorrowedPage<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let index = self.range.next()?;
        self.pages.page(index)
    }
}

impl AsPageIter for P2pPages {
    type Iter<'a> = P2pPageIter<'a>;

    fn page_iter(&mut self) -> Self::Iter<'_> {
        P2pPageIter {
            range: 0..self.count,
            pages: self,
        }
    }
}

/// Events of PCI devices that may provide p2pdma memory, see [`ProviderNotifier`].
pub trait ProviderEvents: Send + Sync {
    /// A driver has been bound to `pdev`, or the bound driver of `pdev` has published p2pdma
    /// memory (or added to published memory) since.
    ///
    /// Called after the driver's probe returned successfully, with the device lock held: if the
    /// driver registers and publishes p2pdma memory in probe, [`Device::has_p2pmem`] is true now.
    /// Called again, in the context of the driver's `pci_p2pmem_publish()` or
    /// `pci_p2pdma_add_resource()` call, when it publishes later: it must be idempotent.
    fn bound(&self, pdev: &Device<device::Bound>);

    /// The driver of `pdev` is about to be unbound, or has withdrawn its published p2pdma
    /// memory.
    ///
    /// Called with the device lock held, before the driver's remove callback, or in the context
    /// of the driver's `pci_p2pmem_publish(pdev, false)`. The device's p2pdma memory is still
    /// registered; its teardown follows and waits until all pages allocated from it are
    /// released, so this is the place to drop the references that would block it.
    fn unbinding(&self, pdev: &Device<device::Bound>);
}

/// A registration for the bind and unbind events of PCI devices, and for p2pdma memory that is
/// published or withdrawn while a driver is bound.
///
/// Registers a PCI bus notifier and a p2pdma notifier (`pci_p2pdma_register_notifier()`) that
/// call [`ProviderEvents::bound`] and [`ProviderEvents::unbinding`] of `T`; both are
/// unregistered when the object is dropped. Devices that are bound already when the
/// registration is made are reported to [`ProviderEvents::bound`] too, right after the
/// registration: a device that binds meanwhile may be reported twice, so `bound` must be
/// idempotent.
///
/// # Invariants
///
/// `nb` is registered as a notifier of `pci_bus_type` for the lifetime of the object; `pnb` is
/// registered as a p2pdma notifier from the end of the initialisation on.
#[pin_data(PinnedDrop)]
pub struct ProviderNotifier<T: ProviderEvents> {
    #[pin]
    data: T,
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    #[pin]
    pnb: Opaque<bindings::notifier_block>,
}

// SAFETY: The notifier can be unregistered on any thread; `T` is `Send`.
unsafe impl<T: ProviderEvents> Send for ProviderNotifier<T> {}

// SAFETY: `&self` only gives access to `data`, and `T` is `Sync`.
unsafe impl<T: ProviderEvents> Sync for ProviderNotifier<T> {}

impl<T: ProviderEvents> ProviderNotifier<T> {
    /// Registers a notifier that reports PCI bind and unbind events to `data`.
    pub fn new(data: impl PinInit<T, Error>) -> impl PinInit<Self, Error> {
        let init = try_pin_init!(Self {
            // `data` is initialised first: the notifier may be called as soon as it is
            // registered below.
            data <- data,
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: The initialiser may write to `slot`.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_call),
                        ..pin_init::zeroed()
                    })
                };
                // SAFETY: `slot` is a valid, pinned `notifier_block` that stays registered until
                // `PinnedDrop::drop` unregisters it, before the memory goes away.
                // INVARIANT: On success the notifier is registered.
                to_result(unsafe {
                    bindings::bus_register_notifier(&raw const bindings::pci_bus_type, slot)
                })
            }),
            pnb <- Opaque::ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: The initialiser may write to `slot`.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::p2pdma_call),
                        ..pin_init::zeroed()
                    })
                };
            }),
        });
        init.pin_chain(|this| {
            // SAFETY: `pnb` is a valid, pinned `notifier_block` that stays registered until
            // `PinnedDrop::drop` unregisters it, before the memory goes away. On failure the
            // object is dropped, which unregisters `nb` (and tries `pnb`, which is harmless).
            // INVARIANT: On success `pnb` is registered.
            to_result(unsafe { bindings::pci_p2pdma_register_notifier(this.pnb.get()) })?;
            this.as_ref().replay_bound();
            Ok(())
        })
    }

    /// Reports every PCI device that is bound to a driver to [`ProviderEvents::bound`].
    fn replay_bound(self: Pin<&Self>) {
        // SAFETY: `pci_bus_type` is a valid bus; `replay_one` gets `self` as its data, which
        // outlives the call.
        unsafe {
            bindings::bus_for_each_dev(
                &raw const bindings::pci_bus_type,
                core::ptr::null_mut(),
                core::ptr::from_ref(self.get_ref()).cast_mut().cast(),
                Some(Self::replay_one),
            )
        };
    }

    /// # Safety
    ///
    /// `dev` must be a device of `pci_bus_type` that `bus_for_each_dev()` holds a reference on,
    /// and `data` a pointer to a live [`ProviderNotifier<T>`].
    unsafe extern "C" fn replay_one(dev: *mut bindings::device, data: *mut c_void) -> c_int {
        // SAFETY: By the safety requirements `data` points to a live `ProviderNotifier<T>`.
        let this = unsafe { &*data.cast::<Self>() };

        // SAFETY: `dev` is valid: `bus_for_each_dev()` holds a reference on it.
        unsafe { bindings::device_lock(dev) };
        // SAFETY: `dev` is valid; its driver pointer is stable while its device lock is held.
        if !unsafe { (*dev).driver }.is_null() {
            // SAFETY: `dev` is embedded in a `struct pci_dev` (it is on `pci_bus_type`); it is
            // bound to a driver and its device lock is held until the call returns, as
            // `Device<Bound>` requires.
            let pdev = unsafe {
                &*container_of!(dev, bindings::pci_dev, dev).cast::<Device<device::Bound>>()
            };
            this.data.bound(pdev);
        }
        // SAFETY: We locked the device above.
        unsafe { bindings::device_unlock(dev) };
        0
    }

    /// Returns the data the events are reported to.
    pub fn data(&self) -> &T {
        &self.data
    }

    /// # Safety
    ///
    /// `nb` must be the `nb` field of a registered [`ProviderNotifier<T>`], and `data` the
    /// `struct device` of a notification of `pci_bus_type`.
    unsafe extern "C" fn notifier_call(
        nb: *mut bindings::notifier_block,
        action: c_ulong,
        data: *mut c_void,
    ) -> c_int {
        let bound = match bindings::bus_notifier_event::try_from(action) {
            Ok(bindings::bus_notifier_event_BUS_NOTIFY_BOUND_DRIVER) => true,
            Ok(bindings::bus_notifier_event_BUS_NOTIFY_UNBIND_DRIVER) => false,
            _ => return bindings::NOTIFY_DONE as c_int,
        };

        // SAFETY: By the safety requirements, `nb` is the `nb` field of a `ProviderNotifier<T>`,
        // which is pinned and alive while it is registered.
        let this =
            unsafe { &*container_of!(nb.cast::<Opaque<bindings::notifier_block>>(), Self, nb) };

        // SAFETY: Notifications of `pci_bus_type` carry the `struct device` embedded in a valid
        // `struct pci_dev`, valid for the duration of the call. For `BUS_NOTIFY_BOUND_DRIVER` and
        // `BUS_NOTIFY_UNBIND_DRIVER` the device is bound to its driver and its device lock is
        // held for the whole call, which is what `Device<Bound>` requires.
        let pdev = unsafe {
            &*container_of!(data.cast::<bindings::device>(), bindings::pci_dev, dev)
                .cast::<Device<device::Bound>>()
        };

        if bound {
            this.data.bound(pdev);
        } else {
            this.data.unbinding(pdev);
        }
        bindings::NOTIFY_OK as c_int
    }
}

impl<T: ProviderEvents> ProviderNotifier<T> {
    /// # Safety
    ///
    /// `nb` must be the `pnb` field of a registered [`ProviderNotifier<T>`], and `data` the
    /// `struct pci_dev` of a p2pdma notification.
    unsafe extern "C" fn p2pdma_call(
        nb: *mut bindings::notifier_block,
        action: c_ulong,
        data: *mut c_void,
    ) -> c_int {
        let published = match bindings::pci_p2pdma_event::try_from(action) {
            Ok(bindings::pci_p2pdma_event_PCI_P2PDMA_PUBLISHED) => true,
            Ok(bindings::pci_p2pdma_event_PCI_P2PDMA_WITHDRAWN) => false,
            _ => return bindings::NOTIFY_DONE as c_int,
        };
        // SAFETY: By the safety requirements, `nb` is the `pnb` field of a
        // `ProviderNotifier<T>`, which is pinned and alive while it is registered.
        let this =
            unsafe { &*container_of!(nb.cast::<Opaque<bindings::notifier_block>>(), Self, pnb) };
        // SAFETY: p2pdma notifications carry a valid `struct pci_dev`, for the duration of the
        // call. They come from `pci_p2pmem_publish()` and `pci_p2pdma_add_resource()`, which
        // only the driver bound to the device calls (the p2pdma state is device managed: it
        // exists while a driver is bound), from its own code: the device stays bound for the
        // call, as `Device<Bound>` requires.
        let pdev = unsafe { &*data.cast::<Device<device::Bound>>() };
        if published {
            this.data.bound(pdev);
        } else {
            this.data.unbinding(pdev);
        }
        bindings::NOTIFY_OK as c_int
    }
}

#[pinned_drop]
impl<T: ProviderEvents> PinnedDrop for ProviderNotifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `pnb` is registered (type invariants) or, if the initialisation failed before
        // it was, unknown to the chain, which the unregistration then ignores. Unregistering
        // waits for running callbacks (the chain's rwsem).
        unsafe { bindings::pci_p2pdma_unregister_notifier(self.pnb.get()) };
        // SAFETY: By the type invariants the notifier is registered with `pci_bus_type`;
        // `bus_unregister_notifier()` waits for running callbacks (the chain's rwsem) before it
        // returns, so `self` is not used afterwards.
        unsafe {
            bindings::bus_unregister_notifier(&raw const bindings::pci_bus_type, self.nb.get())
        };
    }
}
