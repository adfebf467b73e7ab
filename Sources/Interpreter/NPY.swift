import CZlib
import Foundation
import GraphIR

/// Errors reading or writing `.npy` / `.npz` files.
public struct NPYError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public init(_ path: String, _ reason: String) { self.path = path; self.reason = reason }
    public var description: String { "\(path): \(reason)" }
}

/// NumPy `.npy` format (version 1.0–3.0): magic `\x93NUMPY`, header dict with `descr`,
/// `fortran_order`, `shape`, then raw little-endian C-order data.
///
/// Supported dtypes: `<f2` (fp16), `<f4` (fp32), `<f8` (fp64 → held as Float), `|i1`, `<i2`,
/// `<i4`, `<i8`, `|u1`, `<u2`, `<u4`, `|b1` (bool), `<U{n}` (strings, e.g. a classifier's label).
public enum NPY {
    static let descrToDType: [String: DType] = [
        "<f2": .fp16, "<f4": .fp32, "<f8": .fp64, "|i1": .int8, "<i2": .int16, "<i4": .int32, "<i8": .int64,
        "|u1": .uint8, "<u2": .uint16, "<u4": .uint32, "|b1": .bool, "<u8": .uint64,
    ]

    /// Decodes `.npy` bytes. `name` is used in errors. With `target` (the dtype of the model
    /// input the array feeds), values are converted as Core ML converts them: float data for an
    /// fp16 input is rounded to fp16 from its own precision (fp64 directly, not through fp32),
    /// and a conversion that changes values — integers beyond int32, finite floats that
    /// overflow the target — is an ``NPYError`` unless `allowLossy` (then `warn` is told).
    /// - Throws: ``NPYError`` for a bad magic, header, dtype or shape, data shorter than the
    ///   shape needs, a shape whose size overflows or exceeds ``MemoryBudget``, or a lossy
    ///   conversion.
    public static func decode(_ data: Data, name: String, target: DType? = nil, allowLossy: Bool = false,
                              warn: (String) -> Void = { _ in }) throws -> Tensor {
        try data.withUnsafeBytes { raw in
            try decode(raw, name: name, target: target, allowLossy: allowLossy, warn: warn)
        }
    }

    /// The parsed header of `.npy` bytes: dtype, shape, element count, the offset of the data
    /// and its `descr`; checks that the data holds what the shape needs.
    /// - Throws: ``NPYError`` for a bad magic, header, dtype or shape, or short data.
    public static func header(_ bytes: UnsafeRawBufferPointer, name: String) throws -> (dtype: DType, shape: [Int], count: Int, dataOffset: Int, descr: String) {
        guard bytes.count >= 10, bytes[0] == 0x93, Array(bytes[1..<6]) == Array("NUMPY".utf8) else {
            throw NPYError(name, "not a .npy file (bad magic)")
        }
        let major = bytes[6]
        let headerLen: Int, start: Int
        if major == 1 {
            headerLen = Int(bytes[8]) | Int(bytes[9]) << 8
            start = 10
        } else {
            guard bytes.count >= 12 else { throw NPYError(name, "truncated header") }
            headerLen = Int(bytes[8]) | Int(bytes[9]) << 8 | Int(bytes[10]) << 16 | Int(bytes[11]) << 24
            start = 12
        }
        guard headerLen <= bytes.count - start, let header = String(bytes: bytes[start..<(start + headerLen)], encoding: .utf8) else {
            throw NPYError(name, "truncated header")
        }
        let descr = field(header, "descr")
        let chars = descr.flatMap(unicodeWidth)
        guard let descr, let dtype = chars != nil ? .string : descrToDType[descr.replacingOccurrences(of: "=", with: "<")] else {
            throw NPYError(name, "unsupported dtype in header \(header.trimmingCharacters(in: .whitespacesAndNewlines)) (expected one of \(descrToDType.keys.sorted().joined(separator: " ")) <U…)")
        }
        if field(header, "fortran_order") == "True" { throw NPYError(name, "Fortran-order arrays are not supported") }
        guard let shapeText = field(header, "shape") else { throw NPYError(name, "no shape in header") }
        let shape = try shapeText.trimmingCharacters(in: CharacterSet(charactersIn: "() "))
            .split(separator: ",").map { s -> Int in
                guard let v = Int(s.trimmingCharacters(in: .whitespaces)), v >= 0 else { throw NPYError(name, "bad shape \(shapeText) (expected non-negative integers)") }
                return v
            }
        let width = dtype == .bool ? 1 : chars.map { 4 * $0 } ?? dtype.bitWidth / 8
        guard let n = CheckedSize.elementCount(shape), let need = CheckedSize.bytes(elements: n, stride: width) else {
            throw NPYError(name, "shape \(shape) overflows")
        }
        let body = start + headerLen
        guard need <= bytes.count - body else {
            throw NPYError(name, "data holds \(bytes.count - body) bytes, shape \(shape) of \(descr) needs \(need)")
        }
        return (dtype, shape, n, body, descr)
    }

