import GraphIR

/// Compressed-weight ops (MIL iOS16/iOS18 `constexpr_*`). Evaluated once per plan.
///
/// `constexpr_blockwise_shift_scale` and `constexpr_affine_dequantize` on integer data return a
/// ``QuantizedTensor`` (kept compressed); consumers that understand it compute on it directly,
/// others dequantize it once (the plan caches constant results).
enum ConstexprKernels {
    static let table: [String: Kernel] = [
        "constexpr_blockwise_shift_scale": blockwiseShiftScale,
        "constexpr_affine_dequantize": affineDequantize,
        "constexpr_lut_to_dense": lutToDense,
        "constexpr_sparse_to_dense": sparseToDense,
        "constexpr_cast": cast,
        "constexpr_lut_to_sparse": lutToSparse,
        "constexpr_sparse_blockwise_shift_scale": sparseBlockwiseShiftScale,
    ]

    /// The dense tensor of a sparse pair: `nonzero` values at the set bits of `mask` (row-major),
    /// zeros elsewhere (`constexpr_sparse_to_dense.decompress`).
    static func densify(_ nonzero: Tensor, mask: Tensor, op: String) throws -> Tensor {
        let bits = mask.bools
        var j = 0
        func fill<T>(_ src: [T], _ zero: T) throws -> [T] {
            var out = [T](repeating: zero, count: bits.count)
            for i in 0..<bits.count where bits[i] {
                guard j < src.count else { throw KernelError("\(op): mask has more set bits than nonzero data has values (\(src.count))") }
                out[i] = src[j]
                j += 1
            }
            return out
        }
        let data: TensorData
        switch nonzero.data {
        case let .float(a): data = .float(try fill(a, 0))
        case let .int(a): data = .int(try fill(a, 0))
        case let .bool(a): data = .bool(try fill(a, false))
        case .string: throw KernelError("\(op): string data")
        }
        return Tensor(dtype: nonzero.dtype, shape: mask.shape, data: data)
    }

    /// The values of `dense` at the set bits of `mask` (same shape), in row-major order.
    static func gatherSet(_ dense: Tensor, mask: [Bool]) -> [Float] {
        let v = dense.floats
        return (0..<mask.count).compactMap { mask[$0] ? v[$0] : nil }
    }

    /// MIL iOS18 `constexpr_lut_to_sparse(indices_mask, indices_nonzero_data, lut, vector_axis?)`
    /// → (`output_mask`, `output_nonzero_data`): the palettized values of a sparse weight, still
    /// sparse. The indices are densified, looked up as `constexpr_lut_to_dense` does, the mask is
    /// repeated `lut.shape[-1]` times along `vector_axis` (vector palettization), and the values
    /// at its set bits are returned — what `constexpr_sparse_to_dense` then consumes.
    static func lutToSparse(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let mask = try inv.tensor("indices_mask")
        let dense = try densify(try inv.tensor("indices_nonzero_data"), mask: mask, op: "constexpr_lut_to_sparse")
        guard case let .tensor(values) = try lutToDense(inv.replacing("indices", with: .tensor(dense)))[0] else {
            throw KernelError("constexpr_lut_to_sparse: lut lookup failed")
        }
        var outMask = mask
        let lut = try inv.tensor("lut")
        let vsize = lut.shape.last ?? 1
        if vsize > 1 {
            var axis = try inv.int("vector_axis", default: 0)
            if axis < 0 { axis += mask.rank }
            guard axis >= 0, axis < mask.rank else { throw KernelError("constexpr_lut_to_sparse: vector_axis out of range for rank \(mask.rank)") }
            let bits = mask.bools, strides = contiguousStrides(mask.shape)
            var shape = mask.shape
            shape[axis] *= vsize
            let ostrides = contiguousStrides(shape)
            var rep = [Bool](repeating: false, count: bits.count * vsize)
            for i in 0..<bits.count where bits[i] {
                var o = 0
                for a in 0..<mask.rank {
                    let c = (i / strides[a]) % mask.shape[a]
                    o += (a == axis ? c * vsize : c) * ostrides[a]
                }
                for v in 0..<vsize { rep[o + v * ostrides[axis]] = true }
            }
            outMask = Tensor(shape: shape, bools: rep)
        }
        let nz = gatherSet(values, mask: outMask.bools)
        return [.tensor(Tensor(inv.outputDType(0), shape: outMask.shape, ints: outMask.bools.map { $0 ? 1 : 0 })),
                .tensor(Tensor(inv.outputDType(1), shape: [nz.count], floats: nz))]
    }

