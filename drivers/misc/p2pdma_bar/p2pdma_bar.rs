// SPDX-License-Identifier: GPL-2.0

//! p2pdma_bar: offers a PCI memory BAR as peer-to-peer DMA memory.
//!
//! The driver registers the first 64-bit prefetchable memory BAR of its device as PCI p2pdma
//! memory and publishes it. The BAR then has `ZONE_DEVICE` struct pages: NVMe SSDs and other
//! devices DMA straight into it, `pin_user_pages(FOLL_PCI_P2PDMA)` accepts user mappings of it,
//! and spin hands it to user space as DMA-BUF heap `/dev/dma_heap/p2p-<bdf>`.
//!
//! It is also the template for a GPU driver: the two calls in [`P2pdmaBar::probe`] after
//! `enable_device_mem()` are all a driver adds to offer its memory this way (see
//! `Documentation/spin/gpu-memory.rst`). Everything else is undone by the PCI and p2pdma cores
//! when the driver unbinds: the p2pdma teardown waits until every page is released.
//!
//! A GPU driver may reset its device when it unbinds, so no DMA may reach the memory by then.
//! spin's exporter waits for the DMA into its buffers before the driver's unbind callback runs;
//! [`P2pdmaBar::unbind`] checks it, where a GPU driver would reset: it reports how much of the
//! memory is still in use.
//!
//! The driver binds to the QEMU `ivshmem-plain` device (1af4:1110, shared memory in BAR2) by ID,
//! and to any other PCI device through `driver_override`.
//!
//! Real GPU drivers do not always publish in probe: NVIDIA's open driver registers its BAR1 from
//! its UVM module at run time. To stand in for them, every bound device gets a debugfs switch,
//! `/sys/kernel/debug/p2pdma_bar-<pci-bdf>/published`: reading it shows whether the memory is
//! published (`1` or `0`), writing `0` withdraws it and `1` publishes it (again), as such a driver
//! would at any time. The parameter `defer_below_mib` (default 0) leaves BARs smaller than that
//! many MiB unpublished in probe, for a provider whose memory is first published after probe.
//!
//! Every 4 KiB page of registered memory costs a 64-byte struct page, 16 MiB of host memory per
//! GiB, unless the memory is registered in compound pages, whose struct pages take two pages of
//! host memory per folio however large it is (see [`layout`]). The parameter `folio_order`
//! (default [`FOLIO_ORDER_DEFAULT`], 16 MiB folios; 0 for single pages) sets the order of the
//! folios; `/sys/kernel/debug/p2pdma_bar/folio_order` changes it for the devices probed from then
//! on.

use core::fmt;
use kernel::{
    debugfs::{Dir, File},
    device::{self, Core},
    driver,
    io::resource::Flags,
    page::{PAGE_SHIFT, PAGE_SIZE},
    pci,
    prelude::*,
    sizes::{SZ_16M, SZ_1G, SZ_2M},
    str::CString,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
    },
    uaccess::UserSliceReader, //
};

/// The smallest and coarsest unit of memory that gets struct pages.
///
/// `ZONE_DEVICE` memory is added in memory hotplug subsections (2 MiB on x86-64): the BAR's
/// start and size must be multiples of it.
const P2P_GRANULE: u64 = SZ_2M as u64;

/// What the driver looks at to choose a BAR.
#[derive(Clone, Copy)]
struct BarInfo {
    flags: Flags,
    start: u64,
    len: u64,
}

/// Returns whether a BAR can become p2pdma memory.
///
/// It must be a 64-bit prefetchable memory BAR (the kind that GPUs use for their memory) whose
/// start and size are non-zero multiples of [`P2P_GRANULE`].
fn bar_is_usable(bar: &BarInfo) -> bool {
    let needed = Flags::IORESOURCE_MEM | Flags::IORESOURCE_PREFETCH | Flags::IORESOURCE_MEM_64;
    bar.flags.contains(needed)
        && bar.len >= P2P_GRANULE
        && bar.len % P2P_GRANULE == 0
        && bar.start % P2P_GRANULE == 0
}

/// Returns the number and the description of the first usable BAR of `bars` (indexed by BAR
/// number), see [`bar_is_usable`].
fn select_bar(bars: &[Option<BarInfo>]) -> Option<(u32, BarInfo)> {
    let (index, bar) = bars
        .iter()
        .enumerate()
        .find_map(|(index, bar)| bar.filter(bar_is_usable).map(|bar| (index, bar)))?;
    Some((u32::try_from(index).ok()?, bar))
}

