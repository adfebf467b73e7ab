import CKernels

/// Process memory helpers (glibc malloc tuning; no-ops with other C libraries).
public enum Memory {
    /// Returns free heap pages to the OS (glibc `malloc_trim`). ``Session`` calls it once the
    /// model is loaded and planned, ``BufferPool`` when a run's end drops ≥ 1 MiB of idle buffers.
    @discardableResult
    public static func releaseFreeMemory() -> Bool { fk_release_free_memory() != 0 }

    /// Tunes glibc malloc for a long-running interpreter: one arena for every thread (worker
    /// threads otherwise each keep freed pages resident) and a fixed 256 KiB mmap threshold
    /// (glibc otherwise raises it after the first large free, and large tensor buffers then
    /// fragment the heap). On SmolLM2-135M this takes peak RSS from 183–199 MB, varying from run
    /// to run, to a steady ~181 MB. Process-wide: the `forge-ir` CLI calls it at start; a host
    /// app decides for itself. Call before other threads start.
    @discardableResult
    public static func tuneMalloc() -> Bool { fk_tune_malloc() != 0 }

    /// The wrapping sum of the `bytes / 8` 64-bit words at `p` (8-byte aligned), read in order
    /// with a software prefetch 8 KB ahead into L2, as the int8 GEMV streams its weights
    /// (`fk_read_sum`): the inner loop of a read-bandwidth probe (`forge-ir bench`'s decode bound).
    public static func prefetchingSum(_ p: UnsafeRawPointer, bytes: Int) -> UInt64 { fk_read_sum(p, bytes) }
}