    /// MIL iOS18 `constexpr_sparse_blockwise_shift_scale(data_mask, nonzero_data, scale, offset?)`
    /// → (`data_mask`, dequantized nonzero values): the data is densified, dequantized as
    /// `constexpr_blockwise_shift_scale` does, and the values at the set bits returned.
    static func sparseBlockwiseShiftScale(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let mask = try inv.tensor("data_mask")
        let dense = try densify(try inv.tensor("nonzero_data"), mask: mask, op: "constexpr_sparse_blockwise_shift_scale")
        let values = try blockwiseShiftScale(inv.replacing("data", with: .tensor(dense)))[0].dense()
        let nz = gatherSet(values, mask: mask.bools)
        return [.tensor(Tensor(inv.outputDType(0), shape: mask.shape, ints: mask.bools.map { $0 ? 1 : 0 })),
                .tensor(Tensor(inv.outputDType(1), shape: [nz.count], floats: nz))]
    }

    /// MIL iOS18 `constexpr_blockwise_shift_scale(data, scale, offset?)`:
    /// `out[i] = scale[i / b] * (data[i] - offset[i / b])`, b = data.shape / scale.shape per axis.
    static func blockwiseShiftScale(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let offset = try inv.optionalTensor("offset")
        // Mapped int8 data stays where it is, and so do fp16 scales mapped from the weight file.
        if case let .int8Blob(shape, buffer) = try inv.value("data") {
            let scales: QuantizedTensor.Scales
            let scaleShape: [Int]
            if case let .halfBlob(s, h) = try inv.value("scale") {
                (scales, scaleShape) = (.half(h), s)
            } else {
                let t = try inv.tensor("scale")
                (scales, scaleShape) = (.float(t.floats), t.shape)
            }
            guard shape.count == scaleShape.count, zip(shape, scaleShape).allSatisfy({ $1 > 0 && $0 % $1 == 0 }) else {
                throw KernelError("scale shape \(scaleShape) does not divide data shape \(shape)")
            }
            if let o = offset, o.shape != scaleShape { throw KernelError("offset shape \(o.shape) differs from scale shape \(scaleShape)") }
            return [.quantized(QuantizedTensor(dtype: inv.outputDType(), shape: shape, buffer: buffer,
                                               scales: scales, scaleShape: scaleShape, offset: offset?.floats))]
        }
        let scale = try inv.tensor("scale")
        let data = try inv.tensor("data")
        guard data.rank == scale.rank else { throw KernelError("scale rank \(scale.rank) differs from data rank \(data.rank)") }
        for (d, s) in zip(data.shape, scale.shape) where s == 0 || d % s != 0 {
            throw KernelError("scale shape \(scale.shape) does not divide data shape \(data.shape)")
        }
        if let o = offset, o.shape != scale.shape { throw KernelError("offset shape \(o.shape) differs from scale shape \(scale.shape)") }
        let outDType = inv.outputDType()
        if data.dtype.isInteger, data.dtype.bitWidth <= 8 {
            // Keep compressed. uint8 values 128...255 do not fit Int8: shift them by 128 into the offset.
            var q = data.ints
            var off = offset?.floats
            if data.dtype == .uint8 || data.dtype == .uint4 || data.dtype.isSubByte && !data.dtype.isSigned {
                if data.dtype == .uint8 {
                    q = q.map { $0 - 128 }
                    off = (off ?? [Float](repeating: 0, count: scale.count)).map { $0 - 128 }
                }
            }
            return [.quantized(QuantizedTensor(dtype: outDType, shape: data.shape, data: q.map { Int8(clamping: $0) },
                                               scale: scale.floats, scaleShape: scale.shape, offset: off))]
        }
        let qt = QuantizedTensorFloat(shape: data.shape, data: data.floats, scale: scale.floats, scaleShape: scale.shape, offset: offset?.floats)
        return [.tensor(Tensor(outDType, shape: data.shape, floats: qt.dequantize()))]
    }

