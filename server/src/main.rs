//! The `wasbox` command. Everything lives in the library (`wasbox::cli`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(wasbox::cli::main());
}

/// A one-shot `wasbox run` turns transparent huge pages off for itself before anything
/// allocates. mimalloc asks for them, and the process's first allocation (std's runtime
/// set-up, before `main`) faulted in a 2 MiB page and zeroed all of it: a tenth of a run of
/// `sh -c 'echo hello'` (measured: 3.3 ms against 2.9 ms). `wasbox serve` keeps them: its
/// jobs a second were the same either way. glibc calls each `.init_array` entry of the
/// executable with `main`'s (argc, argv, envp), before any Rust code runs.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array")]
static THP_OFF_FOR_RUN: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = thp_off_for_run;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn thp_off_for_run(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    if argc < 2 || argv.is_null() {
        return;
    }
    // SAFETY: glibc passes `main`'s argv: `argc` pointers to NUL-terminated strings.
    let command = unsafe { std::ffi::CStr::from_ptr(*argv.add(1)) };
    if command.to_bytes() == b"run" {
        // SAFETY: prctl with integer arguments only; it cannot touch memory.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    }
}
