#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Visits every blob reference of a program, nested anywhere: program, function and block
/// attributes, op attributes (`const` `val`, iOS16 constexpr parameters), inline operand
/// constants (iOS18 constexpr inputs), tuple/list/dict members, nested blocks; in program order.
enum BlobWalker {
    static func forEachBlob(in program: Program, _ body: (BlobRef, ConstValue, String) throws -> Void) rethrows {
        for f in program.functions {
            let fctx = "function '\(f.name)'"
            for a in f.attributes { try visit(a.value, "\(fctx) attribute '\(a.name)'", body) }
            try visit(block: f.body, fctx, body)
            for spec in f.otherSpecializations { try visit(block: spec.block, "\(fctx)<\(spec.opset)>", body) }
        }
        for a in program.attributes { try visit(a.value, "program attribute '\(a.name)'", body) }
    }

    private static func visit(block: Block, _ ctx: String, _ body: (BlobRef, ConstValue, String) throws -> Void) rethrows {
        for a in block.attributes { try visit(a.value, "\(ctx) block attribute '\(a.name)'", body) }
        for op in block.operations {
            let octx = "\(ctx): op '\(op.name)' (\(op.type))"
            for a in op.attributes { try visit(a.value, "\(octx) attribute '\(a.name)'", body) }
            for input in op.inputs {
                for operand in input.operands {
                    if case let .constant(c) = operand { try visit(c, "\(octx) input '\(input.name)'", body) }
                }
            }
            for (i, b) in op.blocks.enumerated() { try visit(block: b, "\(octx) block \(i)", body) }
        }
    }

    private static func visit(_ c: ConstValue, _ ctx: String, _ body: (BlobRef, ConstValue, String) throws -> Void) rethrows {
        switch c.payload {
        case .tensor:
            break
        case let .blob(ref):
            try body(ref, c, ctx)
        case let .tuple(vs), let .list(vs):
            for v in vs { try visit(v, ctx, body) }
        case let .dict(entries):
            for e in entries {
                try visit(e.key, ctx, body)
                try visit(e.value, ctx, body)
            }
        }
    }
}

/// The layout of a fresh `weight.bin`: one record per distinct source blob, in first-use order.
struct BlobPlan {
    struct Entry {
        enum Source {
            /// A record of a loaded weight file (the mapping is kept alive while it is copied).
            case mapped(WeightFile, WeightFile.Record)
            /// An immediate tensor moved into the weight file (``ImmediateBlob``).
            case memory([UInt8])
        }
        var source: Source
        var dtypeCode: UInt32
        var paddingBits: UInt64
        /// Offset of the new metadata record (payload at +64).
        var metadataOffset: UInt64

        var sizeInBytes: UInt64 {
            switch source {
            case let .mapped(_, record): return record.sizeInBytes
            case let .memory(bytes): return UInt64(bytes.count)
            }
        }
    }

    var entries: [Entry] = []
    var offsets: [BlobKey: UInt64] = [:]
    /// Immediate tensors written as blobs (`immediatesAsBlobs`), by element bytes.
    var immediateOffsets: [ImmediateBlob: UInt64] = [:]
    /// Size of the file to write (no padding after the last payload).
    var fileSize: UInt64 = 64

    var isEmpty: Bool { entries.isEmpty }

    static func align64(_ x: UInt64) -> UInt64 { (x + 63) & ~63 }

