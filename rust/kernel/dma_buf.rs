// SPDX-License-Identifier: GPL-2.0

//! DMA-BUF: buffers shared between drivers and with user space.
//!
//! C header: [`include/linux/dma-buf.h`](srctree/include/linux/dma-buf.h)
//!
//! This module is the exporter's side of dma-buf. An exporter owns some memory and hands it out
//! as a [`DmaBuf`], created with [`DmaBuf::export`]: the dma-buf is a file that user space holds
//! as a file descriptor and can `mmap()`, and that other drivers (*importers*) attach to in order
//! to DMA into it. What happens on these operations is defined by the exporter's implementation
//! of [`Operations`]; the exporter's object lives inside the dma-buf and is dropped when the last
//! reference to the dma-buf (file descriptor, mapping, kernel reference) is gone.
//!
//! Importers get the buffer as a scatter-gather table mapped for their device, built by the
//! exporter from pages with [`SgTableMapping::new`]: the mapping keeps its own reference to the
//! pages, so they stay valid until the importer unmaps, whatever the exporter does meanwhile.
//!
//! User mappings are set up by [`Operations::mmap`]; an exporter that maps its pages on demand
//! implements [`Operations::fault`] as well.
//!
//! The importer's side is minimal: [`DmaBuf::get`] of a file descriptor, [`DmaBuf::attach`] of a
//! device and [`ImportAttachment::map`] for DMA, enough to check an exporter from the kernel.

