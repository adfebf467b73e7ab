import CoreMLProto
import Foundation

/// The binary model description `coremldata.bin` of a compiled `.mlmodelc`.
///
/// Apple does not document it. Two independent public re-implementations of the compiler (a
/// Rust and a Go one, facts sheet §10) write the same header, which is what we read:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0x00 | u32 LE | magic `502` (the `mlProgram` field number) |
/// | 0x04 | u32 LE | specification version |
/// | 0x1C | u32 LE | `7` (not checked) |
/// | 0x24 | 7 | ASCII `generic` (not checked) |
/// | 0x2B | u8 | specification version again (not checked) |
/// | 0x4B | u64 LE | length L of the payload |
/// | 0x53 | L | a `CoreML.Specification.ModelDescription` protobuf |
/// | 0x53+L | 16 or 16·F | trailer: one 16-byte record, or one per function (`502` then 12 zero bytes) |
///
/// The two writers disagree on the trailer; both forms are accepted, any other trailer is
/// reported in `notes` (the description is still used).
public struct CoreMLDataBin {
    public static let magic: UInt32 = 502
    public static let payloadLengthOffset = 0x4B
    public static let payloadOffset = 0x53
    /// Largest file read (the description of a model is small).
    public static let maxBytes = 64 << 20

    public var specificationVersion: Int32
    public var description: ModelDescription
    /// Which trailer form was found, and anything unexpected.
    public var notes: [String]

    public struct Unreadable: Error, CustomStringConvertible {
        public var description: String
    }

    /// Reads and decodes the file.
    /// - Throws: `Unreadable` (a reason: missing, too large, wrong magic, length outside the
    ///   file, payload not a ModelDescription protobuf).
    public init(path: String) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw Unreadable(description: "no coremldata.bin") }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()).map(Int.init) ?? 0
        guard size <= Self.maxBytes else { throw Unreadable(description: "coremldata.bin is \(size) bytes, more than the \(Self.maxBytes)-byte limit") }
        try? handle.seek(toOffset: 0)
        let data = [UInt8]((try? handle.readToEnd()) ?? Data())
        try self.init(bytes: data)
    }

    /// Decodes the bytes of a `coremldata.bin`.
    public init(bytes data: [UInt8]) throws {
        func u32(_ o: Int) -> UInt32 { data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: o, as: UInt32.self) } }
        func u64(_ o: Int) -> UInt64 { data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: o, as: UInt64.self) } }
        guard data.count >= Self.payloadOffset else {
            throw Unreadable(description: "coremldata.bin is \(data.count) bytes, shorter than the \(Self.payloadOffset)-byte header")
        }
        guard u32(0) == Self.magic else {
            throw Unreadable(description: "coremldata.bin starts with \(u32(0)), not the magic 502 of the known layout")
        }
        let version = u32(4)
        guard version > 0, version < 1000 else { throw Unreadable(description: "coremldata.bin specification version \(version) is implausible") }
        let length = u64(Self.payloadLengthOffset)
        let available = UInt64(data.count - Self.payloadOffset)
        guard length <= available else {
            throw Unreadable(description: "coremldata.bin payload length \(length) runs past the end of the \(data.count)-byte file")
        }
        let end = Self.payloadOffset + Int(length)
        let desc: ModelDescription = try data.withUnsafeBytes { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self).advanced(by: Self.payloadOffset)
            guard let msg = core_ml__specification__model_description__unpack(nil, Int(length), base) else {
                throw Unreadable(description: "coremldata.bin payload (\(length) bytes at 0x53) is not a ModelDescription protobuf")
            }
            defer { core_ml__specification__model_description__free_unpacked(msg, nil) }
            do {
                return try ProtoDecoder(specPath: "coremldata.bin", modelDir: ".").description(msg)
            } catch {
                throw Unreadable(description: "coremldata.bin description: \(error)")
            }
        }
        specificationVersion = Int32(version)
        description = desc
        notes = []
        let trailer = data.count - end
        let functions = max(1, desc.functions.count)
        if trailer == 16 {
            notes.append("coremldata.bin: one 16-byte trailer")
        } else if trailer == 16 * functions {
            var ok = true
            for f in 0..<functions where u32(end + 16 * f) != Self.magic { ok = false }
            notes.append(ok ? "coremldata.bin: one 16-byte trailer per function (\(functions))"
                            : "coremldata.bin: \(trailer)-byte trailer whose records do not start with 502")
        } else {
            notes.append("coremldata.bin: unexpected \(trailer)-byte trailer (known forms: 16, or 16 per function)")
        }
    }
}