    /// The characters per element of NumPy's fixed-width unicode `<U{n}` (UTF-32LE), 1...65536,
    /// or nil for another descr.
    static func unicodeWidth(_ descr: String) -> Int? {
        let d = descr.replacingOccurrences(of: "=", with: "<")
        guard d.hasPrefix("<U"), let n = Int(d.dropFirst(2)), n >= 1, n <= 65536 else { return nil }
        return n
    }

    /// `<U{n}` elements: code points up to the first 0; an invalid code point is an error.
    static func strings(_ p: UnsafeRawBufferPointer, count n: Int, chars: Int, name: String) throws -> [String] {
        try (0..<n).map { i in
            var s = String.UnicodeScalarView()
            for k in 0..<chars {
                let u = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: 4 * (i * chars + k), as: UInt32.self))
                if u == 0 { break }
                guard let scalar = Unicode.Scalar(u) else { throw NPYError(name, "element \(i) holds the invalid code point \(u)") }
                s.append(scalar)
            }
            return String(s)
        }
    }

    static func decode(_ bytes: UnsafeRawBufferPointer, name: String, target: DType?, allowLossy: Bool,
                       warn: (String) -> Void) throws -> Tensor {
        let h = try header(bytes, name: name)
        let (dtype, shape, n, body, descr) = (h.dtype, h.shape, h.count, h.dataOffset, h.descr)
        do { try MemoryBudget.check(elements: n, stride: 4, "array of shape \(shape)") } catch let e as SizeError {
            throw NPYError(name, e.reason)
        }
        let p = UnsafeRawBufferPointer(rebasing: bytes[body...])
        func lossy(_ what: String) throws {
            let text = target.map { "\(what) for a \($0.rawValue) input" } ?? what
            guard allowLossy else { throw NPYError(name, "\(text); convert the array, or pass --allow-lossy-inputs to convert anyway") }
            warn("\(name): \(text) (converted: --allow-lossy-inputs)")
        }
        func floats(_ load: (Int) -> Double) throws -> Tensor {
            // fp16 inputs: each value rounded once, from its own precision, as Core ML does.
            if target == .fp16 {
                var overflow = 0
                let v: [Float] = (0..<n).map { i in
                    let x = load(i)
                    let h = Float(Float16(x))
                    if x.isFinite && !h.isFinite { overflow += 1 }
                    return h
                }
                if overflow > 0 { try lossy("\(overflow) \(descr) value(s) beyond fp16's ±65504 (would become ±inf)") }
                return Tensor(.fp16, shape: shape, floats: v)
            }
            var overflow = 0
            let v: [Float] = (0..<n).map { i in
                let x = load(i)
                let f = Float(x)
                if x.isFinite && !f.isFinite { overflow += 1 }
                return f
            }
            if overflow > 0 && target != nil { try lossy("\(overflow) \(descr) value(s) beyond fp32's range (would become ±inf)") }
            return Tensor(dtype == .fp64 ? .fp32 : dtype, shape: shape, floats: v)
        }
        func wide(_ load: (Int) -> Int64) throws -> Tensor {
            var out = 0
            let v: [Int32] = (0..<n).map { i in
                let x = load(i)
                if x < Int64(Int32.min) || x > Int64(Int32.max) { out += 1 }
                return Int32(clamping: x)
            }
            if out > 0 { try lossy("\(out) \(descr) value(s) outside int32's range (Core ML inputs are int32)") }
            return Tensor(.int32, shape: shape, ints: v)
        }
        switch dtype {
        case .string:
            return Tensor(dtype: .string, shape: shape, data: .string(try strings(p, count: n, chars: unicodeWidth(descr) ?? 1, name: name)))
        case .fp16:
            if target == nil || target == .fp16 || target?.isFloat != true {
                return Tensor(.fp16, shape: shape, floats: (0..<n).map { Half.toFloat(p.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) })
            }
            return try floats { Double(Half.toFloat(p.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self))) }
        case .fp32: return try floats { Double(p.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self)) }
        case .fp64: return try floats { p.loadUnaligned(fromByteOffset: 8 * $0, as: Double.self) }
        case .int8: return Tensor(.int8, shape: shape, ints: (0..<n).map { Int32(Int8(bitPattern: p[$0])) })
        case .uint8: return Tensor(.uint8, shape: shape, ints: (0..<n).map { Int32(p[$0]) })
        case .int16: return Tensor(.int16, shape: shape, ints: (0..<n).map { Int32(p.loadUnaligned(fromByteOffset: 2 * $0, as: Int16.self)) })
        case .uint16: return Tensor(.uint16, shape: shape, ints: (0..<n).map { Int32(p.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) })
        case .int32: return Tensor(.int32, shape: shape, ints: (0..<n).map { p.loadUnaligned(fromByteOffset: 4 * $0, as: Int32.self) })
        case .uint32: return try wide { Int64(p.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self)) }
        case .int64: return try wide { p.loadUnaligned(fromByteOffset: 8 * $0, as: Int64.self) }
        case .uint64: return try wide { Int64(clamping: p.loadUnaligned(fromByteOffset: 8 * $0, as: UInt64.self)) }
        default: return Tensor(shape: shape, bools: (0..<n).map { p[$0] != 0 })
        }
    }

    /// The dtype of a `.npy` file's data without decoding it (nil when the header is unreadable).
    public static func storedDType(_ data: Data) -> DType? {
        guard data.count >= 10 else { return nil }
        let headerLen = data[data.startIndex + 6] == 1 ? Int(data[data.startIndex + 8]) | Int(data[data.startIndex + 9]) << 8 : 0
        let start = data[data.startIndex + 6] == 1 ? 10 : 12
        let end = min(data.count, start + (headerLen > 0 ? headerLen : 256))
        guard let header = String(bytes: data[(data.startIndex + min(start, end))..<(data.startIndex + end)], encoding: .utf8),
              let descr = field(header, "descr") else { return nil }
        return descrToDType[descr.replacingOccurrences(of: "=", with: "<")]
    }

    static func field(_ header: String, _ key: String) -> String? {
        guard let r = header.range(of: "'\(key)'") else { return nil }
        var rest = header[r.upperBound...].drop { $0 == " " || $0 == ":" }
        if rest.first == "'" {
            rest = rest.dropFirst()
            return rest.firstIndex(of: "'").map { String(rest[..<$0]) }
        }
        if rest.first == "(" { return rest.firstIndex(of: ")").map { String(rest[...$0]) } }
        let end = rest.firstIndex { $0 == "," || $0 == "}" } ?? rest.endIndex
        return String(rest[..<end]).trimmingCharacters(in: .whitespaces)
    }

    /// Reads a `.npy` file.
    /// The file must be a regular file (a FIFO or device is refused before it is opened) no
    /// larger than the memory budget. `target`, `allowLossy`, `warn`: as in ``decode(_:name:target:allowLossy:warn:)``.
    public static func read(path: String, target: DType? = nil, allowLossy: Bool = false, warn: (String) -> Void = { _ in }) throws -> Tensor {
        try decode(try readFile(path), name: path, target: target, allowLossy: allowLossy, warn: warn)
    }

    /// The bytes of a regular file, at most the memory budget.
    static func readFile(_ path: String) throws -> Data {
        do { return try SafeFile.read(path) } catch let f as SafeFile.Failure {
            throw NPYError(path, f.reason)
        }
    }

    /// Encodes a tensor as `.npy` (version 1.0) in its dtype: fp16 as `<f2`, fp32 `<f4`,
    /// other floats as `<f4`; int8 `|i1`, uint8 `|u1`, int16 `<i2`, uint16 `<u2`, other ints `<i4`; bool `|b1`;
    /// strings as NumPy's fixed-width unicode `<U{n}` (n = the longest element in code points).
    public static func encode(_ t: Tensor) throws -> Data {
        let descr: String
        var body = Data()
        switch t.data {
        case let .float(a):
            if t.dtype == .fp16 {
                descr = "<f2"
                body.reserveCapacity(a.count * 2)
                for v in a { var h = Half.fromFloat(v).littleEndian; withUnsafeBytes(of: &h) { body.append(contentsOf: $0) } }
            } else {
                descr = "<f4"
                a.withUnsafeBytes { body.append(contentsOf: $0) }
            }
        case let .int(a):
            switch t.dtype {
            case .int8: descr = "|i1"; body.append(contentsOf: a.map { UInt8(bitPattern: Int8(clamping: $0)) })
            case .uint8: descr = "|u1"; body.append(contentsOf: a.map { UInt8(clamping: $0) })
            case .int16: descr = "<i2"; for v in a { var x = Int16(clamping: v); withUnsafeBytes(of: &x) { body.append(contentsOf: $0) } }
            case .uint16: descr = "<u2"; for v in a { var x = UInt16(clamping: v); withUnsafeBytes(of: &x) { body.append(contentsOf: $0) } }
            default: descr = "<i4"; a.withUnsafeBytes { body.append(contentsOf: $0) }
            }
        case let .bool(a):
            descr = "|b1"
            body.append(contentsOf: a.map { $0 ? 1 : 0 })
        case let .string(a):
            // NumPy's fixed-width unicode `<U{n}`: n UTF-32LE code units per element, zero-padded.
            let scalars = a.map { Array($0.unicodeScalars) }
            let width = max(1, scalars.map(\.count).max() ?? 1)
            descr = "<U\(width)"
            body.reserveCapacity(a.count * width * 4)
            for s in scalars {
                for i in 0..<width {
                    var u = (i < s.count ? s[i].value : 0).littleEndian
                    withUnsafeBytes(of: &u) { body.append(contentsOf: $0) }
                }
            }
        }
        let shapeText = t.shape.isEmpty ? "()" : t.shape.count == 1 ? "(\(t.shape[0]),)" : "(" + t.shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '\(descr)', 'fortran_order': False, 'shape': \(shapeText), }"
        let total = 10 + header.utf8.count + 1
        header += String(repeating: " ", count: (64 - total % 64) % 64) + "\n"
        var out = Data([0x93] + Array("NUMPY".utf8) + [1, 0])
        let hl = UInt16(header.utf8.count)
        out.append(UInt8(hl & 0xFF))
        out.append(UInt8(hl >> 8))
        out.append(contentsOf: Array(header.utf8))
        out.append(body)
        return out
    }

    /// Writes a `.npy` file atomically (temporary file, then rename).
    public static func write(_ t: Tensor, path: String) throws {
        let data = try encode(t)
        do { try data.write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw NPYError(path, "cannot write: \(FileErrorText.text(error))")
        }
    }
}

