// SPDX-License-Identifier: GPL-2.0

//! Static sysfs attribute groups whose files are typed attributes.
//!
//! C headers: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h),
//! [`include/linux/kobject.h`](srctree/include/linux/kobject.h) and
//! [`include/linux/device.h`](srctree/include/linux/device.h).
//!
//! Every file of a group is one attribute: a `static` [`KobjAttribute`] or [`DeviceAttribute`]
//! whose operations are one type implementing [`KobjAttributeOps`] or [`DeviceAttributeOps`]
//! (attributes are statics: lockdep keys static attributes by their address).
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
//! use kernel::sysfs::{AttributeGroup, AttributeList, Kobj, KobjAttribute, KobjAttributeOps};
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
//! static ATTRS: AttributeList<Kobj, 1> = AttributeList::new([ANSWER.as_attr()]);
//! static GROUP: AttributeGroup<Kobj> = AttributeGroup::new(None, &ATTRS);
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

/// The `struct attribute` of a file named `name` with permissions `mode`.
const fn raw_attribute(name: &'static CStr, mode: u16) -> bindings::attribute {
    // With lockdep, the lock class key of a static attribute stays zeroed.
    let mut attr: bindings::attribute = pin_init::zeroed();
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
        // A full page is truncated; sysfs takes at most `PAGE_SIZE - 1` bytes.
        Ok(()) => f.bytes_written().min(PAGE_SIZE - 1) as isize,
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

/// Marks the attributes of kobjects that carry no data of their own ([`KobjAttribute`]).
pub enum Kobj {}

/// Marks the attributes of devices ([`DeviceAttribute`]).
pub enum Dev {}

/// A file for an [`AttributeList`] of kind `K` ([`Kobj`] or [`Dev`]): only
/// [`KobjAttribute::as_attr`] and [`DeviceAttribute::as_attr`] make one, from a static attribute
/// whose callbacks expect the objects of that kind.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Attr<K> {
    attr: *mut bindings::attribute,
    _p: PhantomData<K>,
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

/// Defines `$name<O>`, a file whose `struct $raw` calls the `show` (and, if `O` has one, the
/// `store`) of its `impl<O: $ops>` block, for attribute lists of kind `$kind`.
macro_rules! attribute_type {
    ($(#[$doc:meta])* $name:ident, $ops:ident, $raw:ident, $kind:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name<O> {
            attr: Opaque<bindings::$raw>,
            _p: PhantomData<O>,
        }

        // SAFETY: The attribute is never changed after its construction; sysfs only reads it.
        unsafe impl<O> Sync for $name<O> {}

        impl<O: $ops> $name<O> {
            /// A file named `name` with permissions `mode`; without a `store` operation it
            /// cannot be written whatever `mode` says.
            pub const fn new(name: &'static CStr, mode: u16) -> Self {
                // `show` and `store` are members of unions, or of structs with `CONFIG_CFI`:
                // set them one by one in a zeroed attribute.
                let mut raw: bindings::$raw = pin_init::zeroed();
                raw.attr = raw_attribute(name, mode);
                raw.__bindgen_anon_1.show = Some(Self::show);
                if O::HAS_STORE {
                    raw.__bindgen_anon_2.store = Some(Self::store);
                }
                Self {
                    attr: Opaque::new(raw),
                    _p: PhantomData,
                }
            }

            /// The attribute, for an [`AttributeList`] of its kind.
            pub const fn as_attr(&'static self) -> Attr<$kind> {
                Attr {
                    // `attr` is the first member of the attribute.
                    attr: self.attr.get().cast(),
                    _p: PhantomData,
                }
            }
        }
    };
}

attribute_type!(
    /// A file of a kobject's attribute group, with the operations of `O`.
    KobjAttribute,
    KobjAttributeOps,
    kobj_attribute,
    Kobj
);

impl<O: KobjAttributeOps> KobjAttribute<O> {
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

attribute_type!(
    /// A file of a device's attribute group, with the operations of `O`.
    DeviceAttribute,
    DeviceAttributeOps,
    device_attribute,
    Dev
);

impl<O: DeviceAttributeOps> DeviceAttribute<O> {
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

/// The files of an [`AttributeGroup`] of kind `K`: `N` attributes and the `NULL` that ends
/// them.
#[repr(C)]
pub struct AttributeList<K, const N: usize> {
    attrs: [Attr<K>; N],
    end: *mut bindings::attribute,
}

// SAFETY: The list is never changed after its construction; sysfs only reads it.
unsafe impl<K, const N: usize> Sync for AttributeList<K, N> {}

impl<K, const N: usize> AttributeList<K, N> {
    /// A list of `attrs`.
    pub const fn new(attrs: [Attr<K>; N]) -> Self {
        Self {
            attrs,
            end: ptr::null_mut(),
        }
    }
}

/// A static attribute group of kind `K`: a directory named `name` (or the object's own
/// directory) holding the files of an [`AttributeList`]. A group of [`Dev`] attributes may only
/// be given to devices; one of [`Kobj`] attributes to a [`KernelDir`].
#[repr(transparent)]
pub struct AttributeGroup<K> {
    group: bindings::attribute_group,
    _p: PhantomData<K>,
}

// SAFETY: The group is never changed after its construction; sysfs only reads it.
unsafe impl<K> Sync for AttributeGroup<K> {}

impl<K> AttributeGroup<K> {
    /// A group of `attrs`, in a directory `name` if there is one.
    pub const fn new<const N: usize>(
        name: Option<&'static CStr>,
        attrs: &'static AttributeList<K, N>,
    ) -> Self {
        let mut group: bindings::attribute_group = pin_init::zeroed();
        if let Some(name) = name {
            group.name = crate::str::as_char_ptr_in_const_context(name);
        }
        // The list is its attributes followed by `NULL` (`#[repr(C)]`, and `Attr` is a
        // transparent pointer).
        group.__bindgen_anon_2.attrs = ptr::from_ref(attrs).cast_mut().cast();
        Self {
            group,
            _p: PhantomData,
        }
    }

    /// The C group.
    pub const fn as_raw(&self) -> *const bindings::attribute_group {
        &self.group
    }
}

/// A directory below `/sys/kernel` holding one attribute group; removed when dropped.
pub struct KernelDir {
    kobj: ptr::NonNull<bindings::kobject>,
    group: &'static AttributeGroup<Kobj>,
}

// SAFETY: The kobject is reference counted; `KernelDir` only drops its own reference.
unsafe impl Send for KernelDir {}
// SAFETY: `KernelDir` has no methods that use the kobject concurrently.
unsafe impl Sync for KernelDir {}

impl KernelDir {
    /// Creates `/sys/kernel/<name>` with the files of `group`.
    pub fn new(name: &'static CStr, group: &'static AttributeGroup<Kobj>) -> Result<Self> {
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