/// The order of a folio of `size` bytes, a power of two of at least a page.
const fn order_of(size: u64) -> u32 {
    size.trailing_zeros() - PAGE_SHIFT as u32
}

/// The default order of the folios of a BAR's memory: 16 MiB folios (order 12 with 4 KiB pages).
///
/// A folio's struct pages take two pages (8 KiB) of host memory where the vmemmap is deduped:
/// 4 MiB per GiB of memory in 2 MiB folios, 1 MiB per GiB in 8 MiB folios and 512 KiB per GiB in
/// 16 MiB folios, against 16 MiB per GiB with single pages. 16 MiB is the smallest folio whose
/// whole BAR, with its small part (see [`layout`]) and the page tables of the vmemmap, stays
/// below 1 MiB per GiB; larger folios save little more and cost more memory per buffer, which is
/// rounded up to whole folios. All pages of a folio share its reference count, which also
/// shrinks as folios grow (2^31 references per folio).
const FOLIO_ORDER_DEFAULT: u32 = order_of(SZ_16M as u64);

/// The largest folio order accepted: 1 GiB folios.
const FOLIO_ORDER_MAX: u32 = order_of(SZ_1G as u64);

/// The order of the folios of a BAR's small part, for buffers smaller than a large folio: 2 MiB
/// folios, the memory hotplug granule ([`P2P_GRANULE`]). With 4 KiB pages the vmemmap keeps two
/// of the eight pages of struct pages of such a folio, a quarter; of a 1 MiB folio it would keep
/// two of four.
const SMALL_ORDER: u32 = order_of(P2P_GRANULE);

/// A part of a BAR registered as p2pdma memory in folios of one order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Part {
    /// Offset into the BAR.
    offset: u64,
    len: u64,
    order: u32,
}

/// Splits a usable BAR ([`bar_is_usable`]) at `start` of `len` bytes into the parts it is
/// registered in, for folios of order `order`.
///
/// With single pages (order 0) the BAR is one part. Otherwise the BAR's first large folio's worth
/// of memory is a part in 2 MiB folios ([`SMALL_ORDER`]), which serves buffers smaller than a
/// large folio without rounding them up to one, and the rest is in folios of `order`, with a
/// remainder smaller than a large folio in 2 MiB folios at the end. A BAR smaller than two large
/// folios, or whose start is not aligned to one, is one part in 2 MiB folios (or in folios of
/// `order`, if that is smaller).
fn layout(start: u64, len: u64, order: u32) -> [Option<Part>; 3] {
    let small = order.min(SMALL_ORDER);
    let folio = 1u64 << (order + PAGE_SHIFT as u32);
    let whole = [
        Some(Part {
            offset: 0,
            len,
            order: small,
        }),
        None,
        None,
    ];
    if order <= SMALL_ORDER || start % folio != 0 || len < 2 * folio {
        return whole;
    }
    let large = (len - folio) / folio * folio;
    let rest = len - folio - large;
    [
        Some(Part {
            offset: 0,
            len: folio,
            order: SMALL_ORDER,
        }),
        Some(Part {
            offset: folio,
            len: large,
            order,
        }),
        (rest != 0).then_some(Part {
            offset: folio + large,
            len: rest,
            order: SMALL_ORDER,
        }),
    ]
}

/// Registers `part` of BAR `bar` as p2pdma memory in folios of the part's order or, where the
/// kernel refuses that order ([`EINVAL`]: larger than its largest folio), of [`SMALL_ORDER`], or
/// in single pages. Returns the order registered.
fn add_part(pdev: &pci::Device<Core<'_>>, bar: u32, part: &Part) -> Result<u32> {
    let size = usize::try_from(part.len)?;
    let mut order = part.order;
    loop {
        match pdev.p2pdma_add_resource_order(bar, size, part.offset, order) {
            Err(e) if e == EINVAL && order > 0 => {
                let smaller = if order > SMALL_ORDER { SMALL_ORDER } else { 0 };
                dev_warn!(
                    pdev,
                    "folios of order {} refused, using order {}\n",
                    order,
                    smaller
                );
                order = smaller;
            }
            result => return result.map(|()| order),
        }
    }
}

/// The folio order of the devices probed from now on: the parameter `folio_order` at module
/// load, then what `/sys/kernel/debug/p2pdma_bar/folio_order` was last set to.
static FOLIO_ORDER: Atomic<u32> = Atomic::new(FOLIO_ORDER_DEFAULT);