use crate::{
    bindings, container_of, device,
    dma::DataDirection,
    error::{from_result, to_result, VTABLE_DEFAULT_ERROR},
    mm::virt::{VmaNew, VmaRef},
    module::{this_module, ModuleMetadata},
    page::{AsPageIter, PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};
use core::{marker::PhantomData, ptr::NonNull};

/// A dma-buf.
///
/// Corresponds to the C `struct dma_buf`. The reference count of a dma-buf is the one of its file.
///
/// # Invariants
///
/// The inner `struct dma_buf` is valid, and its file holds at least one reference while a
/// `&DmaBuf` exists.
#[repr(transparent)]
pub struct DmaBuf(Opaque<bindings::dma_buf>);

// SAFETY: A dma-buf can be used and released on any thread.
unsafe impl Send for DmaBuf {}

// SAFETY: The methods of `DmaBuf` take the locks they need; the dma-buf core is thread safe.
unsafe impl Sync for DmaBuf {}

// SAFETY: The reference count of a dma-buf is the one of its file: `get_dma_buf()` increments it
// and `dma_buf_put()` decrements it, releasing the dma-buf when it drops to zero.
unsafe impl AlwaysRefCounted for DmaBuf {
    fn inc_ref(&self) {
        // SAFETY: The existence of `&self` guarantees that the reference count is not zero.
        unsafe { bindings::get_dma_buf(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference to the dma-buf and gives it up here.
        unsafe { bindings::dma_buf_put(obj.cast().as_ptr()) };
    }
}

impl DmaBuf {
    /// Exports a new dma-buf of `size` bytes, whose operations are those of `T`.
    ///
    /// `data` is the exporter's object for the buffer; it is dropped when the dma-buf is released.
    /// `flags` are the file flags of the dma-buf (`O_CLOEXEC`, `O_ACCMODE`). The size of a dma-buf
    /// never changes; a user mapping must fit in it.
    pub fn export<T: Operations>(data: T, size: usize, flags: u32) -> Result<ARef<DmaBuf>> {
        // Turned back into a `KBox<T>` in `release` (or below, on error).
        let data = KBox::into_raw(KBox::new(data, GFP_KERNEL)?);

        let module = this_module::<T::OwnerModule>();
        let info = bindings::dma_buf_export_info {
            exp_name: <T::OwnerModule as ModuleMetadata>::NAME.as_char_ptr(),
            owner: module.as_ptr(),
            ops: OperationsVTable::<T>::build(),
            size,
            flags: flags.try_into()?,
            resv: core::ptr::null_mut(),
            priv_: data.cast(),
        };

        // SAFETY: `info` is a valid export description: a static operations table that provides
        // the mandatory `map_dma_buf`, `unmap_dma_buf` and `release`, and `data` as private data.
        let dmabuf = unsafe { bindings::dma_buf_export(&info) };
        if let Err(err) = crate::error::from_err_ptr(dmabuf) {
            // SAFETY: The export failed, so `release` will never run and we still own `data`.
            drop(unsafe { KBox::from_raw(data) });
            return Err(err);
        }

        // SAFETY: `dma_buf_export()` returned a new dma-buf with one reference, which the returned
        // `ARef` owns. `DmaBuf` is a transparent wrapper of `struct dma_buf`.
        Ok(unsafe { ARef::from_raw(NonNull::new_unchecked(dmabuf.cast())) })
    }

    /// Creates a reference to a [`DmaBuf`] from a valid pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct dma_buf` whose file holds a reference for the whole
    /// lifetime `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::dma_buf) -> &'a Self {
        // SAFETY: `DmaBuf` is a transparent wrapper of `struct dma_buf`; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// Returns a raw pointer to the `struct dma_buf`.
    pub fn as_raw(&self) -> *mut bindings::dma_buf {
        self.0.get()
    }

    /// Returns the size of the buffer in bytes.
    pub fn size(&self) -> usize {
        // SAFETY: The size of a dma-buf is set at export and never changes.
        unsafe { (*self.as_raw()).size }
    }

    /// Returns a non-owning handle on the dma-buf, see [`WeakDmaBuf`].
    pub fn downgrade(&self) -> WeakDmaBuf {
        // INVARIANT: `self` is a valid dma-buf.
        WeakDmaBuf(NonNull::from(&self.0).cast())
    }

    /// Removes every user space mapping of the buffer.
    ///
    /// All page table entries of all mappings of the dma-buf's file are zapped; a later access
    /// faults and goes to [`Operations::fault`] (or fails with `SIGBUS` if the exporter has none).
    /// The mappings themselves stay. Call it after making sure that [`Operations::fault`] does not
    /// map the pages again.
    pub fn zap_user_mappings(&self) {
        // SAFETY: The dma-buf is valid and its file holds a reference, so `file` and its
        // `f_mapping` (the address space of the dma-buf's own inode) are valid. A hole length of
        // zero zaps up to the end of the file.
        unsafe { bindings::unmap_mapping_range((*(*self.as_raw()).file).f_mapping, 0, 0, 1) };
    }

    /// Tells every importer to drop its mappings and waits for the device accesses in flight.
    ///
    /// Calls the `invalidate_mappings` callback of every dynamic importer, then waits for all
    /// fences of the buffer's reservation object. Importers that support the callback unmap their
    /// mappings in bounded time afterwards; importers without it keep theirs until they unmap, so
    /// mappings from [`SgTableMapping`] keep their pages alive until then.
    pub fn invalidate_importer_mappings(&self) {
        // SAFETY: The dma-buf is valid, so is its reservation object.
        let resv = unsafe { (*self.as_raw()).resv };

        // SAFETY: `resv` is valid; a null acquire context is allowed and the call cannot fail.
        unsafe { bindings::dma_resv_lock(resv, core::ptr::null_mut()) };
        // SAFETY: The reservation object of the dma-buf is held, as required.
        unsafe { bindings::dma_buf_invalidate_mappings(self.as_raw()) };
        // SAFETY: `resv` is valid and locked. Waiting uninterruptibly without timeout cannot fail.
        unsafe {
            bindings::dma_resv_wait_timeout(
                resv,
                bindings::dma_resv_usage_DMA_RESV_USAGE_BOOKKEEP,
                false,
                c_ulong::MAX >> 1,
            )
        };
        // SAFETY: We locked `resv` above.
        unsafe { bindings::dma_resv_unlock(resv) };
    }

    /// Returns the exporter's object of a dma-buf exported with operations `T`.
    ///
    /// # Safety
    ///
    /// The dma-buf must have been created by [`DmaBuf::export`] with the type `T`.
    unsafe fn data<T: Operations>(&self) -> &T {
        // SAFETY: By the safety requirements, the private data is a `KBox<T>` that lives until
        // `release`, which cannot run while `&self` exists.
        unsafe { &*(*self.as_raw()).priv_.cast::<T>() }
    }
}

impl DmaBuf {
    /// Returns the dma-buf of file descriptor `fd` of the current task.
    ///
    /// Fails with [`EBADF`] if `fd` is not open and [`EINVAL`] if it is not a dma-buf.
    pub fn get(fd: i32) -> Result<ARef<DmaBuf>> {
        // SAFETY: `dma_buf_get()` looks `fd` up in the current task's file table and returns the
        // dma-buf with a new reference, or an error.
        let dmabuf = crate::error::from_err_ptr(unsafe { bindings::dma_buf_get(fd) })?;
        // SAFETY: `dmabuf` is a valid dma-buf with a reference that the `ARef` now owns.
        Ok(unsafe { ARef::from_raw(NonNull::new_unchecked(dmabuf.cast())) })
    }

    /// Attaches `dev` to the buffer, as an importer of the given `kind`.
    ///
    /// A [`ImportKind::Revocable`] importer is what exporters of device memory expect: it is
    /// dynamic, accepts peer memory without `struct page`s and drops its mappings when asked to.
    /// The other kinds exist to test exporters. The exporter may refuse the device (the error of
    /// [`Operations::attach`]).
    pub fn attach(&self, dev: &device::Device, kind: ImportKind) -> Result<ImportAttachment> {
        let ops = match kind {
            ImportKind::Revocable => Some(&IMPORT_OPS),
            ImportKind::RevocableNoPeer => Some(&IMPORT_OPS_NO_PEER),
            ImportKind::Pinned => None,
        };
        // SAFETY: The dma-buf and the device are valid; the importer operations are static. The
        // device is referenced by the attachment's `dev` field below for as long as the
        // attachment lives.
        let attach = crate::error::from_err_ptr(unsafe {
            match ops {
                Some(ops) => bindings::dma_buf_dynamic_attach(
                    self.as_raw(),
                    dev.as_raw(),
                    ops,
                    core::ptr::null_mut(),
                ),
                None => bindings::dma_buf_attach(self.as_raw(), dev.as_raw()),
            }
        })?;
        // INVARIANT: `attach` is a new attachment of `self` to `dev`.
        Ok(ImportAttachment {
            dmabuf: self.into(),
            _dev: dev.into(),
            // SAFETY: `from_err_ptr()` returned a valid pointer.
            attach: unsafe { NonNull::new_unchecked(attach) },
        })
    }
}

/// How [`DmaBuf::attach`] attaches an importer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportKind {
    /// Dynamic, accepts peer memory, drops its mappings when asked to.
    Revocable,
    /// Dynamic and drops its mappings when asked to, but needs memory with `struct page`s.
    RevocableNoPeer,
    /// Static (`dma_buf_attach()`): no peer memory, keeps its mappings until it unmaps.
    Pinned,
}

/// Called when the exporter revokes or moves the buffer; see [`ImportMapping`].
extern "C" fn import_invalidate(_attach: *mut bindings::dma_buf_attachment) {}

/// The importer operations of [`DmaBuf::attach`]: peer memory accepted, and mappings that are
/// only held for the duration of a call (so nothing needs to be done on invalidation).
static IMPORT_OPS: bindings::dma_buf_attach_ops = bindings::dma_buf_attach_ops {
    allow_peer2peer: true,
    invalidate_mappings: Some(import_invalidate),
};

/// The importer operations of [`ImportKind::RevocableNoPeer`].
static IMPORT_OPS_NO_PEER: bindings::dma_buf_attach_ops = bindings::dma_buf_attach_ops {
    allow_peer2peer: false,
    invalidate_mappings: Some(import_invalidate),
};

/// A device attached to a dma-buf as an importer, see [`DmaBuf::attach`]; detached on drop.
///
/// # Invariants
///
/// `attach` is an attachment of `dmabuf`, made by `dma_buf_dynamic_attach()` for `_dev`.
pub struct ImportAttachment {
    dmabuf: ARef<DmaBuf>,
    _dev: ARef<device::Device>,
    attach: NonNull<bindings::dma_buf_attachment>,
}

impl ImportAttachment {
    /// Maps the buffer for DMA by the attached device.
    ///
    /// The mapping is a dynamic importer's: it must be dropped in bounded time, since the exporter
    /// may wait for it when it revokes the buffer. Keep it for the duration of a call.
    pub fn map(&self, dir: DataDirection) -> Result<ImportMapping<'_>> {
        // SAFETY: The attachment is valid; the function takes the reservation lock itself.
        let sgt = crate::error::from_err_ptr(unsafe {
            bindings::dma_buf_map_attachment_unlocked(self.attach.as_ptr(), dir.into())
        })?;
        // INVARIANT: `sgt` is a mapping of this attachment in direction `dir`.
        Ok(ImportMapping {
            attachment: self,
            // SAFETY: `from_err_ptr()` returned a valid pointer.
            sgt: unsafe { NonNull::new_unchecked(sgt) },
            dir,
        })
    }
}

impl Drop for ImportAttachment {
    fn drop(&mut self) {
        // SAFETY: By the type invariants `attach` is an attachment of `dmabuf`; every mapping of
        // it borrowed `self`, so none is left.
        unsafe { bindings::dma_buf_detach(self.dmabuf.as_raw(), self.attach.as_ptr()) };
    }
}

/// A DMA mapping of a dma-buf by an importer, see [`ImportAttachment::map`]; unmapped on drop.
///
/// # Invariants
///
/// `sgt` was returned by `dma_buf_map_attachment_unlocked()` for `attachment` and `dir`.
pub struct ImportMapping<'a> {
    attachment: &'a ImportAttachment,
    sgt: NonNull<bindings::sg_table>,
    dir: DataDirection,
}