/// NumPy `.npz` archives (a ZIP of `.npy` members), as written by `np.savez` (stored) and
/// `np.savez_compressed` (deflate, inflated with zlib).
///
/// Parsed defensively: every offset and length read from the archive (end-of-central-directory,
/// zip64 records and extras, central and local headers) is checked against the file before it
/// is used; a member's uncompressed size is capped by what its compressed bytes can hold
/// (deflate expands at most 1032:1) and by ``MemoryBudget``, and inflation streams into a
/// buffer of that size, stopping with an error at the limit (a deflate bomb). Errors name the
/// archive and the member.
public enum NPZ {
    /// Reads every array of an `.npz` file, keyed by member name without `.npy`.
    /// `targets` (member key → the model input's dtype), `allowLossy`, `warn`: as in
    /// ``NPY/decode(_:name:target:allowLossy:warn:)``.
    public static func read(path: String, targets: [String: DType] = [:], allowLossy: Bool = false,
                            warn: (String) -> Void = { _ in }) throws -> [String: Tensor] {
        try decode(try NPY.readFile(path), name: path, targets: targets, allowLossy: allowLossy, warn: warn)
    }

    /// Reads the arrays of `.npz` bytes; `name` is used in errors.
    public static func decode(_ data: Data, name path: String, targets: [String: DType] = [:], allowLossy: Bool = false,
                              warn: (String) -> Void = { _ in }) throws -> [String: Tensor] {
        let b = [UInt8](data)
        let size = b.count
        func u16(_ o: Int) throws -> Int {
            guard o >= 0, o <= size - 2 else { throw NPYError(path, "zip structure at offset \(o) lies outside the \(size)-byte file") }
            return Int(b[o]) | Int(b[o + 1]) << 8
        }
        func u32(_ o: Int) throws -> Int { try u16(o) | (try u16(o + 2)) << 16 }
        func u64(_ o: Int) throws -> UInt64 { UInt64(try u32(o)) | UInt64(try u32(o + 4)) << 32 }
        func offset(_ v: UInt64, _ what: String) throws -> Int {
            guard v <= UInt64(size) else { throw NPYError(path, "\(what) \(v) lies outside the \(size)-byte file") }
            return Int(v)
        }
        // End of central directory: scan back for PK\x05\x06.
        guard size >= 22 else { throw NPYError(path, "not a zip archive (\(size) bytes, shorter than an end-of-central-directory record)") }
        var eocd = -1
        var i = size - 22
        while i >= max(0, size - 22 - 65_535) {
            if b[i] == 0x50, b[i + 1] == 0x4B, b[i + 2] == 5, b[i + 3] == 6 { eocd = i; break }
            i -= 1
        }
        guard eocd >= 0 else { throw NPYError(path, "not a zip archive (no end-of-central-directory record)") }
        var count = try u16(eocd + 10)
        var cd = try u32(eocd + 16)
        if count == 0xFFFF || cd == 0xFFFF_FFFF {
            // ZIP64 end of central directory locator precedes the EOCD.
            let loc = eocd - 20
            guard loc >= 0, try u32(loc) == 0x0706_4B50 else { throw NPYError(path, "zip64 archive without an end-of-central-directory locator") }
            let rec = try offset(try u64(loc + 8), "zip64 end-of-central-directory offset")
            guard rec <= size - 56, try u32(rec) == 0x0606_4B50 else { throw NPYError(path, "bad zip64 end-of-central-directory record") }
            let n64 = try u64(rec + 32)
            guard n64 <= UInt64(size / 46) else { throw NPYError(path, "zip64 record declares \(n64) members, more than the file can hold") }
            count = Int(n64)
            cd = try offset(try u64(rec + 48), "central directory offset")
        }
        guard count <= size / 46 else { throw NPYError(path, "declares \(count) members, more than the file can hold") }
        var out: [String: Tensor] = [:]
        var p = cd
        for index in 0..<count {
            guard p >= 0, p <= size - 46, try u32(p) == 0x0201_4B50 else {
                throw NPYError(path, "corrupt central directory (entry \(index) at offset \(p))")
            }
            let method = try u16(p + 10)
            var csize = UInt64(try u32(p + 20))
            var usize = UInt64(try u32(p + 24))
            let nameLen = try u16(p + 28), extraLen = try u16(p + 30), commentLen = try u16(p + 32)
            var local = UInt64(try u32(p + 42))
            guard nameLen <= size - (p + 46), let memberName = String(bytes: b[(p + 46)..<(p + 46 + nameLen)], encoding: .utf8) else {
                throw NPYError(path, "corrupt member name (entry \(index))")
            }
            let member = "\(path): member '\(memberName)'"
            // zip64 extra field (id 1): the 8-byte sizes / offset whose 4-byte fields are 0xFFFFFFFF,
            // in that order, each only when present in the extra.
            var e = p + 46 + nameLen
            guard extraLen <= size - e else { throw NPYError(member, "extra field runs past the end of the file") }
            let eEnd = e + extraLen
            while e + 4 <= eEnd {
                let id = try u16(e), len = try u16(e + 2)
                guard len <= eEnd - (e + 4) else { throw NPYError(member, "extra field \(id) of \(len) bytes runs past its \(extraLen)-byte extra area") }
                if id == 1 {
                    var q = e + 4
                    let qEnd = q + len
                    func next(_ what: String) throws -> UInt64 {
                        guard q + 8 <= qEnd else { throw NPYError(member, "zip64 extra field is \(len) bytes, too short for the \(what)") }
                        defer { q += 8 }
                        return try u64(q)
                    }
                    if usize == 0xFFFF_FFFF { usize = try next("uncompressed size") }
                    if csize == 0xFFFF_FFFF { csize = try next("compressed size") }
                    if local == 0xFFFF_FFFF { local = try next("local header offset") }
                }
                e += 4 + len
            }
            guard method == 0 || method == 8 else {
                throw NPYError(member, "uses zip compression method \(method); only stored (0) and deflate (8) are supported")
            }
            let lh = try offset(local, "local header offset")
            guard lh <= size - 30, try u32(lh) == 0x0403_4B50 else { throw NPYError(member, "corrupt local header at offset \(lh)") }
            let start = lh + 30 + (try u16(lh + 26)) + (try u16(lh + 28))
            guard start <= size, csize <= UInt64(size - start) else {
                throw NPYError(member, "is truncated (\(csize) compressed bytes declared from offset \(start) of a \(size)-byte file)")
            }
            let key = memberName.hasSuffix(".npy") ? String(memberName.dropLast(4)) : memberName
            let compressed = Data(b[start..<(start + Int(csize))])
            let bytes: Data
            if method == 8 {
                bytes = try inflate(compressed, expected: usize, name: member)
            } else {
                guard usize == csize else { throw NPYError(member, "stored member declares \(usize) bytes but holds \(csize)") }
                bytes = compressed
            }
            out[key] = try NPY.decode(bytes, name: "\(path):\(memberName)", target: targets[key], allowLossy: allowLossy, warn: warn)
            p += 46 + nameLen + extraLen + commentLen
        }
        return out
    }

