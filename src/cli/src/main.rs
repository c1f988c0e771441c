//! The `dra-autoscaler` command.

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc. `simulate` of a large cluster allocates and frees
/// millions of small objects on a worker thread (its large stack); glibc served them from
/// a non-main arena, growing it by `mprotect` and spending about a quarter of the run in
/// `malloc_consolidate`, `unlink_chunk` and `free` (docs/benchmarks.md, issue #28).
///
/// Built without asking for transparent huge pages (the `no_thp` feature): mimalloc
/// otherwise marks its arenas `MADV_HUGEPAGE`, and on a host whose THP defrag setting is
/// the common `madvise`, each first touch of such a region may stall in direct memory
/// compaction. On the project's machine that made `simulate` of 100,000 nodes spend
/// 6-9 s in the kernel instead of 2.8 s, and the controller's first copy of the cluster
/// 1.5-2 s instead of its 0.3 s of work (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = dra_autoscaler::Cli::parse_checked();
    if let Err(error) = cli.init_logging() {
        eprintln!("error: {error}");
        return ExitCode::from(2);
    }
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`dra-autoscaler crd | head -1`): nothing is
        // wrong with the work, and nobody is left to tell.
        Err(error) if dra_autoscaler::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
