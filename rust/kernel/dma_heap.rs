// SPDX-License-Identifier: GPL-2.0

//! DMA-BUF heaps: allocators of dma-bufs for user space.
//!
//! C header: [`include/linux/dma-heap.h`](srctree/include/linux/dma-heap.h)
//!
//! A heap is a character device `/dev/dma_heap/<name>` (mode 0600 by default). User space asks it
//! for a buffer with the `DMA_HEAP_IOCTL_ALLOC` ioctl and gets a dma-buf file descriptor. The
//! heap core validates the request (no unknown flags, a non-zero length rounded up to whole
//! pages) and calls [`HeapOperations::allocate`] of the heap's implementation.
//!
//! Heaps cannot be removed: a registered heap and its data live until the system shuts down.

use crate::{
    bindings,
    dma_buf::DmaBuf,
    prelude::*,
    str::{CStr, CString},
    sync::{aref::ARef, Arc, ArcBorrow},
    types::ForeignOwnable,
};
use core::marker::PhantomData;

/// The operations of a DMA-BUF heap.
#[vtable]
pub trait HeapOperations: Send + Sync + Sized + 'static {
    /// Allocates a buffer of `len` bytes and exports it as a dma-buf.
    ///
    /// `len` is a non-zero multiple of the page size; `fd_flags` are the file flags the dma-buf
    /// file descriptor will get (`O_CLOEXEC`, `O_ACCMODE`), to be passed to
    /// [`DmaBuf::export`]; `heap_flags` are the heap specific flags of the request, none of which
    /// are defined yet.
    fn allocate(
        this: ArcBorrow<'_, Self>,
        len: usize,
        fd_flags: u32,
        heap_flags: u64,
    ) -> Result<ARef<DmaBuf>>;
}

/// A registered DMA-BUF heap.
///
/// # Invariants
///
/// `heap` is a heap registered with `dma_heap_add()`, whose private data is an `Arc<T>` obtained
/// from [`ForeignOwnable::into_foreign`] and never released.
pub struct Heap<T: HeapOperations> {
    heap: *mut bindings::dma_heap,
    _p: PhantomData<T>,
}

// SAFETY: A registered heap is never removed and its data `T` is `Send + Sync`.
unsafe impl<T: HeapOperations> Send for Heap<T> {}

// SAFETY: See `Send`.
unsafe impl<T: HeapOperations> Sync for Heap<T> {}

impl<T: HeapOperations> Heap<T> {
    /// Registers the heap `/dev/dma_heap/<name>`, backed by `data`.
    ///
    /// The heap, its name and `data` are never freed: DMA-BUF heaps cannot be removed. Returns
    /// [`EINVAL`] if a heap of this name exists already, [`ENOSPC`] if no device minor is left.
    pub fn register(name: CString, data: Arc<T>) -> Result<Self> {
        let name_ptr = name.as_char_ptr();
        let priv_ = data.into_foreign();
        let info = bindings::dma_heap_export_info {
            name: name_ptr,
            ops: HeapVTable::<T>::build(),
            priv_: priv_.cast(),
        };

        // SAFETY: `info` names a valid, NUL terminated name and a static operations table with an
        // `allocate` operation. The heap core keeps the pointers to the name and to `priv_`, which
        // stay valid: both are leaked below on success.
        let heap = unsafe { bindings::dma_heap_add(&info) };
        if let Err(err) = crate::error::from_err_ptr(heap) {
            // SAFETY: The registration failed, so the heap core does not hold `priv_`; it came
            // from `into_foreign` above and is released exactly once.
            drop(unsafe { Arc::<T>::from_foreign(priv_) });
            return Err(err);
        }
        // The heap keeps pointing at the name: never free it.
        core::mem::forget(name);

        // INVARIANT: The heap is registered with the leaked `Arc<T>` as private data.
        Ok(Self {
            heap,
            _p: PhantomData,
        })
    }

    /// Returns the name of the heap.
    pub fn name(&self) -> &CStr {
        // SAFETY: By the type invariants the heap is registered; its name is a valid C string that
        // is never freed.
        unsafe { CStr::from_char_ptr(bindings::dma_heap_get_name(self.heap)) }
    }

    /// Returns the data of the heap.
    pub fn data(&self) -> ArcBorrow<'_, T> {
        // SAFETY: By the type invariants the private data is a leaked `Arc<T>` that is never
        // released, so it can be borrowed for any lifetime.
        unsafe { Arc::<T>::borrow(bindings::dma_heap_get_drvdata(self.heap).cast()) }
    }
}

/// The C operation table of a heap `T`.
struct HeapVTable<T: HeapOperations>(PhantomData<T>);

impl<T: HeapOperations> HeapVTable<T> {
    /// # Safety
    ///
    /// `heap` must be a heap registered by [`Heap::register`] with data of type `T`.
    unsafe extern "C" fn allocate(
        heap: *mut bindings::dma_heap,
        len: c_ulong,
        fd_flags: u32,
        heap_flags: u64,
    ) -> *mut bindings::dma_buf {
        // SAFETY: By the safety requirements the private data is a leaked `Arc<T>`, never
        // released.
        let this = unsafe { Arc::<T>::borrow(bindings::dma_heap_get_drvdata(heap).cast()) };
        match T::allocate(this, len, fd_flags, heap_flags) {
            // The heap core takes over the reference and installs it in a file descriptor.
            Ok(dmabuf) => ARef::into_raw(dmabuf).as_ptr().cast(),
            Err(err) => err.to_ptr(),
        }
    }

    const VTABLE: bindings::dma_heap_ops = bindings::dma_heap_ops {
        allocate: Some(Self::allocate),
    };

    const fn build() -> &'static bindings::dma_heap_ops {
        &Self::VTABLE
    }
}
