// SPDX-License-Identifier: GPL-2.0

//! Static sysfs attribute groups whose files are typed attributes.
//!
//! C headers: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h),
//! [`include/linux/kobject.h`](srctree/include/linux/kobject.h) and
//! [`include/linux/device.h`](srctree/include/linux/device.h).
//!
//! Every file of a group is one attribute: a static [`KobjAttribute`] or [`DeviceAttribute`]
//! whose operations are one type implementing [`KobjAttributeOps`] or [`DeviceAttributeOps`].
//! There is no multiplexing by attribute number: each file has its own `show` and `store`.
//! The attributes are listed in an [`AttributeList`] and form an [`AttributeGroup`], which is
//! either given to a device's `groups` (by C code that creates the device) or made a directory
//! of its own below `/sys/kernel` with [`KernelDir::new`].
//!
//! # Examples
//!
//! ```
//! use kernel::prelude::*;
//! use kernel::str::Formatter;
//! use kernel::sysfs::{AttributeGroup, AttributeList, KobjAttribute, KobjAttributeOps};
//! use core::fmt::Write;
//!
//! struct Answer;
//!
//! #[vtable]
//! impl KobjAttributeOps for Answer {
//!     fn show(f: &mut Formatter<'_>) -> Result {
//!         writeln!(f, "42").map_err(|_| EINVAL)
//!     }
//! }
//!
//! static ANSWER: KobjAttribute<Answer> = KobjAttribute::new(c"answer", 0o444);
//! static ATTRS: AttributeList<1> = AttributeList::new([ANSWER.as_attr()]);
//! static GROUP: AttributeGroup = AttributeGroup::new(None, &ATTRS);
//! ```

use crate::{
    bindings,
    device::Device,
    error::{to_result, Result},
    ffi::c_char,
    page::PAGE_SIZE,
    prelude::*,
    str::{CStr, Formatter},
    types::Opaque,
};
use core::{marker::PhantomData, ptr};

/// Returns an all-zero `T` in const context.
///
/// # Safety
///
/// All-zero bytes must be a valid value of `T`.
const unsafe fn zeroed<T>() -> T {
    // SAFETY: The caller guarantees that all-zero bytes are a valid `T`.
    unsafe { core::mem::MaybeUninit::zeroed().assume_init() }
}

/// The `struct attribute` of a file named `name` with permissions `mode`.
const fn raw_attribute(name: &'static CStr, mode: u16) -> bindings::attribute {
    // SAFETY: `struct attribute` is plain data (pointers, integers and, with lockdep, a lock
    // class key that static attributes leave zeroed); all-zero is valid.
    let mut attr: bindings::attribute = unsafe { zeroed() };
    attr.name = crate::str::as_char_ptr_in_const_context(name);
    attr.mode = mode;
    attr
}