/// A DMA segment of an [`ImportMapping`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaSegment {
    /// The address the device uses.
    pub dma_address: bindings::dma_addr_t,
    /// The length in bytes.
    pub len: u32,
    /// Whether the address is a PCI bus address (peer-to-peer through a switch), not an address
    /// translated by the DMA API (IOMMU or host bridge).
    pub bus_address: bool,
}

impl ImportMapping<'_> {
    /// Returns the DMA segments of the mapping.
    pub fn segments(&self) -> Result<KVec<DmaSegment>> {
        let mut segments = KVec::new();
        // SAFETY: By the type invariants `sgt` is a valid, mapped table.
        let (mut sg, nents) = unsafe { ((*self.sgt.as_ptr()).sgl, (*self.sgt.as_ptr()).nents) };
        for _ in 0..nents {
            if sg.is_null() {
                break;
            }
            // SAFETY: `sg` is one of the table's first `nents` (DMA mapped) entries.
            let segment = unsafe {
                DmaSegment {
                    dma_address: bindings::sg_dma_address(sg),
                    len: bindings::sg_dma_len(sg),
                    #[cfg(CONFIG_NEED_SG_DMA_FLAGS)]
                    bus_address: (*sg).dma_flags & bindings::SG_DMA_BUS_ADDRESS != 0,
                    #[cfg(not(CONFIG_NEED_SG_DMA_FLAGS))]
                    bus_address: false,
                }
            };
            segments.push(segment, GFP_KERNEL)?;
            // SAFETY: `sg` is a valid entry of the table.
            sg = unsafe { bindings::sg_next(sg) };
        }
        Ok(segments)
    }
}