/// The debugfs file `folio_order` (the data of a file of [`FOLIO_ORDER`]).
struct FolioOrder;

impl FolioOrder {
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", FOLIO_ORDER.load(Relaxed))
    }

    fn store(&self, reader: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 8];
        let len = reader.len();
        if len > buf.len() {
            return Err(EINVAL);
        }
        reader.read_slice(&mut buf[..len])?;
        let text = core::str::from_utf8(&buf[..len]).map_err(|_| EINVAL)?;
        let order: u32 = text.trim().parse().map_err(|_| EINVAL)?;
        if order > FOLIO_ORDER_MAX {
            return Err(EINVAL);
        }
        FOLIO_ORDER.store(order, Relaxed);
        Ok(())
    }
}

/// Number of standard BARs of a PCI function.
const STD_BARS: usize = 6;

/// Reads what [`select_bar`] needs of the standard BARs of `pdev`.
fn bar_infos(pdev: &pci::Device) -> [Option<BarInfo>; STD_BARS] {
    let mut bars = [None; STD_BARS];
    for (bar, info) in (0u32..).zip(bars.iter_mut()) {
        *info = match (
            pdev.resource_flags(bar),
            pdev.resource_start(bar),
            pdev.resource_len(bar),
        ) {
            (Ok(flags), Ok(start), Ok(len)) => Some(BarInfo { flags, start, len }),
            _ => None,
        };
    }
    bars
}

/// The data of the debugfs switch `published` of a bound device.
struct Publication {
    pdev: ARef<pci::Device>,
}

impl Publication {
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", u8::from(self.pdev.has_p2pmem()))
    }

    fn store(&self, reader: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 4];
        let len = reader.len();
        if len > buf.len() {
            return Err(EINVAL);
        }
        reader.read_slice(&mut buf[..len])?;
        let publish = match buf[..len].strip_suffix(b"\n").unwrap_or(&buf[..len]) {
            b"0" => false,
            b"1" => true,
            _ => return Err(EINVAL),
        };
        // SAFETY: The switch is a file of the driver's data, which is dropped when the driver
        // unbinds; dropping it removes the file and waits for the callbacks in progress, so the
        // device is bound while this runs. `pci::Device<Bound>` has the layout of `pci::Device`.
        let pdev: &pci::Device<device::Bound> =
            unsafe { &*core::ptr::from_ref(&*self.pdev).cast() };
        pdev.p2pmem_publish(publish);
        dev_info!(
            pdev,
            "p2pdma memory {} through debugfs\n",
            if publish { "published" } else { "withdrawn" }
        );
        Ok(())
    }
}

/// The driver's data of a bound device: the debugfs switch. The p2pdma memory itself is device
/// managed.
struct P2pdmaBar {
    // Dropped before the directory it is in.
    _published: Pin<KBox<File<Publication>>>,
    _dir: Dir,
}

kernel::pci_device_table!(
    PCI_TABLE,
    <P2pdmaBar as pci::Driver>::IdInfo,
    [
        // QEMU ivshmem-plain: BAR0 registers, BAR2 the shared memory.
        (
            pci::DeviceId::from_id(pci::Vendor::REDHAT_QUMRANET, 0x1110),
            ()
        ),
    ]
);

impl pci::Driver for P2pdmaBar {
    type IdInfo = ();
    type Data<'bound> = Self;
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let Some((bar, BarInfo { start, len, .. })) = select_bar(&bar_infos(pdev)) else {
            dev_err!(
                pdev,
                "no usable BAR: need a 64-bit prefetchable memory BAR of >= 2 MiB, 2 MiB aligned\n"
            );
            return Err(ENODEV);
        };

        pdev.enable_device_mem()?;

        // The two calls a GPU driver adds to offer its memory: give (all of) the BAR struct pages
        // and a p2pdma pool, and let other drivers and user space allocate from it. The first is
        // made for each part of the BAR, whose folios are of different orders.
        let order = FOLIO_ORDER.load(Relaxed);
        for part in layout(start, len, order).iter().flatten() {
            let order = add_part(pdev, bar, part)?;
            dev_info!(
                pdev,
                "BAR{} +{} MiB: {} MiB in folios of {} KiB\n",
                bar,
                part.offset >> 20,
                part.len >> 20,
                (PAGE_SIZE as u64 >> 10) << order
            );
        }
        let mib = len >> 20;
        if mib >= u64::from(module_parameters::defer_below_mib.value()) {
            pdev.p2pmem_publish(true);
            dev_info!(
                pdev,
                "BAR{} ({} MiB) published as peer-to-peer DMA memory\n",
                bar,
                mib
            );
        } else {
            dev_info!(
                pdev,
                "BAR{} ({} MiB) registered as peer-to-peer DMA memory, to publish later\n",
                bar,
                mib
            );
        }

