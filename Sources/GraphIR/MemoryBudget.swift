import Foundation

/// The largest single allocation forge-ir makes from sizes a file declares (a tensor, an
/// `.npz` member, a decompressed stream, a state buffer). Checked before allocating, so a tiny
/// file declaring a 4 GiB member, a deflate bomb or `tile` reps of 2^31−1 fail with a
/// ``SizeError`` instead of exhausting memory.
///
/// Default: half of physical RAM (`ProcessInfo.physicalMemory / 2`); the CLI sets it from
/// `--max-memory` (bytes, or with a `K`/`M`/`G` suffix). Memory-mapped weights do not count.
public enum MemoryBudget {
    nonisolated(unsafe) private static var _limit: Int = defaultLimit
    private static let lock = NSLock()

    /// Half of physical RAM (at least 256 MiB).
    public static var defaultLimit: Int {
        let ram = ProcessInfo.processInfo.physicalMemory
        let half = ram > UInt64(Int.max) ? Int.max / 2 : Int(ram / 2)
        return max(half, 256 << 20)
    }

    /// Bytes one allocation may take.
    public static var limit: Int {
        get { lock.lock(); defer { lock.unlock() }; return _limit }
        set { lock.lock(); _limit = max(newValue, 0); lock.unlock() }
    }

    /// - Throws: ``SizeError`` naming `what` when `bytes` is nil (overflow) or above ``limit``.
    public static func check(bytes: Int?, _ what: @autoclosure () -> String) throws {
        guard let bytes else {
            throw SizeError(what: what(), reason: "its size overflows")
        }
        let l = limit
        guard bytes <= l else {
            throw SizeError(what: what(), reason: "needs \(format(bytes)), more than the memory budget of \(format(l)) (--max-memory)")
        }
    }

    /// Checks a tensor of `count` elements stored `stride` bytes each.
    public static func check(elements count: Int?, stride: Int, _ what: @autoclosure () -> String) throws {
        try check(bytes: count.flatMap { CheckedSize.bytes(elements: $0, stride: stride) }, what())
    }

    /// Parses `--max-memory`: bytes, or a number with K, M, G or T (powers of 1024), e.g. `8G`.
    public static func parse(_ text: String) -> Int? {
        let t = text.trimmingCharacters(in: .whitespaces).uppercased()
        guard let last = t.last else { return nil }
        var shift = 0
        var digits = t
        if let s = ["K": 10, "M": 20, "G": 30, "T": 40][String(last)] {
            shift = s
            digits = String(t.dropLast())
        } else if last == "B" {
            digits = String(t.dropLast())
        }
        guard let v = Int(digits), v > 0 else { return nil }
        let (r, o) = v.multipliedReportingOverflow(by: 1 << shift)
        return o ? nil : r
    }

    static func format(_ bytes: Int) -> String {
        if bytes >= 1 << 30 { return String(format: "%.1f GiB", Double(bytes) / Double(1 << 30)) }
        if bytes >= 1 << 20 { return String(format: "%.1f MiB", Double(bytes) / Double(1 << 20)) }
        return "\(bytes) bytes"
    }
}
