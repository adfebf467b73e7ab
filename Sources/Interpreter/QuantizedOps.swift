import GraphIR

/// Kernels on compressed weights that are not linear algebra.
enum QuantizedOps {
    /// `gather` of rows (axis 0, batch_dims 0) of an fp16 table read in place from the weight
    /// file (``RuntimeValue/halfBlob``): only the selected rows are widened. Any other form
    /// widens the table and runs the dense kernel.
    static func gatherRows(_ inv: KernelInvocation, shape: [Int], table h: HalfBuffer, dense: Kernel) throws -> [RuntimeValue] {
        try gatherRows(inv, shape: shape, dense: dense, widened: { try RuntimeValue.halfBlob(shape, h).dense() },
                       copyRow: { o, at, r, n in for j in 0..<n { o[at + j] = h[r * n + j] } },
                       result: { Tensor(.fp16, shape: $0, floats: $1) })
    }

    /// `gather` of rows (axis 0, batch_dims 0) of an int8 table read in place (a mapped weight
    /// or a mapped static input, ``RuntimeValue/int8Blob``): only the selected rows are read
    /// (int8 values, held as Int32; the plan gives them the op's output dtype). Any other form
    /// widens the table and runs the dense kernel.
    static func gatherRows(_ inv: KernelInvocation, shape: [Int], table b: Int8Buffer, dense: Kernel) throws -> [RuntimeValue] {
        try gatherRows(inv, shape: shape, dense: dense, widened: { try RuntimeValue.int8Blob(shape, b).dense() },
                       copyRow: { o, at, r, n in for j in 0..<n { o[at + j] = Int32(b[r * n + j]) } },
                       result: { Tensor(b.isPackedInt4 ? .int4 : .int8, shape: $0, ints: $1) })
    }

    /// The row gather of both in-place tables: each index (negative counts from the end)
    /// picks a row of the `shape` table; `copyRow(out, at, row, rowLength)` writes that row's
    /// values at `out[at...]`; `result` makes the output tensor of shape `indices.shape +
    /// shape[1...]`. Other axes or batch_dims run `dense` on the `widened` table.
    /// - Throws: `KernelError` naming an index outside the table.
    private static func gatherRows<E>(_ inv: KernelInvocation, shape: [Int], dense: Kernel, widened: () throws -> Tensor,
                                      copyRow: (UnsafeMutableBufferPointer<E>, Int, Int, Int) -> Void,
                                      result: ([Int], [E]) -> Tensor) throws -> [RuntimeValue] {
        var axis = try inv.int("axis", default: 0)
        if axis < 0 { axis += shape.count }
        guard axis == 0, try inv.int("batch_dims", default: 0) == 0, let rows = shape.first else {
            return try dense(inv.replacing("x", with: .tensor(try widened())))
        }
        let indices = try inv.tensor("indices")
        let rowLen = shape.dropFirst().reduce(1, *)
        var out: [E] = BufferPool.uninitialized(indices.count * rowLen)
        try out.withUnsafeMutableBufferPointer { o in
            for (k, raw) in indices.ints.enumerated() {
                var r = Int(raw)
                if r < 0 { r += rows }
                guard r >= 0, r < rows else { throw KernelError("index \(raw) out of range for dimension 0 of size \(rows)") }
                copyRow(o, k * rowLen, r, rowLen)
            }
        }
        return [.tensor(result(indices.shape + Array(shape.dropFirst()), out))]
    }

    /// Wraps the dense `gather` kernel: when `x` is a ``QuantizedTensor`` (an int8 embedding
    /// table) and the gather is along axis 0 with batch_dims 0, only the selected rows are
    /// dequantized; otherwise the dense kernel runs.
    static func gatherWrapping(_ dense: @escaping Kernel) -> Kernel {
        return { inv in
            if case let .halfBlob(shape, h) = try inv.value("x") { return try gatherRows(inv, shape: shape, table: h, dense: dense) }
            if case let .int8Blob(shape, b) = try inv.value("x") { return try gatherRows(inv, shape: shape, table: b, dense: dense) }
            guard case let .quantized(q) = try inv.value("x") else { return try dense(inv) }
            var axis = try inv.int("axis", default: 0)
            if axis < 0 { axis += q.shape.count }
            let batchDims = try inv.int("batch_dims", default: 0)
            guard axis == 0, batchDims == 0, q.shape.count >= 1 else {
                return try dense(inv.replacing("x", with: .tensor(q.dequantize())))
            }
            let indices = try inv.tensor("indices")
            let rows = q.shape[0], rowLen = q.shape.dropFirst().reduce(1, *)
            let blocks = q.blockSizes
            let sstrides = contiguousStrides(q.scaleShape)
            let inner = Array(q.shape.dropFirst())
            let innerStrides = contiguousStrides(inner)
            var out: [Float] = BufferPool.uninitialized(indices.count * rowLen)
            for (k, raw) in indices.ints.enumerated() {
                var r = Int(raw)
                if r < 0 { r += rows }
                guard r >= 0, r < rows else { throw KernelError("index \(raw) out of range for dimension 0 of size \(rows)") }
                let srow = (r / blocks[0]) * sstrides[0]
                for j in 0..<rowLen {
                    var si = srow, rem = j
                    for a in 0..<inner.count {
                        let idx = rem / innerStrides[a]
                        rem %= innerStrides[a]
                        si += (idx / blocks[a + 1]) * sstrides[a + 1]
                    }
                    out[k * rowLen + j] = q.scale(at: si) * (Float(q.data[r * rowLen + j]) - (q.offset?[si] ?? 0))
                }
            }
            var t = Tensor(q.dtype, shape: indices.shape + inner, floats: out)
            out = []  // `t` holds the only reference: rounded in place
            Rounding.toStorage(&t)
            return [.tensor(t)]
        }
    }
}
