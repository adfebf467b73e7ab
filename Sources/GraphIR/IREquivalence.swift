#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Structural comparison of two models (e.g. a model and its written-then-reloaded copy).
///
/// Compared: specification version, `isUpdatable`, the whole model description, program
/// version/docString/attributes, functions (by name: inputs, opset, attributes, body, further
/// block specializations), blocks (inputs, outputs, operations in order), operations (type,
/// inputs with their bindings, outputs with types, attributes, nested blocks). Constants are
/// compared by type, docString and payload: immediate tensors by their stored field and
/// elements, blob tensors by their payload bytes (not by file name or offset; two unresolved
/// references by file name and offset), dicts by key
/// (entry order ignored when keys are distinct). Attributes and
/// op inputs are compared by name, regardless of order.
public enum IREquivalence {
    /// Human-readable differences between `a` and `b`; empty when they are equivalent.
    /// At most `limit` differences are listed (then one line says how many were left out).
    public static func differences(_ a: Model, _ b: Model, limit: Int = 200) -> [String] {
        var c = Comparer(limit: limit)
        c.compare(a, b)
        if c.omitted > 0 { c.out.append("… and \(c.omitted) more differences") }
        return c.out
    }

    /// Differences between two constants (same rules as for models).
    public static func differences(_ a: ConstValue, _ b: ConstValue, limit: Int = 200) -> [String] {
        var c = Comparer(limit: limit)
        c.const(a, b, "value")
        if c.omitted > 0 { c.out.append("… and \(c.omitted) more differences") }
        return c.out
    }
}

private struct Comparer {
    let limit: Int
    var out: [String] = []
    var omitted = 0
    /// Blob pairs already found equal (payloads are shared by deduplicated consts).
    var equalBlobs = Set<PairKey>()

    struct PairKey: Hashable {
        var a: String, ao: UInt64, b: String, bo: UInt64
    }

    init(limit: Int) { self.limit = limit }

    mutating func diff(_ s: String) {
        if out.count < limit { out.append(s) } else { omitted += 1 }
    }

    mutating func check<T: Equatable>(_ x: T, _ y: T, _ what: String) {
        if x != y { diff("\(what): \(x) vs \(y)") }
    }

    mutating func compare(_ a: Model, _ b: Model) {
        check(a.specificationVersion, b.specificationVersion, "specificationVersion")
        check(a.isUpdatable, b.isUpdatable, "isUpdatable")
        description(a.description, b.description)
        program(a.program, b.program)
    }

    // MARK: Description

    mutating func description(_ a: ModelDescription, _ b: ModelDescription) {
        features(a.inputs, b.inputs, "description inputs")
        features(a.outputs, b.outputs, "description outputs")
        features(a.states, b.states, "description states")
        features(a.trainingInputs, b.trainingInputs, "description trainingInputs")
        check(a.predictedFeatureName, b.predictedFeatureName, "description predictedFeatureName")
        check(a.predictedProbabilitiesName, b.predictedProbabilitiesName, "description predictedProbabilitiesName")
        check(a.defaultFunctionName, b.defaultFunctionName, "description defaultFunctionName")
        check(a.functions.map(\.name), b.functions.map(\.name), "description functions")
        for (fa, fb) in zip(a.functions, b.functions) where fa.name == fb.name {
            let ctx = "description function '\(fa.name)'"
            features(fa.inputs, fb.inputs, "\(ctx) inputs")
            features(fa.outputs, fb.outputs, "\(ctx) outputs")
            features(fa.states, fb.states, "\(ctx) states")
            check(fa.predictedFeatureName, fb.predictedFeatureName, "\(ctx) predictedFeatureName")
            check(fa.predictedProbabilitiesName, fb.predictedProbabilitiesName, "\(ctx) predictedProbabilitiesName")
        }
        let ma = a.metadata, mb = b.metadata
        check(ma.shortDescription, mb.shortDescription, "metadata shortDescription")
        check(ma.versionString, mb.versionString, "metadata versionString")
        check(ma.author, mb.author, "metadata author")
        check(ma.license, mb.license, "metadata license")
        // userDefined is a protobuf map: compared without regard to order.
        check(ma.userDefined.map { "\($0.key)=\($0.value)" }.sorted(), mb.userDefined.map { "\($0.key)=\($0.value)" }.sorted(), "metadata userDefined")
    }

    mutating func features(_ a: [FeatureDescription], _ b: [FeatureDescription], _ ctx: String) {
        check(a.map(\.name), b.map(\.name), "\(ctx) names")
        for (fa, fb) in zip(a, b) where fa.name == fb.name {
            check(fa.shortDescription, fb.shortDescription, "\(ctx) '\(fa.name)' shortDescription")
            check(fa.isOptional, fb.isOptional, "\(ctx) '\(fa.name)' isOptional")
            check(fa.kind, fb.kind, "\(ctx) '\(fa.name)' type")
        }
    }

