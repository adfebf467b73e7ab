import GraphIR

/// Turns stored constants (immediate or blob) into runtime values.
public enum ConstConversion {
    /// - Throws: `KernelError` when the constant's storage does not match its type.
    public static func runtimeValue(_ c: ConstValue) throws -> RuntimeValue {
        switch c.payload {
        case let .blob(ref) where c.type.tensorType?.dtype == .int8:
            // Keep int8 weights mapped: constexpr kernels read them in place.
            guard let t = c.type.tensorType, let shape = t.fixedShape, let file = ref.file else { return .tensor(try tensor(c)) }
            let raw = try ref.bytes()
            let n = shape.reduce(1, *)
            guard raw.count >= n, let base = raw.baseAddress else { throw KernelError("int8 blob holds \(raw.count) bytes, \(t) needs \(n)") }
            return .int8Blob(shape, Int8Buffer(mapped: base, count: n, owner: file))
        case let .blob(ref) where c.type.tensorType?.dtype == .int4:
            // int4 weights stay packed as stored (two a byte): the int4 linear reads them in place.
            guard let t = c.type.tensorType, let shape = t.fixedShape, let file = ref.file else { return .tensor(try tensor(c)) }
            let raw = try ref.bytes()
            let n = shape.reduce(1, *)
            guard raw.count >= (n + 1) / 2, let base = raw.baseAddress else { throw KernelError("int4 blob holds \(raw.count) bytes, \(t) needs \((n + 1) / 2)") }
            return .int8Blob(shape, Int8Buffer(mapped: base, count: n, owner: file, packedInt4: true))
        case .tensor, .blob:
            return .tensor(try tensor(c))
        case let .tuple(vs):
            return .tuple(try vs.map(runtimeValue))
        case let .list(vs):
            return .list(try vs.map(runtimeValue))
        case .dict:
            throw KernelError("dict constants are not supported by the interpreter")
        }
    }

    /// An fp16 blob constant as a view of the mapped weight file (``RuntimeValue/halfBlob``), or
    /// nil when the constant is not an fp16 blob of a mapped file.
    public static func halfView(_ c: ConstValue) throws -> RuntimeValue? {
        guard case let .blob(ref) = c.payload, let t = c.type.tensorType, t.dtype == .fp16,
              let shape = t.fixedShape, let file = ref.file else { return nil }
        let raw = try ref.bytes()
        let n = shape.reduce(1, *)
        guard raw.count >= 2 * n, let base = raw.baseAddress, Int(bitPattern: base) % 2 == 0 else { return nil }
        return .halfBlob(shape, HalfBuffer(mapped: base, count: n, owner: file))
    }

    /// A tensor constant as a runtime tensor (floats widened to Float, integers to Int32).
    public static func tensor(_ c: ConstValue) throws -> Tensor {
        guard let t = c.type.tensorType, let shape = t.fixedShape else {
            throw KernelError("constant of type \(c.type) has no static tensor shape")
        }
        let n = shape.reduce(1, *)
        if t.dtype == .string {
            guard case let .tensor(.strings(s)) = c.payload, s.count == n else { throw KernelError("string constant does not match its type \(t)") }
            return Tensor(dtype: .string, shape: shape, data: .string(s))
        }
        // Fast paths for large blobs.
        if case let .blob(ref) = c.payload {
            let raw = try ref.bytes()
            switch t.dtype {
            case .fp16:
                var out = [Float](repeating: 0, count: n)
                out.withUnsafeMutableBufferPointer { o in
                    for i in 0..<n { o[i] = Half.toFloat(raw.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self)) }
                }
                return Tensor(.fp16, shape: shape, floats: out)
            case .fp32:
                var out = [Float](repeating: 0, count: n)
                out.withUnsafeMutableBytes { o in o.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[0..<(4 * n)])) }
                return Tensor(.fp32, shape: shape, floats: out)
            case .int8:
                return Tensor(.int8, shape: shape, ints: (0..<n).map { Int32(Int8(bitPattern: raw[$0])) })
            case .uint8:
                return Tensor(.uint8, shape: shape, ints: (0..<n).map { Int32(raw[$0]) })
            default:
                break
            }
        }
        guard let d = c.doubles(), d.count == n else {
            throw KernelError("constant of type \(t) could not be decoded")
        }
        if t.dtype.isFloat { return Tensor(t.dtype, shape: shape, floats: d.map { Float($0) }) }
        if t.dtype == .bool { return Tensor(shape: shape, bools: d.map { $0 != 0 }) }
        return Tensor(t.dtype, shape: shape, ints: d.map { Int32(clamping: Int64($0)) })
    }
}
