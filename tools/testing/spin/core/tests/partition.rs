// SPDX-License-Identifier: GPL-2.0

//! Property tests of the GPU read-ahead partition's bookkeeping (rust/spin/sched/readahead.rs)
//! against a plain `VecDeque` model: the same entries are evicted in the same order, the page
//! limit is never exceeded with the pages found busy held and the pages reserved for windows in
//! flight, a reservation evicts only when it can be made, and rebuilding into a smaller ring
//! keeps the newest entries.

use proptest::prelude::*;
use spin_core::sched::readahead::{Partition, Reserve, Weighted};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Folio(u32, u64);

impl Weighted for Folio {
    fn pages(&self) -> u64 {
        self.1
    }
}

proptest! {
    #[test]
    fn partition_matches_fifo_model(
        limit in 1u64..64,
        slots_len in 1usize..64,
        ops in prop::collection::vec((0u8..8, 1u64..9), 0..400),
        busy_every in 0u32..5,
    ) {
        let mut slots = vec![Folio(0, 1); slots_len];
        let mut p = Partition::new(limit);
        let mut model: VecDeque<Folio> = VecDeque::new();
        let mut held = 0u64;
        let mut reserved = 0u64;
        // Entry `id` is found busy when evicted if `busy_every` divides it (never for 0).
        let busy = |id: u32| busy_every != 0 && id % busy_every == 0;
        let sum = |m: &VecDeque<Folio>| m.iter().map(|e| e.1).sum::<u64>();
        // The model's FIFO rule: the oldest entries go, the busy ones held, until `more` pages
        // fit beside the entries and the held pages, and a slot is free.
        let make_room = |model: &mut VecDeque<Folio>, held: &mut u64, more: u64| {
            let mut gone = Vec::new();
            while sum(model) + *held + more > limit || model.len() == slots_len {
                let Some(old) = model.pop_front() else { break };
                if busy(old.0) {
                    *held += old.1;
                }
                gone.push(old);
            }
            gone
        };
        for (id, (op, pages)) in ops.into_iter().enumerate() {
            let f = Folio(id as u32, pages);
            if op == 0 {
                prop_assert_eq!(p.pop(&slots), model.pop_front());
            } else if op == 1 {
                let e = p.pop_held(&slots);
                prop_assert_eq!(e, model.pop_front());
                held += e.map_or(0, |e| e.1);
            } else if op == 2 {
                p.release(pages);
                held = held.saturating_sub(pages);
            } else if op == 3 {
                let mut got = Vec::new();
                let r = p.reserve(&slots, pages, |e| {
                    got.push(e);
                    if busy(e.0) { e.1 } else { 0 }
                });
                let mut want = Vec::new();
                let expect = if held + pages > limit {
                    Reserve::NoRoom
                } else if held + reserved + pages > limit {
                    Reserve::Wait
                } else {
                    want = make_room(&mut model, &mut held, reserved + pages);
                    if sum(&model) + held + reserved + pages <= limit {
                        reserved += pages;
                        Reserve::Done
                    } else {
                        Reserve::NoRoom
                    }
                };
                prop_assert_eq!(r, expect);
                prop_assert_eq!(got, want);
            } else if op == 4 {
                p.unreserve(pages);
                reserved = reserved.saturating_sub(pages);
            } else {
                let mut got = Vec::new();
                let admitted = p.push(&mut slots, f, |e| {
                    got.push(e);
                    if busy(e.0) { e.1 } else { 0 }
                });
                let mut want = Vec::new();
                let mut fits = false;
                if pages <= limit {
                    want = make_room(&mut model, &mut held, reserved + pages);
                    fits = sum(&model) + held + reserved + pages <= limit;
                    if fits {
                        model.push_back(f);
                    }
                }
                prop_assert_eq!(admitted, fits);
                prop_assert_eq!(got, want);
            }
            prop_assert!(p.used() <= p.limit());
            prop_assert_eq!(p.held(), held);
            prop_assert_eq!(p.reserved(), reserved);
            prop_assert_eq!(p.queued(), sum(&model));
            prop_assert_eq!(p.pages(), sum(&model) + held);
            prop_assert_eq!(p.len(), model.len());
            prop_assert_eq!(p.peek(&slots), model.front().copied());
        }
        // Rebuilding into a smaller ring (as the kernel does when the limit changes) keeps, in
        // order, what the same FIFO rule keeps; entries larger than the new limit are refused.
        let small = limit / 2 + 1;
        let mut new_slots = vec![Folio(0, 1); small as usize];
        p.unreserve(reserved);
        let mut q = Partition::new(small);
        let mut want: VecDeque<Folio> = VecDeque::new();
        while let Some(e) = p.pop(&slots) {
            prop_assert_eq!(Some(e), model.pop_front());
            let admitted = q.push(&mut new_slots, e, |_| 0);
            prop_assert_eq!(admitted, e.1 <= small);
            if admitted {
                while want.iter().map(|e| e.1).sum::<u64>() + e.1 > small
                    || want.len() == new_slots.len()
                {
                    want.pop_front();
                }
                want.push_back(e);
            }
        }
        prop_assert!(q.pages() <= small);
        let mut kept = Vec::new();
        while let Some(e) = q.pop(&new_slots) {
            kept.push(e);
        }
        prop_assert_eq!(kept, Vec::from(want));
    }
}
