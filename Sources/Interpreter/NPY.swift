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
/// `<i4`, `<i8`, `|u1`, `<u2`, `<u4`, `|b1` (bool).
public enum NPY {
    static let descrToDType: [String: DType] = [
        "<f2": .fp16, "<f4": .fp32, "<f8": .fp64, "|i1": .int8, "<i2": .int16, "<i4": .int32, "<i8": .int64,
        "|u1": .uint8, "<u2": .uint16, "<u4": .uint32, "|b1": .bool, "<u8": .uint64,
    ]

    /// Decodes `.npy` bytes. `name` is used in errors.
    public static func decode(_ data: Data, name: String) throws -> Tensor {
        let bytes = [UInt8](data)
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
        guard start + headerLen <= bytes.count, let header = String(bytes: bytes[start..<(start + headerLen)], encoding: .utf8) else {
            throw NPYError(name, "truncated header")
        }
        guard let descr = field(header, "descr"), let dtype = descrToDType[descr.replacingOccurrences(of: "=", with: "<")] else {
            throw NPYError(name, "unsupported dtype in header \(header.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        if field(header, "fortran_order") == "True" { throw NPYError(name, "Fortran-order arrays are not supported") }
        guard let shapeText = field(header, "shape") else { throw NPYError(name, "no shape in header") }
        let shape = try shapeText.trimmingCharacters(in: CharacterSet(charactersIn: "() "))
            .split(separator: ",").map { s -> Int in
                guard let v = Int(s.trimmingCharacters(in: .whitespaces)), v >= 0 else { throw NPYError(name, "bad shape \(shapeText)") }
                return v
            }
        var n = 1
        for d in shape {
            let (m, o) = n.multipliedReportingOverflow(by: d)
            guard !o else { throw NPYError(name, "shape \(shape) overflows") }
            n = m
        }
        let width = dtype == .bool ? 1 : dtype.bitWidth / 8
        let body = start + headerLen
        guard n <= (bytes.count - body) / max(width, 1) else {
            throw NPYError(name, "data holds \(bytes.count - body) bytes, shape \(shape) of \(descr) needs \(n * width)")
        }
        return bytes.withUnsafeBytes { raw -> Tensor in
            let p = UnsafeRawBufferPointer(rebasing: raw[body...])
            switch dtype {
            case .fp16: return Tensor(.fp16, shape: shape, floats: (0..<n).map { Half.toFloat(p.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) })
            case .fp32: return Tensor(.fp32, shape: shape, floats: (0..<n).map { p.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) })
            case .fp64: return Tensor(.fp32, shape: shape, floats: (0..<n).map { Float(p.loadUnaligned(fromByteOffset: 8 * $0, as: Double.self)) })
            case .int8: return Tensor(.int8, shape: shape, ints: (0..<n).map { Int32(Int8(bitPattern: p[$0])) })
            case .uint8: return Tensor(.uint8, shape: shape, ints: (0..<n).map { Int32(p[$0]) })
            case .int16: return Tensor(.int16, shape: shape, ints: (0..<n).map { Int32(p.loadUnaligned(fromByteOffset: 2 * $0, as: Int16.self)) })
            case .uint16: return Tensor(.uint16, shape: shape, ints: (0..<n).map { Int32(p.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) })
            case .int32: return Tensor(.int32, shape: shape, ints: (0..<n).map { p.loadUnaligned(fromByteOffset: 4 * $0, as: Int32.self) })
            case .uint32: return Tensor(.int32, shape: shape, ints: (0..<n).map { Int32(truncatingIfNeeded: p.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self)) })
            case .int64: return Tensor(.int32, shape: shape, ints: (0..<n).map { Int32(clamping: p.loadUnaligned(fromByteOffset: 8 * $0, as: Int64.self)) })
            case .uint64: return Tensor(.int32, shape: shape, ints: (0..<n).map { Int32(clamping: p.loadUnaligned(fromByteOffset: 8 * $0, as: UInt64.self)) })
            default: return Tensor(shape: shape, bools: (0..<n).map { p[$0] != 0 })
            }
        }
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
    public static func read(path: String) throws -> Tensor {
        guard let d = FileManager.default.contents(atPath: path) else { throw NPYError(path, "cannot read file") }
        return try decode(d, name: path)
    }

    /// Encodes a tensor as `.npy` (version 1.0) in its dtype: fp16 as `<f2`, fp32 `<f4`,
    /// other floats as `<f4`; int8 `|i1`, uint8 `|u1`, int16 `<i2`, uint16 `<u2`, other ints `<i4`; bool `|b1`.
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
        case .string:
            throw NPYError("<tensor>", "string tensors cannot be written as .npy")
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
            throw NPYError(path, "cannot write: \(error.localizedDescription)")
        }
    }
}