    /// MIL iOS16 `constexpr_affine_dequantize(quantized_data, zero_point, scale, axis)`:
    /// `out = scale * (q - zero_point)`, scale/zero_point scalars or vectors along `axis`.
    static func affineDequantize(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let q = try inv.tensor("quantized_data"), scale = try inv.tensor("scale"), zp = try inv.tensor("zero_point")
        var axis = try inv.int("axis", default: 0)
        if axis < 0 { axis += q.rank }
        guard axis >= 0, axis < max(q.rank, 1) else { throw KernelError("axis \(axis) out of range for rank \(q.rank)") }
        var scaleShape = [Int](repeating: 1, count: q.rank)
        if scale.count > 1 || zp.count > 1 {
            let n = max(scale.count, zp.count)
            guard q.rank > 0, n == q.shape[axis] else { throw KernelError("scale/zero_point length \(n) does not match dimension \(axis) of \(q.shape)") }
            scaleShape[axis] = n
        }
        let blocks = scaleShape.reduce(1, *)
        let s = scale.count == 1 ? [Float](repeating: scale.floats[0], count: blocks) : scale.floats
        let z = zp.count == 1 ? [Float](repeating: zp.floats[0], count: blocks) : zp.floats
        var data = q.ints
        var zf = z
        if q.dtype == .uint8 { data = data.map { $0 - 128 }; zf = z.map { $0 - 128 } }
        return [.quantized(QuantizedTensor(dtype: inv.outputDType(), shape: q.shape, data: data.map { Int8(clamping: $0) },
                                           scale: s, scaleShape: scaleShape, offset: zf))]
    }

    /// MIL `constexpr_lut_to_dense`. iOS18: `indices` uintN tensor, `lut` [g0..gK-1, 2^N, V],
    /// optional `vector_axis`. iOS16: `indices` uint8 packed bit stream, `lut` [2^N], `shape`.
    static func lutToDense(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let lut = try inv.tensor("lut")
        let indices = try inv.tensor("indices")
        if inv.has("shape") {
            let shape = try inv.ints("shape")
            let n = shape.reduce(1, *)
            let entries = lut.count
            let nbits = entries.trailingZeroBitCount
            guard 1 << nbits == entries, nbits >= 1, nbits <= 8 else { throw KernelError("lut has \(entries) entries, not a power of two ≤ 256") }
            let bytes = indices.ints
            guard bytes.count * 8 >= n * nbits else { throw KernelError("indices hold \(bytes.count * 8) bits, need \(n * nbits)") }
            let l = lut.floats
            var out = [Float](repeating: 0, count: n)
            for i in 0..<n {
                var v = 0
                for b in 0..<nbits {
                    let bit = i * nbits + b
                    if (bytes[bit >> 3] >> (bit & 7)) & 1 != 0 { v |= 1 << b }
                }
                out[i] = l[v]
            }
            return [.tensor(Tensor(inv.outputDType(), shape: shape, floats: out))]
        }
        let k = indices.rank
        guard lut.rank == k + 2 else { throw KernelError("lut rank \(lut.rank), expected indices rank + 2 = \(k + 2)") }
        let vsize = lut.shape[k + 1]
        let entries = lut.shape[k]
        var groups = [Int](repeating: 1, count: k)
        for a in 0..<k {
            guard lut.shape[a] > 0, indices.shape[a] % lut.shape[a] == 0 else { throw KernelError("lut shape \(lut.shape) does not divide indices shape \(indices.shape)") }
            groups[a] = indices.shape[a] / lut.shape[a]
        }
        var vaxis = try inv.int("vector_axis", default: 0)
        if vaxis < 0 { vaxis += k }
        var outShape = indices.shape
        if vsize > 1 {
            guard vaxis >= 0, vaxis < k else { throw KernelError("vector_axis out of range") }
            outShape[vaxis] *= vsize
        }
        let idx = indices.ints, l = lut.floats
        let istrides = contiguousStrides(indices.shape), lstrides = contiguousStrides(lut.shape), ostrides = contiguousStrides(outShape)
        var out = [Float](repeating: 0, count: outShape.reduce(1, *))
        for i in 0..<idx.count {
            var rem = i, lbase = 0, obase = 0
            var coord = [Int](repeating: 0, count: k)
            for a in 0..<k {
                coord[a] = rem / istrides[a]
                rem %= istrides[a]
                lbase += (coord[a] / groups[a]) * lstrides[a]
            }
            let e = Int(idx[i])
            guard e >= 0, e < entries else { throw KernelError("index \(e) outside the \(entries)-entry lut") }
            for vv in 0..<vsize {
                obase = 0
                for a in 0..<k { obase += (a == vaxis && vsize > 1 ? coord[a] * vsize + vv : coord[a]) * ostrides[a] }
                out[obase] = l[lbase + e * lstrides[k] + vv]
            }
        }
        return [.tensor(Tensor(inv.outputDType(), shape: outShape, floats: out))]
    }

