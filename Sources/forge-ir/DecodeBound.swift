import Dispatch
import Foundation
import GraphIR
import Generation
import Interpreter

/// The memory-bandwidth bound of decoding: bytes one decoded token must read (weights as
/// stored + the live KV cache) over the machine's read bandwidth, measured in the same run.
struct DecodeBound {
    /// The size of the buffer the bandwidth probe sums: twice the largest CPU cache
    /// (``largestCacheBytes``), at least 256 MiB, at most 4 GiB. A buffer that fits in the last
    /// level cache would measure the cache, not memory: this session's Xeon has a 300 MiB L3,
    /// more than a 256 MiB probe. Twice the cache is streamed through it, so each pass reads
    /// from memory (the cache holds at most half of it).
    static func probeBytes(largestCache: Int = largestCacheBytes()) -> Int {
        min(max(256 << 20, 2 * largestCache), 4 << 30)
    }

    /// The largest cache of CPU 0 in bytes (`/sys/devices/system/cpu/cpu0/cache/index*/size`,
    /// e.g. `307200K`), or 0 when the files are absent (not Linux) or unreadable.
    static func largestCacheBytes(root: String = "/sys/devices/system/cpu/cpu0/cache") -> Int {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: root) else { return 0 }
        var best = 0
        for e in entries where e.hasPrefix("index") {
            guard let raw = try? String(contentsOfFile: root + "/" + e + "/size", encoding: .utf8) else { continue }
            best = max(best, parseCacheSize(raw.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
        }
        return best
    }

    /// `307200K` → 314572800; `2M`, `48K`, a plain byte count; nil for anything else.
    static func parseCacheSize(_ s: String) -> Int? {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        if let last = s.last, let unit = units[last] {
            guard let v = Int(s.dropLast()), v >= 0, v <= (1 << 40) / unit else { return nil }
            return v * unit
        }
        return Int(s).flatMap { $0 >= 0 ? $0 : nil }
    }

    /// Bytes read per second by `threads` threads summing one buffer: the best of `passes`
    /// passes of each of two reads — a plain sequential sum (the hardware prefetchers alone) and
    /// `Memory.prefetchingSum`, which also prefetches 8 KB ahead into L2 as the int8 GEMV does
    /// (the faster of the two is the machine's read bandwidth). On a 2-vCPU Xeon (Emerald
    /// Rapids) the plain sum read 18–20 GB/s from memory where the prefetching one read
    /// 31–33 GB/s: a bound from the plain read alone was below what decoding itself reached.
    static func measureReadBandwidth(bytes: Int = probeBytes(), threads: Int, passes: Int = 3) -> Double {
        let count = bytes / 8
        let buf = UnsafeMutablePointer<UInt64>.allocate(capacity: count)
        defer { buf.deallocate() }
        for i in 0..<count { buf[i] = UInt64(truncatingIfNeeded: i) } // resident, not the zero page
        let n = max(threads, 1)
        var best = 0.0
        var sink: UInt64 = 0
        let lock = NSLock()
        for pass in 0..<(2 * passes) {
            let prefetching = pass % 2 == 1
            let t0 = DispatchTime.now().uptimeNanoseconds
            DispatchQueue.concurrentPerform(iterations: n) { t in
                let lo = count * t / n, hi = count * (t + 1) / n
                var s: UInt64
                if prefetching {
                    s = Memory.prefetchingSum(buf + lo, bytes: (hi - lo) * 8)
                } else {
                    var a = SIMD8<UInt64>(), i = lo
                    let raw = UnsafeRawPointer(buf)
                    while i + 8 <= hi {
                        a &+= raw.loadUnaligned(fromByteOffset: i * 8, as: SIMD8<UInt64>.self)
                        i += 8
                    }
                    s = a.wrappedSum()
                    while i < hi { s &+= buf[i]; i += 1 }
                }
                lock.lock(); sink &+= s; lock.unlock()
            }
            let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            best = max(best, Double(count * 8) / dt)
        }
        if sink == 42 { FileHandle.standardError.write(Data()) } // keep the sum alive
        return best
    }

    /// Weight bytes as stored that one decode call reads: every `const` tensor of the decode
    /// function (constexpr operands included: int4/int8 data and their scales), except that a
    /// table read only through `gather` (an embedding) counts one row.
    static func weightBytesPerToken(_ model: Model, function name: String) -> Int {
        guard let f = model.program.function(named: name) else { return 0 }
        var users: [ObjectIdentifier: [Op]] = [:]
        f.body.walk { op in for v in op.operandValues { users[ObjectIdentifier(v), default: []].append(op) } }
        var total = 0
        // Immediate tensors bound inline (iOS 18 constexpr operands), as stored.
        f.body.walk { op in
            for input in op.inputs {
                for case let .constant(c) in input.operands {
                    if let t = c.type.tensorType, let n = t.elementCount, n >= 256 { total += t.dtype.byteCount(elements: n) }
                }
            }
        }
        f.body.walk { op in
            guard op.type == "const", let out = op.outputs.first, let t = out.type.tensorType, let n = t.elementCount, n >= 256 else { return }
            let bytes = t.dtype.byteCount(elements: n)
            // Through a constexpr (dequantization) to the ops that read the weight.
            func readers(_ v: Value) -> [(Op, Value)] {
                (users[ObjectIdentifier(v)] ?? []).flatMap { op -> [(Op, Value)] in
                    op.type.hasPrefix("constexpr_") && op.outputs.count == 1 ? readers(op.outputs[0]) : [(op, v)]
                }
            }
            let u = readers(out)
            if !u.isEmpty, u.allSatisfy({ $0.0.type == "gather" && $0.0.operand("x")?.value === $0.1 }), let rows = t.shape.first?.fixedValue, rows > 0 {
                total += bytes / rows
            } else {
                total += bytes
            }
        }
        return total
    }
}
