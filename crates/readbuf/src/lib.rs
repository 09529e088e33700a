//! The buffer of a READ that is started now and completes later (`ember serve --direct`,
//! whose cache hits are read with O_DIRECT through the calling thread's io_uring).
//!
//! A [`ReadBuf`] is owned: the NBD server's connection keeps a pool of them (one per READ in
//! flight), hands one **by value** to the export that starts the READ, and gets it back, with
//! the READ's outcome, when the READ completes. While the kernel writes into it the buffer is
//! a [`Lent`]: it offers no view of its bytes, and dropping it leaks the memory instead of
//! freeing it, so a shutdown that cannot reap a read never frees memory under the kernel.
//! Only [`Lent::reclaim`], whose caller asserts that every read into the buffer completed,
//! turns it back into a [`ReadBuf`].
//!
//! A buffer registered with a ring (io_uring's fixed buffers, whose pages the kernel pinned
//! once) is marked so ([`ReadBuf::set_registered`]); a marked buffer that is dropped is leaked
//! too, since the kernel's registration could still let a read write into its pages. The
//! ring that registered it clears the mark after it emptied its entry
//! ([`ReadBuf::clear_registered`]).
//!
//! The type lives in its own crate because both sides of the contract name it: the engine's
//! devices (which must not depend on `nbd`) and the NBD server's `Export` trait (which does
//! not depend on the engine). The adapter in `ember-serve` passes the one type through,
//! without a copy or a conversion. Nothing here touches the memory behind the kernel's back:
//! the `unsafe` that hands the memory to the kernel lives in the engine's `device/uring`.
//!
//! - `read_buf.rs`: [`ReadBuf`], the aligned bytes with a length and a capacity;
//! - `lent.rs`: [`Lent`], a buffer the kernel may be writing into.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod lent;
mod read_buf;

pub use lent::Lent;
pub use read_buf::{ReadBuf, ALIGN};