    // MARK: Program

    mutating func attributes(_ a: [Attribute], _ b: [Attribute], _ ctx: String) {
        let names = Set(a.map(\.name)), other = Set(b.map(\.name))
        for n in a.map(\.name) where !other.contains(n) { diff("\(ctx): attribute '\(n)' only in the first model") }
        for n in b.map(\.name) where !names.contains(n) { diff("\(ctx): attribute '\(n)' only in the second model") }
        for x in a {
            guard let y = b.first(where: { $0.name == x.name }) else { continue }
            const(x.value, y.value, "\(ctx) attribute '\(x.name)'")
        }
    }

    mutating func program(_ a: Program, _ b: Program) {
        check(a.version, b.version, "program version")
        check(a.docString, b.docString, "program docString")
        attributes(a.attributes, b.attributes, "program")
        check(a.functions.map(\.name), b.functions.map(\.name), "program functions")
        for fa in a.functions {
            guard let fb = b.function(named: fa.name) else { continue }
            function(fa, fb)
        }
    }

    mutating func valueDecl(_ a: [Value], _ b: [Value], _ ctx: String) {
        check(a.map(\.name), b.map(\.name), "\(ctx) names")
        for (x, y) in zip(a, b) where x.name == y.name {
            check(x.type, y.type, "\(ctx) '\(x.name)' type")
        }
    }

    mutating func function(_ a: Function, _ b: Function) {
        let ctx = "function '\(a.name)'"
        valueDecl(a.inputs, b.inputs, "\(ctx) inputs")
        check(a.opset, b.opset, "\(ctx) opset")
        attributes(a.attributes, b.attributes, ctx)
        block(a.body, b.body, ctx)
        check(a.otherSpecializations.map(\.opset), b.otherSpecializations.map(\.opset), "\(ctx) other block specializations")
        for (x, y) in zip(a.otherSpecializations, b.otherSpecializations) where x.opset == y.opset {
            block(x.block, y.block, "\(ctx)<\(x.opset)>")
        }
    }

    mutating func block(_ a: Block, _ b: Block, _ ctx: String) {
        valueDecl(a.inputs, b.inputs, "\(ctx) block inputs")
        check(a.outputs.map(\.name), b.outputs.map(\.name), "\(ctx) block outputs")
        attributes(a.attributes, b.attributes, "\(ctx) block")
        if a.operations.count != b.operations.count {
            diff("\(ctx): \(a.operations.count) operations vs \(b.operations.count)")
        }
        for (i, (x, y)) in zip(a.operations, b.operations).enumerated() {
            operation(x, y, "\(ctx) op #\(i) '\(x.name)'")
        }
    }

    mutating func operation(_ a: Op, _ b: Op, _ ctx: String) {
        check(a.type, b.type, "\(ctx) type")
        valueDecl(a.outputs, b.outputs, "\(ctx) outputs")
        let an = Set(a.inputs.map(\.name)), bn = Set(b.inputs.map(\.name))
        for n in a.inputs.map(\.name) where !bn.contains(n) { diff("\(ctx): input '\(n)' only in the first model") }
        for n in b.inputs.map(\.name) where !an.contains(n) { diff("\(ctx): input '\(n)' only in the second model") }
        for x in a.inputs {
            guard let y = b.input(x.name) else { continue }
            let ictx = "\(ctx) input '\(x.name)'"
            if x.operands.count != y.operands.count {
                diff("\(ictx): \(x.operands.count) bindings vs \(y.operands.count)")
                continue
            }
            for (k, (p, q)) in zip(x.operands, y.operands).enumerated() {
                let bctx = x.operands.count > 1 ? "\(ictx)[\(k)]" : ictx
                switch (p, q) {
                case let (.value(v), .value(w)):
                    check(v.name, w.name, "\(bctx) value")
                case let (.constant(c), .constant(d)):
                    const(c, d, bctx)
                case let (.value(v), .constant):
                    diff("\(bctx): bound to value '\(v.name)' vs an inline constant")
                case let (.constant, .value(w)):
                    diff("\(bctx): bound to an inline constant vs value '\(w.name)'")
                }
            }
        }
        attributes(a.attributes, b.attributes, ctx)
        if a.blocks.count != b.blocks.count { diff("\(ctx): \(a.blocks.count) nested blocks vs \(b.blocks.count)") }
        for (i, (x, y)) in zip(a.blocks, b.blocks).enumerated() { block(x, y, "\(ctx) block \(i)") }
    }

    // MARK: Constants