impl Drop for ImportMapping<'_> {
    fn drop(&mut self) {
        // SAFETY: By the type invariants the table is a mapping of the attachment in `dir`; it is
        // unmapped exactly once.
        unsafe {
            bindings::dma_buf_unmap_attachment_unlocked(
                self.attachment.attach.as_ptr(),
                self.sgt.as_ptr(),
                self.dir.into(),
            )
        };
    }
}

/// A pointer to a dma-buf that holds no reference.
///
/// An exporter keeps these to find its live buffers, e.g. to revoke them when the memory behind
/// them goes away. The pointer is only usable while the dma-buf exists, which the exporter
/// guarantees by forgetting it in the [`Drop`] of its [`Operations`] object, under a lock it also
/// holds around [`WeakDmaBuf::upgrade`].
///
/// # Invariants
///
/// The pointer was obtained from a valid dma-buf.
pub struct WeakDmaBuf(NonNull<bindings::dma_buf>);

// SAFETY: `WeakDmaBuf` is just a pointer; using it is unsafe and subject to the requirements of
// `upgrade`.
unsafe impl Send for WeakDmaBuf {}

// SAFETY: See `Send`.
unsafe impl Sync for WeakDmaBuf {}

impl WeakDmaBuf {
    /// Returns a reference to the dma-buf, unless its last reference is gone already.
    ///
    /// When this returns [`None`], the dma-buf is being released: its [`Operations`] object is
    /// about to be dropped.
    ///
    /// # Safety
    ///
    /// The `struct dma_buf` must not have been freed: the [`Drop`] of the exporter's object of
    /// this dma-buf must not have completed yet (for example because the caller holds a lock that
    /// the drop takes to forget this handle).
    pub unsafe fn upgrade(&self) -> Option<ARef<DmaBuf>> {
        // SAFETY: By the safety requirements the dma-buf is not freed, so `file` is a valid pointer
        // to a file, which may be at reference count zero: `get_file_active()` handles that (files
        // are freed by RCU) and only returns a file whose count it could increment.
        let file = unsafe { bindings::get_file_active(&raw mut (*self.0.as_ptr()).file) };
        if file.is_null() {
            return None;
        }
        // SAFETY: We now own a reference to the dma-buf's file, i.e. to the dma-buf.
        Some(unsafe { ARef::from_raw(self.0.cast()) })
    }
}

/// A device attached to a dma-buf (an importer).
///
/// Corresponds to the C `struct dma_buf_attachment`.
///
/// # Invariants
///
/// The inner attachment is valid, and attached, while a `&Attachment` exists.
#[repr(transparent)]
pub struct Attachment(Opaque<bindings::dma_buf_attachment>);

