#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GraphIR

/// A tensor file mapped read-only into memory, never copied: the way a constant table (a
/// per-layer embedding table, its scales) is bound to a graph input once for a session's life
/// (`--static-input`), or read row by row by a provider (``GenerationContract``'s `provider`).
///
/// Two file forms (``init(spec:relativeTo:)``):
/// - `FILE.npy`: NumPy `.npy` v1–3, C order; dtype and shape from its header.
/// - `FILE:dtype:d0,d1,…`: raw little-endian C-order data from offset 0, e.g.
///   `table.bin:int8:262144,8960`. dtypes: `int8`, `uint8`, `int16`, `int32`, `fp16`, `fp32`
///   (also `float16`, `float32`), and `int4` (two's-complement nibbles packed two per byte,
///   the first element in the low nibble, as MIL packs sub-byte blobs). The file must hold at
///   least the bytes the shape needs.
///
/// Pages are read from the file only when an element is used (the mapping is `MAP_PRIVATE`,
/// read-only), so resident memory grows by the rows touched.
public final class MappedArray: @unchecked Sendable, CustomStringConvertible {
    public let path: String
    public let dtype: DType
    public let shape: [Int]
    /// Elements (the product of `shape`).
    public let count: Int
    /// The array's bytes inside the mapping (from the `.npy` data offset, or 0).
    public let bytes: UnsafeRawBufferPointer
    private let mapping: UnsafeMutableRawPointer
    private let mappedSize: Int

    static let dtypeNames: [String: DType] = [
        "int8": .int8, "uint8": .uint8, "int16": .int16, "int32": .int32, "int4": .int4,
        "fp16": .fp16, "float16": .fp16, "fp32": .fp32, "float32": .fp32,
    ]

    /// Splits `FILE[:dtype:shape]` into its parts; `dtype` and `shape` are nil for a bare path.
    /// The suffix is recognised only when the last two `:`-separated fields are a dtype name
    /// and comma-separated whole numbers, so paths with colons still work.
    /// - Throws: ``NPYError`` when the suffix names an unknown dtype or a bad shape.
    public static func parse(spec: String) throws -> (path: String, dtype: DType?, shape: [Int]?) {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3 else { return (spec, nil, nil) }
        let shapeText = parts[parts.count - 1], dtypeText = parts[parts.count - 2]
        let looksLikeShape = !shapeText.isEmpty && shapeText.allSatisfy { $0.isNumber || $0 == "," || $0 == " " }
        let path = parts[0..<(parts.count - 2)].joined(separator: ":")
        guard looksLikeShape else {
            // `t.bin:int8:-1,32`, `t.bin:int8:` name a dtype: a bad shape, not a file of that name.
            if dtypeNames[dtypeText.lowercased()] != nil, !FileManager.default.fileExists(atPath: spec) {
                throw NPYError(path, "bad shape '\(shapeText)' in '\(spec)' (comma-separated whole numbers ≥ 0, e.g. 262144,8960)")
            }
            return (spec, nil, nil)
        }
        guard let dt = dtypeNames[dtypeText.lowercased()] else {
            throw NPYError(path, "unknown dtype '\(dtypeText)' in '\(spec)' (FILE:dtype:shape takes \(dtypeNames.keys.sorted().joined(separator: ", ")))")
        }
        let dims = shapeText.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !dims.isEmpty, dims.allSatisfy({ $0 != nil && $0! >= 0 }) else {
            throw NPYError(path, "bad shape '\(shapeText)' in '\(spec)' (comma-separated whole numbers, e.g. 262144,8960)")
        }
        return (path, dt, dims.map { $0! })
    }