    mutating func const(_ a: ConstValue, _ b: ConstValue, _ ctx: String) {
        check(a.type, b.type, "\(ctx) type")
        check(a.docString, b.docString, "\(ctx) docString")
        switch (a.payload, b.payload) {
        case let (.tensor(x), .tensor(y)):
            if !sameStorage(x, y) { diff("\(ctx): immediate values differ: \(summary(x)) vs \(summary(y))") }
        case let (.blob(x), .blob(y)):
            blob(x, y, ctx)
        case let (.tuple(x), .tuple(y)), let (.list(x), .list(y)):
            if x.count != y.count { diff("\(ctx): \(x.count) elements vs \(y.count)"); return }
            for (i, (p, q)) in zip(x, y).enumerated() { const(p, q, "\(ctx)[\(i)]") }
        case let (.dict(x), .dict(y)):
            if x.count != y.count { diff("\(ctx): \(x.count) entries vs \(y.count)"); return }
            // A dict is unordered: with distinct keys, entries are matched by key (MIL text
            // prints them sorted); otherwise by position.
            let xk = x.map { MILPrinter.literal($0.key) }, yk = y.map { MILPrinter.literal($0.key) }
            if Set(xk).count == x.count, Set(yk).count == y.count {
                let index = Dictionary(uniqueKeysWithValues: zip(yk, y.indices))
                for (i, p) in x.enumerated() {
                    guard let j = index[xk[i]] else { diff("\(ctx): key \(xk[i]) only in the first value"); continue }
                    const(p.value, y[j].value, "\(ctx) value for key \(xk[i])")
                }
                return
            }
            for (i, (p, q)) in zip(x, y).enumerated() {
                const(p.key, q.key, "\(ctx) key \(i)")
                const(p.value, q.value, "\(ctx) value \(i)")
            }
        default:
            diff("\(ctx): stored as \(kind(a.payload)) vs \(kind(b.payload))")
        }
    }

    mutating func blob(_ x: BlobRef, _ y: BlobRef, _ ctx: String) {
        let key = PairKey(a: x.file?.path ?? x.fileName, ao: x.offset, b: y.file?.path ?? y.fileName, bo: y.offset)
        if equalBlobs.contains(key) { return }
        if x.file == nil, y.file == nil {
            // Neither reference was resolved to a file (text parsed without its model folder).
            check(x.fileName, y.fileName, "\(ctx) unresolved blob file")
            check(x.offset, y.offset, "\(ctx) unresolved blob offset")
            return
        }
        let p: UnsafeRawBufferPointer, q: UnsafeRawBufferPointer
        do { p = try x.bytes() } catch { diff("\(ctx): first blob unreadable: \(error)"); return }
        do { q = try y.bytes() } catch { diff("\(ctx): second blob unreadable: \(error)"); return }
        if let r = x.record, let s = y.record {
            check(r.dtypeCode, s.dtypeCode, "\(ctx) blob dtype code")
            check(r.paddingBits, s.paddingBits, "\(ctx) blob padding bits")
        }
        guard p.count == q.count else { diff("\(ctx): blob payload is \(p.count) bytes vs \(q.count)"); return }
        if p.count > 0, memcmp(p.baseAddress!, q.baseAddress!, p.count) != 0 {
            var first = 0
            while first < p.count && p[first] == q[first] { first += 1 }
            diff("\(ctx): blob payloads differ (first at byte \(first) of \(p.count))")
            return
        }
        equalBlobs.insert(key)
    }

    /// Like `==`, but floats compare by bit pattern (so NaN equals the same NaN).
    func sameStorage(_ x: TensorStorage, _ y: TensorStorage) -> Bool {
        switch (x, y) {
        case let (.floats(p), .floats(q)): return p.map(\.bitPattern) == q.map(\.bitPattern)
        case let (.doubles(p), .doubles(q)): return p.map(\.bitPattern) == q.map(\.bitPattern)
        default: return x == y
        }
    }

    func kind(_ p: ConstValue.Payload) -> String {
        switch p {
        case .tensor: return "an immediate tensor"
        case .blob: return "a blob"
        case .tuple: return "a tuple"
        case .list: return "a list"
        case .dict: return "a dict"
        }
    }

    func summary(_ s: TensorStorage) -> String {
        func show<T>(_ name: String, _ v: [T]) -> String {
            let head = v.prefix(6).map { "\($0)" }.joined(separator: ", ")
            return "\(name)[\(v.count)](\(head)\(v.count > 6 ? ", …" : ""))"
        }
        switch s {
        case let .floats(v): return show("floats", v)
        case let .doubles(v): return show("doubles", v)
        case let .ints(v): return show("ints", v)
        case let .longInts(v): return show("longInts", v)
        case let .bools(v): return show("bools", v)
        case let .strings(v): return show("strings", v)
        case let .bytes(v): return show("bytes", v)
        }
    }
}