impl Attachment {
    /// # Safety
    ///
    /// `ptr` must point to a valid attachment that stays attached for the lifetime `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::dma_buf_attachment) -> &'a Self {
        // SAFETY: `Attachment` is a transparent wrapper; validity is guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Returns the importing device.
    pub fn device(&self) -> &device::Device {
        // SAFETY: `dev` is the importer's device, set at attach time and never changed. The
        // attachment holds no reference on it: the importer keeps its device alive while the
        // attachment exists (it detaches before its device is released), and the attachment
        // stays attached while `&self` is borrowed (type invariants).
        unsafe { device::Device::from_raw((*self.0.get()).dev) }
    }

    /// Returns whether the importer handles peer memory without `struct page`s.
    pub fn peer2peer(&self) -> bool {
        // SAFETY: The attachment is valid; the field is set at attach time and never changes.
        unsafe { (*self.0.get()).peer2peer }
    }

    /// Returns whether the importer drops its mappings when asked to, see
    /// [`DmaBuf::invalidate_importer_mappings`].
    pub fn is_revocable(&self) -> bool {
        // SAFETY: The attachment is valid.
        unsafe { bindings::dma_buf_attach_revocable(self.0.get()) }
    }
}

/// A scatter-gather table of pages, mapped for the DMA of an importing device.
///
/// Built by [`Operations::map`] and handed to the importer; dropped when the importer unmaps it.
/// It owns `P`, the pages it maps (typically a reference on each), so they stay valid as long as
/// the importer may access them.
///
/// # Invariants
///
/// `table` is either zeroed or an allocated scatter-gather table of the pages of `pages`; if
/// `mapped` is true, its table is DMA mapped for `dev` in direction `dir`.
pub struct SgTableMapping<P: AsPageIter> {
    table: Opaque<bindings::sg_append_table>,
    dev: ARef<device::Device>,
    dir: DataDirection,
    mapped: bool,
    pages: P,
}

/// Pages handed to the scatter-gather table at a time by [`SgTableMapping::new`]: its workspace
/// is bounded (4 KiB) whatever the size of the buffer.
const SG_BATCH: usize = 512;

impl<P: AsPageIter> SgTableMapping<P> {
    /// Builds a scatter-gather table of `pages` and maps it for DMA by `dev`.
    ///
    /// The table is built [`SG_BATCH`] pages at a time, merging physically contiguous pages into
    /// segments of up to the device's maximum mapping size; for peer-to-peer DMA pages the DMA
    /// API uses PCI bus addresses when the two devices talk through a switch, and fails
    /// ([`EREMOTEIO`]) if they cannot reach each other. May sleep.
    pub fn new(dev: &device::Device, pages: P, dir: DataDirection) -> Result<KBox<Self>> {
        // SAFETY: `dev.as_raw()` is a valid device.
        let max_segment = match unsafe { bindings::dma_max_mapping_size(dev.as_raw()) } {
            0 => u32::MAX,
            max => u32::try_from(max).unwrap_or(u32::MAX),
        };
        // Segment lengths are page multiples.
        let max_segment = max_segment & !(PAGE_SIZE as u32 - 1);

        // INVARIANT: The table is zeroed and not mapped.
        let mut this = KBox::new(
            Self {
                table: Opaque::zeroed(),
                dev: dev.into(),
                dir,
                mapped: false,
                pages,
            },
            GFP_KERNEL,
        )?;

        let total = this.pages.page_iter().count();
        if total == 0 {
            return Err(EINVAL);
        }

        let table = this.table.get();
        {
            let mut batch: KVec<*mut bindings::page> = KVec::with_capacity(SG_BATCH, GFP_KERNEL)?;
            let mut iter = this.pages.page_iter();
            let mut left = total;
            while left > 0 {
                batch.clear();
                for page in iter.by_ref().take(SG_BATCH) {
                    batch.push(page.as_ptr(), GFP_KERNEL)?;
                }
                if batch.is_empty() {
                    // The iterator yielded fewer pages than it did when counted.
                    return Err(EINVAL);
                }
                left -= batch.len();
                // SAFETY: `table` is zeroed or holds the segments of the previous batches;
                // `batch` holds `batch.len() > 0` valid pages, owned by `this.pages` and so
                // valid as long as the table. `left` is the number of pages still to come, as
                // the function requires.
                // INVARIANT: On success the table holds the pages of `pages` handed to it so
                // far.
                to_result(unsafe {
                    bindings::sg_alloc_append_table_from_pages(
                        table,
                        batch.as_mut_ptr(),
                        batch.len().try_into()?,
                        0,
                        (batch.len() << PAGE_SHIFT).try_into()?,
                        max_segment,
                        left.try_into()?,
                        GFP_KERNEL.as_raw(),
                    )
                })?;
            }
        }

        // SAFETY: The table was just allocated for valid pages; `dev` is valid.
        to_result(unsafe {
            bindings::dma_map_sgtable(dev.as_raw(), &raw mut (*table).sgt, dir.into(), 0)
        })?;
        // INVARIANT: The table is now mapped for `dev` in direction `dir`.
        this.mapped = true;

        Ok(this)
    }