    /// MIL `constexpr_sparse_to_dense`. iOS18: `mask` uint1 of the output shape. iOS16: `mask`
    /// uint8 packed bits plus `shape`. Each set bit takes the next value of `nonzero_data`.
    static func sparseToDense(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let nz = try inv.tensor("nonzero_data").floats
        let mask = try inv.tensor("mask")
        let shape: [Int]
        var bits: [Bool]
        if inv.has("shape") {
            shape = try inv.ints("shape")
            let n = shape.reduce(1, *)
            let bytes = mask.ints
            guard bytes.count * 8 >= n else { throw KernelError("mask holds \(bytes.count * 8) bits, need \(n)") }
            bits = (0..<n).map { (bytes[$0 >> 3] >> ($0 & 7)) & 1 != 0 }
        } else {
            shape = mask.shape
            bits = mask.bools
        }
        var out = [Float](repeating: 0, count: bits.count)
        var j = 0
        for i in 0..<bits.count where bits[i] {
            guard j < nz.count else { throw KernelError("mask has more set bits than nonzero_data has values (\(nz.count))") }
            out[i] = nz[j]
            j += 1
        }
        return [.tensor(Tensor(inv.outputDType(), shape: shape, floats: out))]
    }

    /// MIL `constexpr_cast(source_val, output_dtype)`.
    static func cast(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        var t = try inv.tensor("source_val")
        t.dtype = inv.outputDType()
        Rounding.toStorage(&t)
        return [.tensor(t)]
    }
}

/// Float-data blockwise dequantization (fp16/fp32 `data`).
struct QuantizedTensorFloat {
    let shape: [Int], data: [Float], scale: [Float], scaleShape: [Int], offset: [Float]?
    func dequantize() -> [Float] {
        let strides = contiguousStrides(shape), sstrides = contiguousStrides(scaleShape)
        let blocks = zip(shape, scaleShape).map { $0 / max($1, 1) }
        var out = [Float](repeating: 0, count: data.count)
        for i in 0..<data.count {
            var rem = i, si = 0
            for a in 0..<shape.count {
                let idx = rem / strides[a]
                rem %= strides[a]
                si += (idx / blocks[a]) * sstrides[a]
            }
            out[i] = scale[si] * (data[i] - (offset?[si] ?? 0))
        }
        return out
    }
}