        let name = CString::try_from_fmt(fmt!(
            "p2pdma_bar-{}",
            pdev.as_ref().name().to_str().map_err(|_| EINVAL)?
        ))?;
        let dir = Dir::new(&name);
        let pdev: &pci::Device = pdev;
        let published = KBox::pin_init(
            dir.read_write_callback_file(
                c"published",
                Publication { pdev: pdev.into() },
                &Publication::show,
                &Publication::store,
            ),
            GFP_KERNEL,
        )?;
        Ok(P2pdmaBar {
            _published: published,
            _dir: dir,
        })
    }

    /// Where a GPU driver would reset its device: reports whether p2pdma memory is still in use
    /// (allocated or referenced), into which DMA might still be in flight.
    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, _this: Pin<&Self::Data<'bound>>) {
        match pdev.p2pmem_in_use() {
            0 => dev_info!(pdev, "unbind: no p2pdma memory in use\n"),
            used => dev_warn!(
                pdev,
                "unbind: {} KiB of p2pdma memory still in use, DMA may still reach it\n",
                used >> 10
            ),
        }
    }
}

/// The module: the driver and the debugfs file `p2pdma_bar/folio_order`.
#[pin_data]
struct P2pdmaBarModule {
    // Unregistered first: no device is probed once the file is gone.
    #[pin]
    _driver: driver::Registration<pci::Adapter<P2pdmaBar>>,
    #[pin]
    _folio_order: File<FolioOrder>,
    _dir: Dir,
}

impl kernel::InPlaceModule for P2pdmaBarModule {
    fn init(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        FOLIO_ORDER.store(
            module_parameters::folio_order.value().min(FOLIO_ORDER_MAX),
            Relaxed,
        );
        let dir = Dir::new(c"p2pdma_bar");
        try_pin_init!(Self {
            _folio_order <- dir.read_write_callback_file(
                c"folio_order",
                FolioOrder,
                &FolioOrder::show,
                &FolioOrder::store,
            ),
            _driver <- driver::Registration::new(<Self as kernel::ModuleMetadata>::NAME, module),
            _dir: dir,
        })
    }
}

module! {
    type: P2pdmaBarModule,
    name: "p2pdma_bar",
    authors: ["spin developers"],
    description: "PCI memory BAR as peer-to-peer DMA memory",
    license: "GPL",
    params: {
        defer_below_mib: u32 {
            default: 0,
            description: "Register, but do not publish in probe, BARs smaller than this many MiB \
                          (publish them through debugfs later)",
        },
        folio_order: u32 {
            default: crate::FOLIO_ORDER_DEFAULT,
            description: "Order of the folios of the memory (0: single pages; default 12, 16 MiB \
                          folios, with the first 16 MiB in 2 MiB folios)",
        },
    },
}

#[cfg(CONFIG_P2PDMA_BAR_KUNIT_TEST)]
#[kunit_tests(rust_spin_p2pdma_bar)]
mod tests {
    use super::*;

    fn mem64_pref() -> Flags {
        Flags::IORESOURCE_MEM | Flags::IORESOURCE_PREFETCH | Flags::IORESOURCE_MEM_64
    }

    fn bar(flags: Flags, start: u64, len: u64) -> Option<BarInfo> {
        Some(BarInfo { flags, start, len })
    }

    #[test]
    fn ivshmem_uses_bar2() {
        // BAR0: 256 B of 32-bit registers; BAR2: 256 MiB of 64-bit prefetchable memory.
        let bars = [
            bar(Flags::IORESOURCE_MEM, 0xfe00_0000, 256),
            None,
            bar(mem64_pref(), 0x8_0000_0000, 256 << 20),
            None,
            None,
            None,
        ];
        assert_eq!(select_bar(&bars).map(|(bar, _)| bar), Some(2));
    }

    #[test]
    fn first_usable_bar_wins() {
        let bars = [
            bar(mem64_pref(), 0x8_0000_0000, 64 << 20),
            None,
            bar(mem64_pref(), 0x9_0000_0000, 256 << 20),
        ];
        assert_eq!(select_bar(&bars).map(|(bar, _)| bar), Some(0));
    }