    /// Returns the pages the mapping keeps alive.
    pub fn pages(&self) -> &P {
        &self.pages
    }
}

impl<P: AsPageIter> Drop for SgTableMapping<P> {
    fn drop(&mut self) {
        let table = self.table.get();
        if self.mapped {
            // SAFETY: By the type invariants the table is mapped for `dev` in direction `dir`.
            unsafe {
                bindings::dma_unmap_sgtable(
                    self.dev.as_raw(),
                    &raw mut (*table).sgt,
                    self.dir.into(),
                    0,
                )
            };
        }
        // SAFETY: The table is zeroed or allocated by `sg_alloc_append_table_from_pages()`, and
        // not mapped; freeing a zeroed table does nothing.
        unsafe { bindings::sg_free_append_table(table) };
    }
}

/// A page fault in a user mapping of a dma-buf, see [`Operations::fault`].
///
/// # Invariants
///
/// The inner `struct vm_fault` is valid and its VMA is read locked (mmap lock or VMA lock) while a
/// `&Fault` exists.
#[repr(transparent)]
pub struct Fault(Opaque<bindings::vm_fault>);

impl Fault {
    /// # Safety
    ///
    /// `ptr` must be the `struct vm_fault` of a fault being handled, valid for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::vm_fault) -> &'a Self {
        // SAFETY: `Fault` is a transparent wrapper; validity is guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    fn raw(&self) -> &bindings::vm_fault {
        // SAFETY: By the type invariants the fault is valid; its fields are not written by anyone
        // else while the handler runs.
        unsafe { &*self.0.get() }
    }

    /// Returns the faulting VMA.
    pub fn vma(&self) -> &VmaRef {
        // SAFETY: The VMA of a fault is valid and read locked while the fault is handled.
        unsafe { VmaRef::from_raw(self.raw().__bindgen_anon_1.vma) }
    }

    /// Returns the faulting user address, rounded down to a page boundary.
    pub fn address(&self) -> usize {
        self.raw().__bindgen_anon_1.address
    }

    /// Returns the offset of the faulting page in the buffer, in pages.
    pub fn pgoff(&self) -> usize {
        self.raw().__bindgen_anon_1.pgoff
    }

    /// Returns whether the fault is a write access.
    pub fn is_write(&self) -> bool {
        self.raw().flags & bindings::fault_flag_FAULT_FLAG_WRITE != 0
    }
}

/// The operations of a dma-buf exporter.
///
/// Implemented by the exporter's object of a buffer, the `T` of [`DmaBuf::export`]. The object is
/// dropped when the dma-buf is released: after the last file descriptor, user mapping and kernel
/// reference are gone.
#[vtable]
pub trait Operations: Sized + Send + Sync + 'static {
    /// The pages an importer's mapping keeps alive, see [`SgTableMapping`].
    type MapPages: AsPageIter;

    /// A device attaches to the buffer.
    ///
    /// Check here whether `attachment`'s device can reach the memory; return an error to refuse.
    fn attach(&self, _attachment: &Attachment) -> Result {
        Ok(())
    }

    /// A device detaches from the buffer.
    fn detach(&self, _attachment: &Attachment) {}

    /// Maps the buffer for DMA by the attached device.
    ///
    /// Called with the buffer's reservation object locked. The returned mapping is handed to the
    /// importer and dropped when it unmaps.
    fn map(
        &self,
        attachment: &Attachment,
        dir: DataDirection,
    ) -> Result<KBox<SgTableMapping<Self::MapPages>>>;

    /// Sets up a user mapping of the buffer.
    ///
    /// The dma-buf core has checked that the mapping fits in the buffer; `vma`'s page offset is
    /// the offset in the buffer. If [`Operations::fault`] is implemented, the VMA's faults are
    /// handled by it.
    fn mmap(&self, _dmabuf: &DmaBuf, _vma: &VmaNew) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Handles a fault in a user mapping set up by [`Operations::mmap`], if [`Operations::VM_OPS`]
    /// names this exporter's [`VmOps`].
    ///
    /// Map the page (and possibly its neighbours) and return `Ok(())`; [`ENOMEM`] makes the
    /// fault fail with out-of-memory, any other error with `SIGBUS`.
    fn fault(&self, _fault: &Fault) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The VMA operations installed on the user mappings set up by [`Operations::mmap`]: a
    /// `static` of the exporter (see [`VmOps`]); [`None`] if the exporter handles no faults.
    const VM_OPS: Option<&'static VmOps<Self>> = None;
}