    /// Deflate's largest expansion ratio (zlib's technical note: 1032:1).
    static let maxDeflateRatio: UInt64 = 1032

    /// Raw deflate → exactly `expected` bytes, inflated in one bounded buffer.
    /// - Throws: ``NPYError`` when `expected` is more than `data` can inflate to or more than
    ///   the memory budget, or when the stream is corrupt, ends early or holds more.
    static func inflate(_ data: Data, expected: UInt64, name: String) throws -> Data {
        let (cap, o) = UInt64(data.count).multipliedReportingOverflow(by: maxDeflateRatio)
        guard o || expected <= cap + 64 else {
            throw NPYError(name, "declares \(expected) uncompressed bytes, more than its \(data.count) compressed bytes can hold")
        }
        do { try MemoryBudget.check(bytes: expected > UInt64(Int.max) ? nil : Int(expected), "uncompressed member") } catch let e as SizeError {
            throw NPYError(name, e.reason)
        }
        let n = Int(expected)
        var out = Data(count: n + 1)   // one spare byte: a stream longer than declared is detected
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw NPYError(name, "zlib init failed")
        }
        defer { inflateEnd(&stream) }
        var input = [UInt8](data)
        guard input.count <= Int(UInt32.max) else { throw NPYError(name, "compressed member of \(input.count) bytes is too large") }
        var status: Int32 = Z_OK
        input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBytes { o in
                guard let base = o.baseAddress?.assumingMemoryBound(to: Bytef.self) else { return }
                stream.next_in = inp.baseAddress
                stream.avail_in = uInt(inp.count)
                stream.next_out = base
                // avail_out is 32-bit: feed the bounded buffer in chunks; never past its end.
                repeat {
                    let produced = Int(stream.total_out)
                    stream.avail_out = uInt(min(o.count - produced, Int(UInt32.max)))
                    status = CZlib.inflate(&stream, Z_NO_FLUSH)
                } while status == Z_OK && Int(stream.total_out) < o.count && stream.avail_in > 0
            }
        }
        guard status == Z_STREAM_END else {
            if stream.total_out > UInt(n) { throw NPYError(name, "inflates to more than the \(n) bytes it declares") }
            throw NPYError(name, "corrupt deflate data (zlib status \(status) after \(stream.total_out) bytes)")
        }
        guard Int(stream.total_out) == n else {
            throw NPYError(name, "inflates to \(stream.total_out) bytes, declares \(n)")
        }
        out.removeLast()
        return out
    }
}