    /// Resolves every blob reference of `model` and assigns new offsets; with
    /// `immediatesAsBlobs`, also gives a record (after the mapped ones, in program order,
    /// identical payloads once) to every immediate tensor that coremltools would store in
    /// `weight.bin` (``ImmediateBlob``).
    /// - Throws: `WriterFailure` when a reference cannot be resolved to a mapped record.
    static func make(for model: Model, immediatesAsBlobs: Bool = false) throws -> BlobPlan {
        var plan = BlobPlan()
        var cursor: UInt64 = 64
        try BlobWalker.forEachBlob(in: model.program) { ref, value, ctx in
            let key = BlobKey(ref, in: model)
            if plan.offsets[key] != nil { return }
            guard let file = ref.file ?? model.weightFiles[ref.fileName] else {
                throw WriterFailure("\(ctx): blob '\(ref.fileName)' at offset \(ref.offset) is not backed by a loaded weight file")
            }
            let record: WeightFile.Record
            do {
                if let r = ref.record, ref.file != nil { record = r } else { record = try file.record(at: ref.offset) }
            } catch {
                throw WriterFailure("\(ctx): cannot read source blob: \(error)")
            }
            var code = record.dtypeCode
            var pad = record.paddingBits
            if let tt = value.type.tensorType, let c = tt.dtype.blobCode {
                code = c
                if tt.dtype.isSubByte, let n = tt.elementCount {
                    let bits = UInt64(n) * UInt64(tt.dtype.bitWidth)
                    if (bits + 7) / 8 == record.sizeInBytes { pad = record.sizeInBytes * 8 - bits }
                } else if !tt.dtype.isSubByte {
                    pad = 0
                }
            }
            let meta = cursor
            let dataEnd = meta + 64 + record.sizeInBytes
            plan.entries.append(Entry(source: .mapped(file, record), dtypeCode: code, paddingBits: pad, metadataOffset: meta))
            plan.offsets[key] = meta
            plan.fileSize = dataEnd
            cursor = align64(dataEnd)
        }
        guard immediatesAsBlobs else { return plan }
        ImmediateBlob.forEachCandidate(in: model.program) { value in
            guard let blob = ImmediateBlob(value, specificationVersion: model.specificationVersion),
                  plan.immediateOffsets[blob] == nil, let code = blob.dtype.blobCode else { return }
            let meta = cursor
            let dataEnd = meta + 64 + UInt64(blob.bytes.count)
            plan.entries.append(Entry(source: .memory(blob.bytes), dtypeCode: code, paddingBits: blob.paddingBits, metadataOffset: meta))
            plan.immediateOffsets[blob] = meta
            plan.fileSize = dataEnd
            cursor = align64(dataEnd)
        }
        return plan
    }
}

/// The element bytes of an immediate tensor constant that coremltools 9 would store in
/// `weight.bin` (facts §5.6, `should_use_weight_file`): at least 10 elements of fp16, fp32,
/// int8, uint8 or a sub-byte type (held as int8/uint8 arrays there), plus int16, uint16, int32
/// and uint32 when the model targets iOS18+ (specification version 9+). Identical payloads
/// share one record.
struct ImmediateBlob: Hashable {
    var dtype: DType
    /// Little-endian element bytes, sub-byte types packed LSB first (as in a blob).
    var bytes: [UInt8]
    var paddingBits: UInt64

    init?(_ c: ConstValue, specificationVersion: Int32) {
        guard case let .tensor(storage) = c.payload, let t = c.type.tensorType, let n = t.elementCount, n >= 10 else { return nil }
        switch t.dtype {
        case .fp16, .fp32, .int8, .uint8, .int4, .uint1, .uint2, .uint3, .uint4, .uint6: break
        case .int16, .uint16, .int32, .uint32: guard specificationVersion >= 9 else { return nil }
        default: return nil
        }
        let width = t.dtype.bitWidth / 8
        var out: [UInt8]
        switch storage {
        case let .bytes(b):
            guard b.count == t.dtype.byteCount(elements: n) else { return nil }
            out = b
        case let .floats(v):
            guard t.dtype == .fp32, v.count == n else { return nil }
            out = []
            out.reserveCapacity(4 * n)
            for f in v { withUnsafeBytes(of: f.bitPattern.littleEndian) { out += $0 } }
        case let .ints(v):
            guard [.int16, .uint16, .int32, .uint32].contains(t.dtype), v.count == n else { return nil }
            out = []
            out.reserveCapacity(width * n)
            for x in v { withUnsafeBytes(of: UInt32(bitPattern: x).littleEndian) { out += $0.prefix(width) } }
        default:
            return nil
        }
        dtype = t.dtype
        bytes = out
        paddingBits = t.dtype.isSubByte ? UInt64(out.count * 8 - n * t.dtype.bitWidth) : 0
    }

    /// Where coremltools writes constants through its weight-file rule: a `const` op's `val`,
    /// the parameters of an iOS16 `constexpr_*` op (attributes) and inline operand values
    /// (iOS18 constexpr inputs); function bodies and nested blocks, in program order.
    static func forEachCandidate(in program: Program, _ body: (ConstValue) -> Void) {
        func visit(_ block: Block) {
            for op in block.operations {
                if op.type == "const" || op.type.hasPrefix("constexpr_") {
                    for a in op.attributes where a.name != "name" && (op.type != "const" || a.name == "val") { body(a.value) }
                }
                for input in op.inputs { for case let .constant(c) in input.operands { body(c) } }
                for b in op.blocks { visit(b) }
            }
        }
        for f in program.functions {
            visit(f.body)
            for spec in f.otherSpecializations { visit(spec.block) }
        }
    }
}