/// The VMA operations of the user mappings of dma-bufs exported with `T`, whose fault handler
/// calls [`Operations::fault`].
///
/// An exporter that handles faults declares one as a `static` and names it in
/// [`Operations::VM_OPS`]. The `static`'s address is what [`vma_is_exported_by`] recognises
/// such a mapping by: a `static` has one address, a constant may have several.
#[repr(transparent)]
pub struct VmOps<T: Operations>(bindings::vm_operations_struct, PhantomData<fn() -> T>);

// SAFETY: The table holds function pointers and null fields only, and is never written after
// its initialisation.
unsafe impl<T: Operations> Sync for VmOps<T> {}

impl<T: Operations> VmOps<T> {
    /// The table for `T`, which must implement [`Operations::fault`].
    pub const fn new() -> Self {
        Self(
            bindings::vm_operations_struct {
                fault: Some(OperationsVTable::<T>::fault),
                ..pin_init::zeroed()
            },
            PhantomData,
        )
    }
}

/// Returns whether `vma` is a user mapping of a dma-buf exported with operations `T` that handle
/// faults (whose [`Operations::VM_OPS`] names their [`VmOps`]).
pub fn vma_is_exported_by<T: Operations>(vma: &VmaRef) -> bool {
    // SAFETY: The VMA is read locked (type invariants of `VmaRef`), so `vm_ops` is stable.
    let ops = unsafe { (*vma.as_ptr()).vm_ops };
    T::VM_OPS.is_some_and(|own| core::ptr::eq(ops, &own.0))
}

/// Returns the exporter's object behind a user mapping of a dma-buf exported with operations
/// `T`, or [`None`] if `vma` is not such a mapping (see [`vma_is_exported_by`]).
pub fn vma_exporter_data<T: Operations>(vma: &VmaRef) -> Option<&T> {
    if !vma_is_exported_by::<T>(vma) {
        return None;
    }
    // SAFETY: Our `vm_ops` are only installed on mappings of dma-bufs of `T`; the mapping holds a
    // reference to the dma-buf's file, and the read locked VMA cannot go away while `vma` is
    // borrowed.
    Some(unsafe { DmaBuf::from_raw((*(*vma.as_ptr()).vm_file).private_data.cast()).data::<T>() })
}

fn direction_from_raw(dir: bindings::dma_data_direction) -> Result<DataDirection> {
    Ok(match dir {
        bindings::dma_data_direction::DMA_BIDIRECTIONAL => DataDirection::Bidirectional,
        bindings::dma_data_direction::DMA_TO_DEVICE => DataDirection::ToDevice,
        bindings::dma_data_direction::DMA_FROM_DEVICE => DataDirection::FromDevice,
        bindings::dma_data_direction::DMA_NONE => DataDirection::None,
        _ => return Err(EINVAL),
    })
}

/// The C operation tables of an exporter `T`.
struct OperationsVTable<T: Operations>(PhantomData<T>);