    /// Maps `spec` (`FILE.npy` or `FILE:dtype:shape`); a relative path is taken from `dir` when given.
    /// - Throws: ``NPYError`` naming the file: missing or not a regular file, not a `.npy`
    ///   without a `:dtype:shape` suffix, an unsupported dtype, a shape that overflows or that
    ///   the file is too short for, or a failed `mmap`.
    public init(spec: String, relativeTo dir: String? = nil) throws {
        var (path, dt, shape) = try MappedArray.parse(spec: spec)
        if let dir, !path.hasPrefix("/") { path = (dir as NSString).appendingPathComponent(path) }
        self.path = path
        let fd: Int32, size: Int
        do { (fd, size) = try SafeFile.openRegular(path) } catch let f as SafeFile.Failure {
            throw NPYError(path, f.reason)
        }
        defer { close(fd) }
        guard size > 0 else { throw NPYError(path, "the file is empty") }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else {
            throw NPYError(path, "mmap failed (errno \(errno))")
        }
        mapping = p
        mappedSize = size
        let whole = UnsafeRawBufferPointer(start: UnsafeRawPointer(p), count: size)
        var offset = 0
        do {
            if dt == nil || shape == nil {
                guard size >= 6, whole[0] == 0x93, Array(whole[1..<6]) == Array("NUMPY".utf8) else {
                    throw NPYError(path, "not a .npy file; give a raw file as \(path):dtype:shape (e.g. \(path):int8:262144,8960)")
                }
                let h = try NPY.header(whole, name: path)
                (dt, shape, offset) = (h.dtype, h.shape, h.dataOffset)
            }
            guard let dt, let shape else { throw NPYError(path, "no dtype or shape") }
            guard MappedArray.dtypeNames.values.contains(dt) else {
                throw NPYError(path, "dtype \(dt.rawValue) cannot be mapped (int8, uint8, int16, int32, int4, fp16, fp32)")
            }
            guard let n = CheckedSize.elementCount(shape) else { throw NPYError(path, "shape \(shape) overflows") }
            let need = dt.byteCount(elements: n)
            guard need != Int.max, need <= size - offset else {
                throw NPYError(path, "holds \(size - offset) bytes of data, \(dt.rawValue) \(shape) needs \(need)")
            }
            self.dtype = dt
            self.shape = shape
            self.count = n
            bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(p).advanced(by: offset), count: need)
        } catch {
            munmap(p, size)
            throw error
        }
    }

    deinit { munmap(mapping, mappedSize) }

    /// `int8 [512, 32] (ple_table.npy)`.
    public var description: String { "\(dtype.rawValue) \(shape) (\(path))" }

    /// The array as the value of a graph input of type `t`, read in place where the interpreter
    /// can: int8 data as a view (``RuntimeValue/int8Blob``; `gather` reads only the rows it
    /// picks, for an int8, int16 or int32 input — int8 values widen exactly), fp16 data as a view
    /// (``RuntimeValue/halfBlob``) for an fp16 or fp32 input. Other combinations are converted
    /// once, here (e.g. an fp32 scale column: 4 bytes a row), as Core ML converts inputs: an
    /// fp32 array for an fp16 input is rounded to fp16.
    /// - Throws: `InterpreterError.badInput` naming the input when the dtype or shape does not
    ///   fit the declared type (`function`, `input` name the input), or when converting would
    ///   lose values (integers outside the input's range, int4 data).
    public func runtimeValue(for v: Value, function: String) throws -> RuntimeValue {
        func bad(_ r: String) -> InterpreterError { .badInput(function: function, name: v.name, reason: r) }
        guard let tt = v.type.tensorType else { throw bad("the function takes \(v.type), not a tensor") }
        do { try InputCheck.check(dtype: dtype == .int4 ? .int8 : dtype, shape: shape, against: v, function: function) } catch let e as InterpreterError {
            if case let .badInput(_, _, reason) = e { throw bad("\(reason); the file \(path) holds \(dtype.rawValue) \(shape)") }
            throw e
        }
        let aligned = Int(bitPattern: bytes.baseAddress!) % 2 == 0
        switch (dtype, tt.dtype) {
        case (.int8, .int8), (.int8, .int16), (.int8, .int32):
            return .int8Blob(shape, Int8Buffer(mapped: bytes.baseAddress!, count: count, owner: self))
        case (.fp16, .fp16) where aligned, (.fp16, .fp32) where aligned:
            return .halfBlob(shape, HalfBuffer(mapped: bytes.baseAddress!, count: count, owner: self))
        case (.int4, _):
            throw bad("int4 data (\(path)) cannot be a graph input; int4 tables are read by a contract's \"provider\"")
        default:
            do { try MemoryBudget.check(elements: count, stride: 4, "static input '\(v.name)' of shape \(shape)") } catch let e as SizeError {
                throw bad("\(e.reason) (only int8 and fp16 files are read in place)")
            }
            var t = try tensor()
            if tt.dtype.isInteger {
                let (lo, hi) = tt.dtype.isSigned ? (-(1 << (tt.dtype.bitWidth - 1)), (1 << (tt.dtype.bitWidth - 1)) - 1) : (0, (1 << tt.dtype.bitWidth) - 1)
                if case let .int(a) = t.data, let out = a.first(where: { Int($0) < lo || Int($0) > hi }) {
                    throw bad("the file \(path) holds \(out), outside \(tt.dtype.rawValue)'s range")
                }
            }
            t.dtype = tt.dtype
            if tt.dtype == .fp16 && dtype != .fp16 { Rounding.toStorage(&t) }
            return .tensor(t)
        }
    }

    /// A copy of the data as a tensor (floats widened to Float, integers to Int32).
    public func tensor() throws -> Tensor {
        let b = bytes
        switch dtype {
        case .int8: return Tensor(.int8, shape: shape, ints: (0..<count).map { Int32(Int8(bitPattern: b[$0])) })
        case .uint8: return Tensor(.uint8, shape: shape, ints: (0..<count).map { Int32(b[$0]) })
        case .int16: return Tensor(.int16, shape: shape, ints: (0..<count).map { Int32(b.loadUnaligned(fromByteOffset: 2 * $0, as: Int16.self)) })
        case .int32: return Tensor(.int32, shape: shape, ints: (0..<count).map { b.loadUnaligned(fromByteOffset: 4 * $0, as: Int32.self) })
        case .int4: return Tensor(.int4, shape: shape, ints: (0..<count).map { Int32(int4(at: $0)) })
        case .fp16: return Tensor(.fp16, shape: shape, floats: (0..<count).map { Half.toFloat(b.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) })
        case .fp32: return Tensor(.fp32, shape: shape, floats: (0..<count).map { b.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) })
        default: throw NPYError(path, "dtype \(dtype.rawValue) cannot be read")
        }
    }

    /// Element `i` of an int4 array (low nibble first, sign-extended).
    @inline(__always)
    public func int4(at i: Int) -> Int8 {
        let byte = bytes[i >> 1]
        let nib = (i & 1) == 0 ? byte & 0xF : byte >> 4
        return Int8(bitPattern: nib << 4) >> 4
    }

    /// Element `i` as Float, for any mapped dtype.
    @inline(__always)
    public func float(at i: Int) -> Float {
        switch dtype {
        case .int8: return Float(Int8(bitPattern: bytes[i]))
        case .uint8: return Float(bytes[i])
        case .int16: return Float(bytes.loadUnaligned(fromByteOffset: 2 * i, as: Int16.self))
        case .int32: return Float(bytes.loadUnaligned(fromByteOffset: 4 * i, as: Int32.self))
        case .int4: return Float(int4(at: i))
        case .fp16: return Half.toFloat(bytes.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self))
        default: return bytes.loadUnaligned(fromByteOffset: 4 * i, as: Float.self)
        }
    }
}