/// Renders a `show` result into a sysfs page.
///
/// # Safety
///
/// `buf` must be writable for [`PAGE_SIZE`] bytes.
unsafe fn show_into(buf: *mut c_char, show: impl FnOnce(&mut Formatter<'_>) -> Result) -> isize {
    // SAFETY: The caller guarantees that `buf` is writable for `PAGE_SIZE` bytes.
    let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE_SIZE) };
    let mut f = Formatter::new(page);
    match show(&mut f) {
        Ok(()) => f.bytes_written() as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// Passes a sysfs store buffer to `store`.
///
/// # Safety
///
/// `buf` must be readable for `count` bytes.
unsafe fn store_from(
    buf: *const c_char,
    count: usize,
    store: impl FnOnce(&[u8]) -> Result,
) -> isize {
    // SAFETY: The caller guarantees that `buf` is readable for `count` bytes.
    let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
    match store(input) {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// The operations of one attribute of a kobject that carries no data of its own, such as a
/// directory below `/sys/kernel`: the state it shows is global.
#[vtable]
pub trait KobjAttributeOps {
    /// Writes the attribute's value into `f` (at most a page).
    fn show(f: &mut Formatter<'_>) -> Result;

    /// Parses and applies a value written to the attribute.
    fn store(_input: &[u8]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A file of a kobject's attribute group, with the operations of `O`.
#[repr(transparent)]
pub struct KobjAttribute<O> {
    attr: Opaque<bindings::kobj_attribute>,
    _p: PhantomData<O>,
}

// SAFETY: The attribute is never changed after its construction; sysfs only reads it.
unsafe impl<O> Sync for KobjAttribute<O> {}

impl<O: KobjAttributeOps> KobjAttribute<O> {
    /// A file named `name` with permissions `mode`; without [`KobjAttributeOps::store`] it
    /// cannot be written whatever `mode` says.
    pub const fn new(name: &'static CStr, mode: u16) -> Self {
        Self {
            attr: Opaque::new(bindings::kobj_attribute {
                attr: raw_attribute(name, mode),
                __bindgen_anon_1: bindings::kobj_attribute__bindgen_ty_1 {
                    show: Some(Self::show),
                },
                __bindgen_anon_2: bindings::kobj_attribute__bindgen_ty_2 {
                    store: if O::HAS_STORE {
                        Some(Self::store)
                    } else {
                        None
                    },
                },
            }),
            _p: PhantomData,
        }
    }

    /// The attribute, for an [`AttributeList`].
    pub const fn as_attr(&'static self) -> *mut bindings::attribute {
        // `attr` is the first member of `struct kobj_attribute`.
        self.attr.get().cast()
    }

    /// # Safety
    ///
    /// `buf` must be a sysfs show buffer: writable for [`PAGE_SIZE`] bytes.
    unsafe extern "C" fn show(
        _kobj: *mut bindings::kobject,
        _attr: *mut bindings::kobj_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: The function safety requirements.
        unsafe { show_into(buf, O::show) }
    }

    /// # Safety
    ///
    /// `buf` must be readable for `count` bytes.
    unsafe extern "C" fn store(
        _kobj: *mut bindings::kobject,
        _attr: *mut bindings::kobj_attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        // SAFETY: The function safety requirements.
        unsafe { store_from(buf, count, O::store) }
    }
}

/// The operations of one attribute of a device.
#[vtable]
pub trait DeviceAttributeOps {
    /// Writes the value of `dev`'s attribute into `f` (at most a page).
    fn show(dev: &Device, f: &mut Formatter<'_>) -> Result;

    /// Parses and applies a value written to `dev`'s attribute.
    fn store(_dev: &Device, _input: &[u8]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// A file of a device's attribute group, with the operations of `O`.
#[repr(transparent)]
pub struct DeviceAttribute<O> {
    attr: Opaque<bindings::device_attribute>,
    _p: PhantomData<O>,
}

// SAFETY: The attribute is never changed after its construction; sysfs only reads it.
unsafe impl<O> Sync for DeviceAttribute<O> {}

impl<O: DeviceAttributeOps> DeviceAttribute<O> {
    /// A file named `name` with permissions `mode`; without [`DeviceAttributeOps::store`] it
    /// cannot be written whatever `mode` says.
    pub const fn new(name: &'static CStr, mode: u16) -> Self {
        Self {
            attr: Opaque::new(bindings::device_attribute {
                attr: raw_attribute(name, mode),
                __bindgen_anon_1: bindings::device_attribute__bindgen_ty_1 {
                    show: Some(Self::show),
                },
                __bindgen_anon_2: bindings::device_attribute__bindgen_ty_2 {
                    store: if O::HAS_STORE {
                        Some(Self::store)
                    } else {
                        None
                    },
                },
            }),
            _p: PhantomData,
        }
    }

    /// The attribute, for an [`AttributeList`].
    pub const fn as_attr(&'static self) -> *mut bindings::attribute {
        // `attr` is the first member of `struct device_attribute`.
        self.attr.get().cast()
    }

    /// # Safety
    ///
    /// `dev` must be a valid device and `buf` a sysfs show buffer: writable for [`PAGE_SIZE`]
    /// bytes.
    unsafe extern "C" fn show(
        dev: *mut bindings::device,
        _attr: *mut bindings::device_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: sysfs calls `show` on a device that is alive for the call (function safety
        // requirements).
        let dev = unsafe { Device::from_raw(dev) };
        // SAFETY: The function safety requirements.
        unsafe { show_into(buf, |f| O::show(dev, f)) }
    }

    /// # Safety
    ///
    /// `dev` must be a valid device and `buf` readable for `count` bytes.
    unsafe extern "C" fn store(
        dev: *mut bindings::device,
        _attr: *mut bindings::device_attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        // SAFETY: sysfs calls `store` on a device that is alive for the call (function safety
        // requirements).
        let dev = unsafe { Device::from_raw(dev) };
        // SAFETY: The function safety requirements.
        unsafe { store_from(buf, count, |input| O::store(dev, input)) }
    }
}

/// The files of an [`AttributeGroup`]: `N` attributes and the `NULL` that ends them.
#[repr(C)]
pub struct AttributeList<const N: usize> {
    attrs: [*mut bindings::attribute; N],
    end: *mut bindings::attribute,
}

// SAFETY: The list is never changed after its construction; sysfs only reads it.
unsafe impl<const N: usize> Sync for AttributeList<N> {}

impl<const N: usize> AttributeList<N> {
    /// A list of `attrs`, each the [`KobjAttribute::as_attr`] or [`DeviceAttribute::as_attr`]
    /// of a static attribute.
    pub const fn new(attrs: [*mut bindings::attribute; N]) -> Self {
        Self {
            attrs,
            end: ptr::null_mut(),
        }
    }
}

/// A static attribute group: a directory named `name` (or the object's own directory) holding
/// the files of an [`AttributeList`].
#[repr(transparent)]
pub struct AttributeGroup(bindings::attribute_group);

// SAFETY: The group is never changed after its construction; sysfs only reads it.
unsafe impl Sync for AttributeGroup {}

impl AttributeGroup {
    /// A group of `attrs`, in a directory `name` if there is one.
    pub const fn new<const N: usize>(
        name: Option<&'static CStr>,
        attrs: &'static AttributeList<N>,
    ) -> Self {
        // SAFETY: `struct attribute_group` is plain data (pointers and optional callbacks);
        // all-zero is valid.
        let mut group: bindings::attribute_group = unsafe { zeroed() };
        if let Some(name) = name {
            group.name = crate::str::as_char_ptr_in_const_context(name);
        }
        // The list starts with its attributes and ends with `NULL` (`#[repr(C)]`).
        group.__bindgen_anon_2.attrs = ptr::from_ref(attrs).cast_mut().cast();
        Self(group)
    }

    /// The C group.
    pub const fn as_raw(&self) -> *const bindings::attribute_group {
        &self.0
    }
}

/// A directory below `/sys/kernel` holding one attribute group; removed when dropped.
pub struct KernelDir {
    kobj: ptr::NonNull<bindings::kobject>,
    group: &'static AttributeGroup,
}

// SAFETY: The kobject is reference counted; `KernelDir` only drops its own reference.
unsafe impl Send for KernelDir {}
// SAFETY: `KernelDir` has no methods that use the kobject concurrently.
unsafe impl Sync for KernelDir {}

impl KernelDir {
    /// Creates `/sys/kernel/<name>` with the files of `group`.
    pub fn new(name: &'static CStr, group: &'static AttributeGroup) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string; `kernel_kobj` is `/sys/kernel`, which
        // exists from boot on.
        let kobj =
            unsafe { bindings::kobject_create_and_add(name.as_char_ptr(), bindings::kernel_kobj) };
        let kobj = ptr::NonNull::new(kobj).ok_or(ENOMEM)?;
        // SAFETY: `kobj` was just created and is in sysfs; `group` is static.
        let ret = to_result(unsafe { bindings::sysfs_create_group(kobj.as_ptr(), group.as_raw()) });
        if let Err(e) = ret {
            // SAFETY: The reference `kobject_create_and_add()` returned.
            unsafe { bindings::kobject_put(kobj.as_ptr()) };
            return Err(e);
        }
        Ok(Self { kobj, group })
    }
}

impl Drop for KernelDir {
    fn drop(&mut self) {
        // SAFETY: The group was created on `kobj` by `new()`, which holds a reference.
        unsafe {
            bindings::sysfs_remove_group(self.kobj.as_ptr(), self.group.as_raw());
            bindings::kobject_put(self.kobj.as_ptr());
        }
    }
}