    #[test]
    fn refuses_unusable_bars() {
        let io = Flags::IORESOURCE_IO;
        let mem32_pref = Flags::IORESOURCE_MEM | Flags::IORESOURCE_PREFETCH;
        let mem64 = Flags::IORESOURCE_MEM | Flags::IORESOURCE_MEM_64;
        let bars = [
            // I/O ports.
            bar(io, 0xc000, 4 << 20),
            // 32-bit prefetchable, 64-bit non-prefetchable.
            bar(mem32_pref, 0xc000_0000, 16 << 20),
            bar(mem64, 0x8_0000_0000, 16 << 20),
            // Too small, misaligned start, size not a multiple of 2 MiB.
            bar(mem64_pref(), 0x8_0000_0000, 1 << 20),
            bar(mem64_pref(), 0x8_0010_0000, 4 << 20),
            bar(mem64_pref(), 0x8_0000_0000, 3 << 20),
        ];
        assert_eq!(select_bar(&bars).map(|(bar, _)| bar), None);
        assert_eq!(select_bar(&[]).map(|(bar, _)| bar), None);
        assert_eq!(select_bar(&[None; STD_BARS]).map(|(bar, _)| bar), None);
    }

    fn part(offset: u64, len: u64, order: u32) -> Option<Part> {
        Some(Part { offset, len, order })
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn single_pages_are_one_part() {
        assert_eq!(
            layout(0x8_0000_0000, 256 * MIB, 0),
            [part(0, 256 * MIB, 0), None, None]
        );
    }

    #[test]
    fn bar_gets_small_and_large_folios() {
        // The rig's 256 MiB stand-in GPU: 16 MiB in 2 MiB folios, 240 MiB in 16 MiB folios.
        assert_eq!(
            layout(0x8_0000_0000, 256 * MIB, 12),
            [part(0, 16 * MIB, 9), part(16 * MIB, 240 * MIB, 12), None]
        );
        // A remainder smaller than a large folio goes in 2 MiB folios at the end.
        assert_eq!(
            layout(0x8_0000_0000, 38 * MIB, 12),
            [
                part(0, 16 * MIB, 9),
                part(16 * MIB, 16 * MIB, 12),
                part(32 * MIB, 6 * MIB, 9)
            ]
        );
    }

    #[test]
    fn small_or_misaligned_bar_gets_small_folios() {
        // Smaller than two large folios: the rig's 8 MiB provider.
        assert_eq!(
            layout(0x8_1000_0000, 8 * MIB, 12),
            [part(0, 8 * MIB, 9), None, None]
        );
        assert_eq!(
            layout(0x8_0000_0000, 30 * MIB, 12),
            [part(0, 30 * MIB, 9), None, None]
        );
        // Two large folios exactly: the small part and one large folio.
        assert_eq!(
            layout(0x8_0000_0000, 32 * MIB, 12),
            [part(0, 16 * MIB, 9), part(16 * MIB, 16 * MIB, 12), None]
        );
        // Start not aligned to a large folio.
        assert_eq!(
            layout(0x8_0020_0000, 256 * MIB, 12),
            [part(0, 256 * MIB, 9), None, None]
        );
        // Orders up to 2 MiB folios are used as they are.
        assert_eq!(
            layout(0x8_0000_0000, 64 * MIB, 4),
            [part(0, 64 * MIB, 4), None, None]
        );
        assert_eq!(
            layout(0x8_0000_0000, 64 * MIB, 9),
            [part(0, 64 * MIB, 9), None, None]
        );
    }

    #[test]
    fn parts_cover_the_bar_aligned() {
        for order in 0..=FOLIO_ORDER_MAX {
            for mib in [2u64, 4, 6, 30, 32, 34, 64, 100, 256, 1024, 4096] {
                let len = mib * MIB;
                let mut end = 0;
                for p in layout(0x100_0000_0000, len, order).iter().flatten() {
                    let folio = 1u64 << (p.order + PAGE_SHIFT as u32);
                    assert_eq!(p.offset, end);
                    assert!(p.len > 0 && p.len % folio == 0 && p.offset % folio == 0);
                    assert!(p.order <= order);
                    end += p.len;
                }
                assert_eq!(end, len);
            }
        }
    }

    #[test]
    fn accepts_granule_sized_bar() {
        assert_eq!(
            select_bar(&[None, bar(mem64_pref(), 0x8_0020_0000, 2 << 20)]).map(|(bar, _)| bar),
            Some(1)
        );
    }
}
