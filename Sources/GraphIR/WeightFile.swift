#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A memory-mapped MIL blob storage v2 file (`weights/weight.bin`).
///
/// Layout (all little-endian, 64-byte aligned): a 64-byte header {count: u32, version: u32 = 2,
/// reserved}, then per blob a 64-byte metadata record {sentinel u32 = 0xDEADBEEF, mil_dtype u32,
/// sizeInBytes u64, offset u64 (absolute payload offset), padding_size_in_bits u64, reserved}
/// followed by the payload. A `BlobFileValue.offset` points at the metadata record.
///
/// The file is mapped read-only and never copied; pages are read only when a payload is used.
public final class WeightFile: @unchecked Sendable {
    public let path: String
    public let size: Int
    private let base: UnsafeRawPointer?

    /// The blob count from the header.
    public let headerCount: UInt32

    /// One metadata record.
    public struct Record: Hashable, Sendable {
        public var metadataOffset: UInt64
        public var dtypeCode: UInt32
        public var sizeInBytes: UInt64
        public var dataOffset: UInt64
        public var paddingBits: UInt64
    }

    /// Maps the file at `path`.
    /// - Throws: `ModelError.missingWeightFile` if it cannot be opened,
    ///   `.badWeightFile` if it is too short for a header or not version 2.
    public init(path: String) throws {
        self.path = path
        // Type checked before opening, opened non-blocking: a FIFO never blocks the load.
        let fd: Int32, size: Int
        do { (fd, size) = try SafeFile.openRegular(path) } catch let f as SafeFile.Failure {
            if case .missing = f { throw ModelError.missingWeightFile(path: path) }
            throw ModelError.badWeightFile(path: path, reason: "the weight file \(f.reason)")
        }
        defer { close(fd) }
        self.size = size
        guard size >= 64 else {
            throw ModelError.badWeightFile(path: path, reason: "file is \(size) bytes, shorter than the 64-byte header")
        }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), p != MAP_FAILED else {
            throw ModelError.badWeightFile(path: path, reason: "mmap failed (errno \(errno))")
        }
        self.base = UnsafeRawPointer(p)
        let count = p.loadUnaligned(as: UInt32.self)
        let version = p.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        self.headerCount = count
        guard version == 2 else {
            munmap(p, size)
            throw ModelError.badWeightFile(path: path, reason: "blob storage version \(version), expected 2")
        }
    }

    deinit {
        if let base { munmap(UnsafeMutableRawPointer(mutating: base), size) }
    }

    /// The whole mapped file.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: size) }

    /// Reads and checks the metadata record at `offset`.
    /// - Throws: `ModelError.badBlob` when the record or its payload lies outside the file,
    ///   the sentinel is not 0xDEADBEEF, or the dtype code is unknown.
    public func record(at offset: UInt64) throws -> Record {
        guard offset <= UInt64(Int.max), Int(offset) <= size - 64 else {
            throw ModelError.badBlob(path: path, offset: offset, reason: "metadata record lies outside the \(size)-byte file")
        }
        let p = base!.advanced(by: Int(offset))
        let sentinel = p.loadUnaligned(as: UInt32.self)
        guard sentinel == 0xDEAD_BEEF else {
            throw ModelError.badBlob(path: path, offset: offset, reason: String(format: "sentinel 0x%08X, expected 0xDEADBEEF", sentinel))
        }
        let code = p.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        let sizeInBytes = p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        let dataOffset = p.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
        let pad = p.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        guard DType(blobCode: code) != nil else {
            throw ModelError.badBlob(path: path, offset: offset, reason: "unknown blob dtype code \(code)")
        }
        let (end, overflow) = dataOffset.addingReportingOverflow(sizeInBytes)
        guard !overflow, end <= UInt64(size) else {
            throw ModelError.badBlob(path: path, offset: offset, reason: "payload [\(dataOffset), +\(sizeInBytes)) lies outside the \(size)-byte file")
        }
        return Record(metadataOffset: offset, dtypeCode: code, sizeInBytes: sizeInBytes, dataOffset: dataOffset, paddingBits: pad)
    }

    /// The payload bytes of a checked record (no copy).
    public func payload(_ r: Record) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base!.advanced(by: Int(r.dataOffset)), count: Int(r.sizeInBytes))
    }
}

/// A tensor constant stored in a weight file: `BLOBFILE(path = fileName, offset = offset)`.
public struct BlobRef: Hashable, Sendable {
    /// As written in the model, e.g. `@model_path/weights/weight.bin`.
    public var fileName: String
    /// Offset of the 64-byte metadata record (not of the data).
    public var offset: UInt64
    /// The mapped file, when the model was loaded from disk.
    public var file: WeightFile?
    /// The checked record, when resolved.
    public var record: WeightFile.Record?

    public init(fileName: String, offset: UInt64, file: WeightFile? = nil, record: WeightFile.Record? = nil) {
        self.fileName = fileName
        self.offset = offset
        self.file = file
        self.record = record
    }

    /// The payload bytes, mapped (no copy).
    /// - Throws: `ModelError.missingWeightFile` if the reference was never resolved to a file.
    public func bytes() throws -> UnsafeRawBufferPointer {
        guard let file, let record else { throw ModelError.missingWeightFile(path: fileName) }
        return file.payload(record)
    }

    public static func == (a: BlobRef, b: BlobRef) -> Bool {
        a.fileName == b.fileName && a.offset == b.offset
    }
    public func hash(into h: inout Hasher) {
        h.combine(fileName)
        h.combine(offset)
    }
}
