//! What the fuzz targets share.

/// Gives the thread that runs every input (libFuzzer's main thread) the
/// stack the command line and the controller give the simulator
/// ([`dra_sim::STACK_BUDGET`]), so inputs run as they do in production.
///
/// Why: CEL compilation and evaluation ask `stacker` for 8 MiB of free stack
/// and move to a fresh 16 MiB segment (mmap, guard page, munmap) when less is
/// left. A main thread has the 8 MiB `ulimit -s` default, so before this every
/// compilation and every evaluation on every device paid for a new segment,
/// which production threads never do. Running on the segments also hid the
/// stack depth from libFuzzer (its `-sanitizer-coverage-stack-depth` feature
/// measures from the main stack), so deeper nesting was not rewarded.
///
/// The main thread's stack grows on demand up to the soft `RLIMIT_STACK`
/// read at fault time, and glibc (which `stacker` asks) reports the new limit,
/// so raising the soft limit before the first input is enough. Call it from
/// the `init:` block of `fuzz_target!`, before anything compiles CEL.
pub fn simulator_stack() {
    let wanted = libc::rlim_t::try_from(dra_sim::STACK_BUDGET).unwrap_or(libc::RLIM_INFINITY);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    let raised = unsafe {
        if libc::getrlimit(libc::RLIMIT_STACK, &mut limit) != 0 {
            false
        } else if limit.rlim_cur == libc::RLIM_INFINITY || limit.rlim_cur >= wanted {
            true
        } else if limit.rlim_max != libc::RLIM_INFINITY && limit.rlim_max < wanted {
            false
        } else {
            limit.rlim_cur = wanted;
            libc::setrlimit(libc::RLIMIT_STACK, &limit) == 0
        }
    };
    if !raised {
        eprintln!(
            "warning: could not raise the stack limit to {wanted} bytes; CEL will run on fresh stack segments (slower)"
        );
    }
}