/// NumPy `.npz` archives (a ZIP of `.npy` members), as written by `np.savez` (stored) and
/// `np.savez_compressed` (deflate, inflated with zlib).
public enum NPZ {
    /// Reads every array of an `.npz` file, keyed by member name without `.npy`.
    public static func read(path: String) throws -> [String: Tensor] {
        guard let data = FileManager.default.contents(atPath: path) else { throw NPYError(path, "cannot read file") }
        let b = [UInt8](data)
        func u16(_ o: Int) -> Int { Int(b[o]) | Int(b[o + 1]) << 8 }
        func u32(_ o: Int) -> Int { u16(o) | u16(o + 2) << 16 }
        // End of central directory: scan back for PK\x05\x06.
        guard b.count >= 22 else { throw NPYError(path, "not a zip archive") }
        var eocd = -1
        var i = b.count - 22
        while i >= max(0, b.count - 22 - 65_536) {
            if b[i] == 0x50, b[i + 1] == 0x4B, b[i + 2] == 5, b[i + 3] == 6 { eocd = i; break }
            i -= 1
        }
        guard eocd >= 0 else { throw NPYError(path, "not a zip archive (no end-of-central-directory record)") }
        var count = u16(eocd + 10)
        var cd = u32(eocd + 16)
        var zip64 = false
        if count == 0xFFFF || cd == 0xFFFF_FFFF { zip64 = true }
        if zip64 {
            // ZIP64 end of central directory locator precedes the EOCD.
            let loc = eocd - 20
            guard loc >= 0, u32(loc) == 0x0706_4B50 else { throw NPYError(path, "zip64 archive without locator") }
            let rec = u32(loc + 8)
            guard rec + 56 <= b.count, u32(rec) == 0x0606_4B50 else { throw NPYError(path, "bad zip64 record") }
            count = u32(rec + 32)
            cd = u32(rec + 48)
        }
        var out: [String: Tensor] = [:]
        var p = cd
        for _ in 0..<count {
            guard p + 46 <= b.count, u32(p) == 0x0201_4B50 else { throw NPYError(path, "corrupt central directory") }
            let method = u16(p + 10)
            var csize = u32(p + 20)
            let nameLen = u16(p + 28), extraLen = u16(p + 30), commentLen = u16(p + 32)
            var local = u32(p + 42)
            guard p + 46 + nameLen <= b.count, let name = String(bytes: b[(p + 46)..<(p + 46 + nameLen)], encoding: .utf8) else {
                throw NPYError(path, "corrupt member name")
            }
            // zip64 extra field: sizes / offset.
            var e = p + 46 + nameLen
            let eEnd = e + extraLen
            while e + 4 <= eEnd && eEnd <= b.count {
                let id = u16(e), len = u16(e + 2)
                if id == 1 {
                    var q = e + 4
                    if u32(p + 24) == 0xFFFF_FFFF { q += 8 }
                    if u32(p + 20) == 0xFFFF_FFFF { csize = u32(q); q += 8 }
                    if u32(p + 42) == 0xFFFF_FFFF { local = u32(q) }
                }
                e += 4 + len
            }
            guard method == 0 || method == 8 else {
                throw NPYError(path, "member '\(name)' uses zip compression method \(method); only stored and deflate are supported")
            }
            let usize = u32(p + 24)
            guard local + 30 <= b.count, u32(local) == 0x0403_4B50 else { throw NPYError(path, "corrupt local header for '\(name)'") }
            let start = local + 30 + u16(local + 26) + u16(local + 28)
            guard start + csize <= b.count else { throw NPYError(path, "member '\(name)' is truncated") }
            let key = name.hasSuffix(".npy") ? String(name.dropLast(4)) : name
            var member = Data(b[start..<(start + csize)])
            if method == 8 { member = try inflate(member, expected: usize, name: "\(path):\(name)") }
            out[key] = try NPY.decode(member, name: "\(path):\(name)")
            p += 46 + nameLen + extraLen + commentLen
        }
        return out
    }

    /// Raw deflate → bytes; `expected` is the size the zip header states (bounded to 4 GiB).
    static func inflate(_ data: Data, expected: Int, name: String) throws -> Data {
        guard expected >= 0, expected <= 1 << 32 else { throw NPYError(name, "implausible uncompressed size \(expected)") }
        var out = [UInt8](repeating: 0, count: max(expected, 1))
        var stream = z_stream()
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw NPYError(name, "zlib init failed")
        }
        defer { inflateEnd(&stream) }
        var input = [UInt8](data)
        let status: Int32 = input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { o in
                stream.next_in = inp.baseAddress
                stream.avail_in = uInt(inp.count)
                stream.next_out = o.baseAddress
                stream.avail_out = uInt(o.count)
                return CZlib.inflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END, Int(stream.total_out) == expected else {
            throw NPYError(name, "corrupt deflate data (zlib status \(status))")
        }
        return Data(out.prefix(expected))
    }
}