/// Buffered-free POSIX file writing helpers (short writes and EINTR handled).
enum PosixIO {
    static func errnoText(_ e: Int32 = errno) -> String { String(cString: strerror(e)) }

    static func writeAll(_ fd: Int32, _ p: UnsafeRawPointer, _ count: Int, _ what: String) throws {
        var done = 0
        while done < count {
            let n = write(fd, p + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw WriterFailure("writing \(what): \(errnoText())")
            }
            if n == 0 { throw WriterFailure("writing \(what): no progress") }
            done += n
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], _ what: String) throws {
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            try writeAll(fd, base, raw.count, what)
        }
    }

    /// Creates `path` (must not exist), writes `bytes`, fsyncs and closes.
    static func createFile(_ path: String, _ bytes: [UInt8]) throws {
        try withNewFile(path) { fd in try writeAll(fd, bytes, path) }
    }

    static func withNewFile(_ path: String, _ body: (Int32) throws -> Void) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw WriterFailure("cannot create \(path): \(errnoText())") }
        var closed = false
        defer { if !closed { close(fd) } }
        try body(fd)
        guard fsync(fd) == 0 else { throw WriterFailure("fsync \(path): \(errnoText())") }
        closed = true
        guard close(fd) == 0 else { throw WriterFailure("close \(path): \(errnoText())") }
    }

    static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 else { throw WriterFailure("cannot create folder \(path): \(errnoText())") }
    }

    /// fsync a directory so that entries created or renamed in it are durable.
    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw WriterFailure("cannot open folder \(path): \(errnoText())") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw WriterFailure("fsync folder \(path): \(errnoText())") }
    }
}

/// Streams the records of a `BlobPlan` into a new blob storage v2 file.
enum BlobFileWriter {
    /// Payloads are copied from the mapped sources in chunks of this size.
    static let chunkSize = 8 << 20

    static func write(_ plan: BlobPlan, to path: String) throws {
        guard plan.entries.count <= Int(UInt32.max) else {
            throw WriterFailure("\(plan.entries.count) blobs do not fit the 32-bit count of a weight file header")
        }
        try PosixIO.withNewFile(path) { fd in
            var header = [UInt8](repeating: 0, count: 64)
            store(UInt32(plan.entries.count), &header, 0)
            store(UInt32(2), &header, 4)
            try PosixIO.writeAll(fd, header, path)
            var position: UInt64 = 64
            let zeros = [UInt8](repeating: 0, count: 64)
            for e in plan.entries {
                precondition(e.metadataOffset >= position && e.metadataOffset - position < 64)
                if e.metadataOffset > position {
                    try zeros.withUnsafeBytes { try PosixIO.writeAll(fd, $0.baseAddress!, Int(e.metadataOffset - position), path) }
                }
                var meta = [UInt8](repeating: 0, count: 64)
                store(UInt32(0xDEAD_BEEF), &meta, 0)
                store(e.dtypeCode, &meta, 4)
                store(e.sizeInBytes, &meta, 8)
                store(e.metadataOffset + 64, &meta, 16)
                store(e.paddingBits, &meta, 24)
                try PosixIO.writeAll(fd, meta, path)
                switch e.source {
                case let .mapped(file, record):
                    let payload = file.payload(record)
                    if let base = payload.baseAddress {
                        var done = 0
                        while done < payload.count {
                            let n = min(chunkSize, payload.count - done)
                            try PosixIO.writeAll(fd, base + done, n, path)
                            done += n
                        }
                    }
                case let .memory(bytes):
                    try PosixIO.writeAll(fd, bytes, path)
                }
                position = e.metadataOffset + 64 + e.sizeInBytes
            }
            precondition(position == plan.fileSize || plan.entries.isEmpty)
        }
    }

    private static func store<T: FixedWidthInteger>(_ v: T, _ buf: inout [UInt8], _ at: Int) {
        withUnsafeBytes(of: v.littleEndian) { raw in
            for i in 0..<raw.count { buf[at + i] = raw[i] }
        }
    }
}
