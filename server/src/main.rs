//! The `wasbox` command. Everything lives in the library (`wasbox::cli`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

fn main() {
    std::process::exit(wasbox::cli::main());
}

/// The process's allocator: mimalloc, except in a one-shot `wasbox run`, which uses the C
/// library's. mimalloc is the faster for a server's many threads, and its pages per size
/// class cost a short process more page faults than it saves: with glibc's allocator a
/// `wasbox run` of `sh -c 'echo hello'` faulted 632 pages instead of 710 and took 3.06-3.13
/// ms instead of 3.11-3.31 ms (`perf stat -r 200`, three rounds). The choice is made once, before anything is
/// allocated ([`one_shot_set_up`]), and never changes: every block is freed by the
/// allocator that made it.
#[global_allocator]
static ALLOCATOR: Allocator = Allocator;

struct Allocator;

/// Which allocator serves the process: none chosen yet, mimalloc, or the C library's.
static CHOSEN: AtomicU8 = AtomicU8::new(UNCHOSEN);
const UNCHOSEN: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

impl Allocator {
    /// The allocator serving the process. The first allocation fixes the choice: mimalloc,
    /// unless the C library's was chosen before it.
    #[inline]
    fn chosen() -> &'static dyn GlobalAlloc {
        let system = match CHOSEN.load(Ordering::Relaxed) {
            UNCHOSEN => CHOSEN
                .compare_exchange(UNCHOSEN, MIMALLOC, Ordering::Relaxed, Ordering::Relaxed)
                .is_err_and(|now| now == SYSTEM),
            chosen => chosen == SYSTEM,
        };
        if system { &System } else { &mimalloc::MiMalloc }
    }
}

// SAFETY: each method forwards to one of two allocators, the same one for the whole life of
// the process (`CHOSEN` changes once, from `UNCHOSEN`, before the first allocation), so a
// block is always freed or resized by the allocator that made it. The callers' contracts
// are passed on unchanged.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { Self::chosen().alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { Self::chosen().alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { Self::chosen().dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { Self::chosen().realloc(ptr, layout, new_size) }
    }
}

/// Set-up of a one-shot `wasbox run`, before any Rust code runs (glibc calls each
/// `.init_array` entry of the executable with `main`'s argc, argv and envp):
/// - the C library's allocator is chosen (see [`ALLOCATOR`]);
/// - transparent huge pages are turned off for the process: a one-shot command touches a
///   few MiB, and a huge page costs it 2 MiB of zeroing per fault (mimalloc asks for them).
///   Before this ran ahead of std's runtime set-up, its first allocation still faulted a
///   2 MiB page in: 6-8% of a run of `sh -c 'echo hello'` (alternating runs).
///
/// `wasbox serve` keeps mimalloc and huge pages: its jobs a second were the same either way.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array")]
static ONE_SHOT_SET_UP: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = one_shot_set_up;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn one_shot_set_up(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    if argc < 2 || argv.is_null() {
        return;
    }
    // SAFETY: glibc passes `main`'s argv: `argc` pointers to NUL-terminated strings.
    let command = unsafe { std::ffi::CStr::from_ptr(*argv.add(1)) };
    if command.to_bytes() != b"run" {
        return;
    }
    // Only if nothing was allocated yet (then mimalloc stays).
    let _ = CHOSEN.compare_exchange(UNCHOSEN, SYSTEM, Ordering::Relaxed, Ordering::Relaxed);
    // SAFETY: prctl with integer arguments only; it cannot touch memory.
    unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_is_not_switched_once_something_was_allocated() {
        // The test harness has allocated: an allocator was chosen.
        let chosen = CHOSEN.load(Ordering::Relaxed);
        assert_ne!(chosen, UNCHOSEN);
        let argv = [c"wasbox".as_ptr(), c"run".as_ptr()];
        one_shot_set_up(2, argv.as_ptr(), std::ptr::null());
        assert_eq!(CHOSEN.load(Ordering::Relaxed), chosen);
        // Blocks made before still go back to the allocator that made them.
        drop(vec![0u8; 4096]);
    }
}