impl<T: Operations> OperationsVTable<T> {
    /// # Safety
    ///
    /// `dmabuf` must be a valid dma-buf exported with `T`, with a reference held for the call.
    unsafe extern "C" fn attach(
        dmabuf: *mut bindings::dma_buf,
        attachment: *mut bindings::dma_buf_attachment,
    ) -> c_int {
        // SAFETY: By the safety requirements the dma-buf is valid and of type `T`.
        let data = unsafe { DmaBuf::from_raw(dmabuf).data::<T>() };
        // SAFETY: The dma-buf core calls attach with a valid attachment, attached until detach.
        let attachment = unsafe { Attachment::from_raw(attachment) };
        from_result(|| {
            data.attach(attachment)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `dmabuf` must be a valid dma-buf exported with `T` and `attachment` one of its attachments.
    unsafe extern "C" fn detach(
        dmabuf: *mut bindings::dma_buf,
        attachment: *mut bindings::dma_buf_attachment,
    ) {
        // SAFETY: By the safety requirements the dma-buf is valid and of type `T`.
        let data = unsafe { DmaBuf::from_raw(dmabuf).data::<T>() };
        // SAFETY: The attachment is valid until detach returns.
        let attachment = unsafe { Attachment::from_raw(attachment) };
        data.detach(attachment);
    }

    /// # Safety
    ///
    /// `attachment` must be a valid attachment of a dma-buf exported with `T`.
    unsafe extern "C" fn map_dma_buf(
        attachment: *mut bindings::dma_buf_attachment,
        dir: bindings::dma_data_direction,
    ) -> *mut bindings::sg_table {
        // SAFETY: By the safety requirements the attachment is valid.
        let attachment = unsafe { Attachment::from_raw(attachment) };
        // SAFETY: The attachment's dma-buf is valid, of type `T`, and referenced while attached.
        let data = unsafe { DmaBuf::from_raw((*attachment.0.get()).dmabuf).data::<T>() };
        let result = direction_from_raw(dir).and_then(|dir| data.map(attachment, dir));
        match result {
            // The importer owns the mapping until it hands the table back to `unmap_dma_buf`.
            Ok(mapping) => {
                let mapping = KBox::into_raw(mapping);
                // SAFETY: `mapping` is a valid pointer from `KBox::into_raw()`.
                unsafe { &raw mut (*(*mapping).table.get()).sgt }
            }
            Err(err) => err.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `sgt` must have been returned by `map_dma_buf` of `T` and not be unmapped yet.
    unsafe extern "C" fn unmap_dma_buf(
        _attachment: *mut bindings::dma_buf_attachment,
        sgt: *mut bindings::sg_table,
        _dir: bindings::dma_data_direction,
    ) {
        // SAFETY: `sgt` is the `sgt` field of the `table` of a boxed `SgTableMapping` given away
        // by `map_dma_buf`.
        let table = unsafe { container_of!(sgt, bindings::sg_append_table, sgt) };
        // SAFETY: As above; `Opaque<T>` has the layout of `T`.
        let mapping = unsafe {
            container_of!(
                table.cast::<Opaque<bindings::sg_append_table>>(),
                SgTableMapping<T::MapPages>,
                table
            )
        };
        // SAFETY: The importer gives the mapping back; we own it again and drop it.
        drop(unsafe { KBox::from_raw(mapping) });
    }

    /// # Safety
    ///
    /// `dmabuf` must be a dma-buf exported with `T` whose last reference is gone.
    unsafe extern "C" fn release(dmabuf: *mut bindings::dma_buf) {
        // SAFETY: The private data is the `KBox<T>` leaked by `export`; it is released exactly
        // once, here.
        drop(unsafe { KBox::from_raw((*dmabuf).priv_.cast::<T>()) });
    }

    /// # Safety
    ///
    /// `dmabuf` must be a valid dma-buf exported with `T` and `vma` a VMA being set up for it.
    unsafe extern "C" fn mmap(
        dmabuf: *mut bindings::dma_buf,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: By the safety requirements the dma-buf is valid, of type `T` and referenced.
        let buf = unsafe { DmaBuf::from_raw(dmabuf) };
        // SAFETY: By the safety requirements the dma-buf is of type `T`.
        let data = unsafe { buf.data::<T>() };
        // SAFETY: `vma` is undergoing its initial setup in the mmap hook.
        let area = unsafe { VmaNew::from_raw(vma) };
        from_result(|| {
            data.mmap(buf, area)?;
            if let Some(ops) = T::VM_OPS {
                // SAFETY: The VMA is being set up and not visible to anyone else yet; the
                // operations table is a `static`.
                unsafe { (*vma).vm_ops = &ops.0 };
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `vmf` must be a fault in a VMA whose `vm_ops` were installed by `mmap` above.
    unsafe extern "C" fn fault(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
        // SAFETY: `vmf` is the fault being handled.
        let fault = unsafe { Fault::from_raw(vmf) };
        // SAFETY: Our `vm_ops` are only installed by `mmap` on mappings of a dma-buf of `T`; the
        // VMA's file is that dma-buf's file (set by the dma-buf core) and holds a reference on it
        // while the VMA exists.
        let data = unsafe {
            DmaBuf::from_raw((*(*fault.vma().as_ptr()).vm_file).private_data.cast()).data::<T>()
        };
        match data.fault(fault) {
            Ok(()) => bindings::vm_fault_reason_VM_FAULT_NOPAGE,
            Err(err) if err == ENOMEM => bindings::vm_fault_reason_VM_FAULT_OOM,
            Err(_) => bindings::vm_fault_reason_VM_FAULT_SIGBUS,
        }
    }

    const VTABLE: bindings::dma_buf_ops = bindings::dma_buf_ops {
        attach: if T::HAS_ATTACH {
            Some(Self::attach)
        } else {
            None
        },
        detach: if T::HAS_DETACH {
            Some(Self::detach)
        } else {
            None
        },
        map_dma_buf: Some(Self::map_dma_buf),
        unmap_dma_buf: Some(Self::unmap_dma_buf),
        release: Some(Self::release),
        mmap: if T::HAS_MMAP { Some(Self::mmap) } else { None },
        ..pin_init::zeroed()
    };

    const fn build() -> &'static bindings::dma_buf_ops {
        &Self::VTABLE
    }
}
