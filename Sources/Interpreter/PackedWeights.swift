import CKernels
import Foundation

/// A plan's constant fp32 `linear` weights kept in the panel layout of the fp32 GEMM's levels 1-2
/// (`fk_sgemm_pack_nt`; owned by the plan's ``BufferPool``, see
/// ``BufferPool/packedConstant(_:n:k:)``), so a product with many activation rows (an encoder,
/// a prefill) does not pack its weight again on every call: that packing was 10–13 % of the
/// BERT encoder's call (onnxruntime prepacks constant weights once too). Same tiles on the same
/// panels as `fk_sgemm_nt`, so the same results.
///
/// Entries are keyed by the weight array's storage and hold that array: while an entry lives
/// the storage can neither be freed (its address reused) nor written in place (a write copies,
/// the array being shared), so a hit is always the packed form of the current contents. At
/// most ``budgetBytes`` of packed panels are kept (oldest dropped first). Memory: one more copy
/// of each packed weight, for the plan's life.
final class PackedWeights: @unchecked Sendable {
    /// Packed floats kept at most per plan (1 GiB).
    static let budgetBytes = 1 << 30

    /// One weight's panels in 64-byte aligned memory (each panel row one cache line).
    final class Panels {
        let source: [Float]
        let pointer: UnsafeMutablePointer<Float>
        let count: Int

        init?(_ w: [Float], n: Int, k: Int) {
            let c = Int(fk_sgemm_nt_packed_size(n, k))
            guard c > 0 else { return nil }
            let raw = UnsafeMutableRawPointer.allocate(byteCount: c * MemoryLayout<Float>.stride, alignment: 64)
            pointer = raw.bindMemory(to: Float.self, capacity: c)
            count = c
            source = w
            let ok = w.withUnsafeBufferPointer { fk_sgemm_pack_nt(n, k, $0.baseAddress, k, pointer) }
            if ok == 0 {
                pointer.deallocate()
                return nil
            }
        }

        deinit { pointer.deallocate() }
    }

    private struct Key: Hashable {
        let base: UnsafeRawPointer
        let n: Int, k: Int
    }

    private let lock = NSLock()
    private var entries: [Key: Panels] = [:]
    private var order: [Key] = []
    private var bytes = 0

    /// The panels of `w` (`n` rows of `k` floats, row-major), packed on first use; nil when the
    /// GEMM level has no packed route or `w` is not `n·k` floats.
    func panels(for w: [Float], n: Int, k: Int) -> Panels? {
        guard n > 0, k > 0, w.count == n * k else { return nil }
        guard let base = w.withUnsafeBufferPointer({ $0.baseAddress.map(UnsafeRawPointer.init) }) else { return nil }
        let key = Key(base: base, n: n, k: k)
        lock.lock()
        if let p = entries[key] {
            lock.unlock()
            return p
        }
        lock.unlock()
        guard let p = Panels(w, n: n, k: k) else { return nil }
        let size = p.count * MemoryLayout<Float>.stride
        guard size <= PackedWeights.budgetBytes else { return p }
        lock.lock()
        defer { lock.unlock() }
        if let q = entries[key] { return q }
        while bytes + size > PackedWeights.budgetBytes, !order.isEmpty {
            let old = order.removeFirst()
            if let e = entries.removeValue(forKey: old) { bytes -= e.count * MemoryLayout<Float>.stride }
        }
        entries[key] = p
        order.append(key)
        bytes += size
        return p
    }
}
