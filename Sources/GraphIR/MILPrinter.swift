import JSON

/// Prints a model's program in the MIL text syntax of a compiled model's `model.mil`
/// (`.mlmodelc`), so that a user can diff what forge-ir sees with what Apple's compiler wrote.
///
/// ```
/// program(1.3)
/// [buildInfo = dict<string, string>({{"coremltools-version", "9.0"}})]
/// {
///     func main<ios18>(tensor<int32, [1, ?]> input_ids, state<tensor<fp16, [1, 2, 64, 16]>> k) [FlexibleShapeInformation = ...] {
///             tensor<fp16, [64, 32]> w = const()[name = string("w"), val = tensor<fp16, [64, 32]>(BLOBFILE(path = string("@model_path/weights/weight.bin"), offset = uint64(64)))];
///             tensor<fp16, [1, ?, 32]> y = linear(bias = b, weight = w, x = x)[name = string("y")];
///             write_state(data = v, input = k)[name = string("w0")];
///         } -> (y);
/// }
/// ```
///
/// Conventions (Apple's spelling where it is known, facts sheet §9; our choice where it is not):
/// * Header `program(1.3)` for proto version 1 (what current compilers write); other versions
///   print as `program(<version>.0)`.
/// * Op inputs in alphabetical order of parameter name; an input with more than one
///   binding (variadic) as a tuple `values = (a, b, c)`; an inline constant operand as a typed
///   literal. Attributes in `[...]`: `name` first, then alphabetical; no brackets when there
///   are none. Program and function attributes are sorted by name; dict literals by key text.
/// * Scalars `int32(0)`, `fp32(0x1p-1)`, `bool(true)`, `string("a\"b")`: floats of every width
///   as C `%a` hexadecimal (normalized, lowercase, shortest mantissa; `inf`, `-inf`, `nan`).
/// * Blob constants `tensor<fp16, [64, 32]>(BLOBFILE(path = string("…"), offset = uint64(64)))`
///   (the metadata offset, as in the file); their bytes are never read.
/// * **Elision (our choice):** an immediate tensor with more than `elideThreshold` (64) elements
///   prints as `tensor<fp32, [1000]>(<1000 values>)` — the type stays exact, only the payload
///   is replaced by a count; `<…>` cannot be mistaken for a literal. Pass
///   `elideAbove: Int.max` for text that `MILTextParser` reads back into the same IR.
/// * Several outputs: `tensor<…> a, tensor<…> b = split(…)[…];`; no outputs: no `=`.
/// * **Nested blocks (our choice, Apple's spelling unverified):** after the op's attributes,
///   each block on its own lines, headed by its parenthesised inputs, body indented like a
///   function body, closed by `} -> (outputs)`; the statement's `;` follows the last block.
///   ```
///   tensor<fp32, [2]> r = cond(pred = p)[name = string("r")]
///       () {
///               tensor<fp32, [2]> t = relu(x = x)[name = string("t")];
///           } -> (t)
///       () {
///               tensor<fp32, [2]> e = sigmoid(x = x)[name = string("e")];
///           } -> (e);
///   ```
/// * Flexible inputs: a `FlexibleShapeInformation` function attribute is built from the model
///   description (facts §6.3) unless the function already carries one. Further
///   `block_specializations` of a function are not printed.
public enum MILPrinter {
    /// Immediate tensors with more elements than this print as `<N values>`.
    public static let elideThreshold = 64

    /// The whole program (every function, or only `function` when given; an unknown name
    /// prints a program with no function).
    public static func print(_ model: Model, function: String? = nil, elideAbove limit: Int = elideThreshold) -> String {
        var out = ""
        let program = model.program
        out += "program(\(program.version == 1 ? "1.3" : "\(program.version).0"))\n"
        if !program.attributes.isEmpty {
            out += "[" + attributeList(sortedByName(program.attributes), limit) + "]\n"
        }
        out += "{\n"
        for f in program.functions where function == nil || f.name == function {
            out += print(f, interface: model.description.interface(of: f.name), elideAbove: limit)
        }
        out += "}\n"
        return out
    }

    /// One `func` block (indented by `indent` spaces, 4 inside a program), ending with a newline.
    /// `interface` is the function's description; when it has flexible inputs, the
    /// `FlexibleShapeInformation` attribute is added.
    public static func print(_ function: Function, interface: FunctionDescription? = nil, indent: Int = 4, elideAbove limit: Int = elideThreshold) -> String {
        var attrs = function.attributes
        if let interface, !attrs.contains(where: { $0.name == "FlexibleShapeInformation" }),
           let info = flexibleShapeInformation(interface) {
            attrs.append(Attribute(name: "FlexibleShapeInformation", value: info))
        }
        let pad = String(repeating: " ", count: indent)
        var out = pad + "func \(function.name)<\(function.opsetTag)>("
        out += function.inputs.map { "\($0.type) \($0.name)" }.joined(separator: ", ") + ")"
        if !attrs.isEmpty { out += " [" + attributeList(sortedByName(attrs), limit) + "]" }
        out += " {\n"
        printBody(function.body, indent: indent, limit: limit, into: &out)
        return out
    }

    /// The text of one operation statement (without leading indentation for the first line;
    /// nested blocks are indented relative to `indent`).
    public static func print(_ op: Op, indent: Int = 0, elideAbove limit: Int = elideThreshold) -> String {
        var out = ""
        printOperation(op, indent: indent, limit: limit, into: &out)
        return out
    }

    /// A typed literal: `int32(3)`, `tensor<int32, [2]>([1, 1])`, `tensor<fp16, [4]>(BLOBFILE(…))`.
    public static func literal(_ value: ConstValue, elideAbove limit: Int = elideThreshold) -> String {
        "\(value.type)(\(bareLiteral(value, limit)))"
    }

    // MARK: - blocks and operations

    /// Body of a block whose header is at `indent`: ops at `indent + 8`, `} -> (…)` at `indent + 4`.
    /// Appends `} -> (outputs);\n` (the `;` and newline omitted when `terminator` is false).
    static func printBody(_ block: Block, indent: Int, terminator: Bool = true, limit: Int, into out: inout String) {
        let opIndent = indent + 8
        for op in block.operations {
            out += String(repeating: " ", count: opIndent)
            printOperation(op, indent: opIndent, limit: limit, into: &out)
            out += ";\n"
        }
        out += String(repeating: " ", count: indent + 4)
        out += "} -> (" + block.outputs.map(\.name).joined(separator: ", ") + ")"
        if terminator { out += ";\n" }
    }

    static func printOperation(_ op: Op, indent: Int, limit: Int, into out: inout String) {
        if !op.outputs.isEmpty {
            out += op.outputs.map { "\($0.type) \($0.name)" }.joined(separator: ", ") + " = "
        }
        out += op.type + "("
        let inputs = op.inputs.sorted { $0.name < $1.name }
        out += inputs.map { "\($0.name) = \(operandList($0.operands, limit))" }.joined(separator: ", ")
        out += ")"
        if !op.attributes.isEmpty {
            let attrs = op.attributes.sorted { a, b in
                if (a.name == "name") != (b.name == "name") { return a.name == "name" }
                return a.name < b.name
            }
            out += "[" + attributeList(attrs, limit) + "]"
        }
        let blockIndent = indent + 4
        for block in op.blocks {
            out += "\n" + String(repeating: " ", count: blockIndent)
            out += "(" + block.inputs.map { "\($0.type) \($0.name)" }.joined(separator: ", ") + ")"
            if !block.attributes.isEmpty { out += " [" + attributeList(sortedByName(block.attributes), limit) + "]" }
            out += " {\n"
            printBody(block, indent: blockIndent, terminator: false, limit: limit, into: &out)
        }
    }

    static func operandList(_ operands: [Operand], _ limit: Int) -> String {
        if operands.count == 1 { return operand(operands[0], limit) }
        return "(" + operands.map { operand($0, limit) }.joined(separator: ", ") + ")"
    }

    static func operand(_ o: Operand, _ limit: Int) -> String {
        switch o {
        case let .value(v): return v.name
        case let .constant(c): return literal(c, elideAbove: limit)
        }
    }

    static func sortedByName(_ attrs: [Attribute]) -> [Attribute] {
        attrs.sorted { $0.name < $1.name }
    }

    static func attributeList(_ attrs: [Attribute], _ limit: Int = elideThreshold) -> String {
        attrs.map { "\($0.name) = \(literal($0.value, elideAbove: limit))" }.joined(separator: ", ")
    }

    // MARK: - literals

    /// A literal without its type: `3`, `[1, 1]`, `"s"`, `{{"k", "v"}}`, `(a, b)`, `BLOBFILE(…)`.
    static func bareLiteral(_ value: ConstValue, _ limit: Int = elideThreshold) -> String {
        switch value.payload {
        case let .blob(ref):
            return "BLOBFILE(path = string(\(quote(ref.fileName))), offset = uint64(\(ref.offset)))"
        case let .tuple(items):
            return "(" + items.map { bareLiteral($0, limit) }.joined(separator: ", ") + ")"
        case let .list(items):
            return "[" + items.map { bareLiteral($0, limit) }.joined(separator: ", ") + "]"
        case let .dict(entries):
            let parts = entries.map { "{\(bareLiteral($0.key, limit)), \(bareLiteral($0.value, limit))}" }.sorted()
            return "{" + parts.joined(separator: ", ") + "}"
        case let .tensor(storage):
            return tensorBody(storage, type: value.type.tensorType, limit: limit)
        }
    }

    static func tensorBody(_ storage: TensorStorage, type: TensorType?, limit: Int = elideThreshold) -> String {
        let dtype = type?.dtype ?? inferredDType(storage)
        let shape = type?.fixedShape
        let count = type?.elementCount ?? storedElementCount(storage, dtype: dtype)
        if count > limit { return "<\(count) values>" }
        let elements = elementStrings(storage, dtype: dtype, count: count)
        if let shape {
            if shape.isEmpty, elements.count == 1 { return elements[0] }
            if !shape.isEmpty, type?.elementCount == elements.count {
                return nest(elements[...], shape[...])
            }
        }
        if type?.isScalar == true, elements.count == 1 { return elements[0] }
        return "[" + elements.joined(separator: ", ") + "]"
    }

    static func nest(_ e: ArraySlice<String>, _ shape: ArraySlice<Int>) -> String {
        guard let n = shape.first else { return e.first ?? "" }
        let rest = shape.dropFirst()
        let inner = rest.reduce(1, *)
        var parts: [String] = []
        parts.reserveCapacity(n)
        var start = e.startIndex
        for _ in 0..<n {
            parts.append(nest(e[start..<(start + inner)], rest))
            start += inner
        }
        return "[" + parts.joined(separator: ", ") + "]"
    }

    static func inferredDType(_ s: TensorStorage) -> DType {
        switch s {
        case .floats: return .fp32
        case .doubles: return .fp64
        case .ints: return .int32
        case .longInts: return .int64
        case .bools: return .bool
        case .strings: return .string
        case .bytes: return .uint8
        }
    }

    static func storedElementCount(_ s: TensorStorage, dtype: DType) -> Int {
        if case let .bytes(b) = s, dtype.bitWidth > 0 { return b.count * 8 / dtype.bitWidth }
        return s.storedCount
    }

    /// Element spellings of an immediate tensor in row-major order.
    static func elementStrings(_ storage: TensorStorage, dtype: DType, count: Int) -> [String] {
        switch storage {
        case let .floats(v): return v.map { number(Double($0), dtype) }
        case let .doubles(v): return v.map { number($0, dtype) }
        case let .ints(v): return v.map { dtype.isFloat || dtype == .bool ? number(Double($0), dtype) : String($0) }
        case let .longInts(v): return v.map { dtype == .uint64 ? String(UInt64(bitPattern: $0)) : String($0) }
        case let .bools(v): return v.map { $0 ? "true" : "false" }
        case let .strings(v): return v.map(quote)
        case let .bytes(b):
            if dtype == .int64 || dtype == .uint64 {
                return b.withUnsafeBytes { raw in
                    (0..<min(count, raw.count / 8)).map { i in
                        let u = raw.loadUnaligned(fromByteOffset: 8 * i, as: UInt64.self)
                        return dtype == .uint64 ? String(u) : String(Int64(bitPattern: u))
                    }
                }
            }
            let decoded = b.withUnsafeBytes { ElementDecoding.doubles(raw: $0, dtype: dtype, count: count) }
            guard let decoded else { return b.map { String($0) } }
            return decoded.map { number($0, dtype) }
        }
    }

    static func number(_ v: Double, _ dtype: DType) -> String {
        if dtype.isFloat { return hexFloat(v) }
        if dtype == .bool { return v != 0 ? "true" : "false" }
        if v.isFinite, v == v.rounded(), abs(v) < 9.2e18 { return String(Int64(v)) }
        return hexFloat(v)
    }

    /// C `%a` spelling of a float: `0x1p-1` (0.5), `0x1p+0` (1.0), `0x1.8p+0` (1.5), `-0x1.4p+3`,
    /// `0x0p+0`, `inf`, `-inf`, `nan`. Subnormal doubles print normalized (`0x1p-1074`).
    public static func hexFloat(_ x: Double) -> String {
        if x.isNaN { return "nan" }
        if x.isInfinite { return x < 0 ? "-inf" : "inf" }
        let sign = x.sign == .minus ? "-" : ""
        if x == 0 { return sign + "0x0p+0" }
        let m = abs(x)
        let exponent = Int(m.exponent)
        var fraction = m.significand.significandBitPattern // 52 bits of the normalized significand
        var digits = ""
        if fraction != 0 {
            var n = 13
            while fraction & 0xF == 0 { fraction >>= 4; n -= 1 }
            let hex = String(fraction, radix: 16)
            digits = "." + String(repeating: "0", count: n - hex.count) + hex
        }
        return sign + "0x1" + digits + "p" + (exponent >= 0 ? "+" : "-") + String(abs(exponent))
    }

    /// A double-quoted string literal with `\"`, `\\`, `\n`, `\t`, `\r` and `\xNN` for other
    /// control characters; other characters (UTF-8) as they are.
    public static func quote(_ s: String) -> String { "\"" + literalEscaper.escape(s) + "\"" }

    static let literalEscaper = ScalarEscaper(["\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"]) {
        $0.value < 0x20 || $0.value == 0x7F ? ScalarEscaper.hexEscape($0) : nil
    }

    // MARK: - FlexibleShapeInformation

    /// The compiler's `FlexibleShapeInformation` function attribute for the flexible inputs of
    /// `interface` (facts §6.3), or nil when no input is flexible:
    /// `(("DefaultShapes", {{input, default}}), ("RangeDims", {{input, [[lo, hi], …]}}))` and/or
    /// `("EnumeratedShapes", {{key, {{input, shape}}}, …})`.
    ///
    /// The EnumeratedShapes keys are opaque hashes in Apple's output (derivation unknown); we use
    /// a stable 8-hex-digit FNV-1a hash of the entry's `input:shape` text instead, so keys will
    /// differ from Apple's. With several enumerated inputs one entry per combination is written
    /// (cartesian product, in file order) — an assumption, unverified against the compiler.
    public static func flexibleShapeInformation(_ interface: FunctionDescription) -> ConstValue? {
        var defaults: [(String, [Int])] = []
        var ranges: [(String, [SizeRange])] = []
        var enumerated: [(String, [[Int]])] = []
        for input in interface.inputs {
            guard case let .multiArray(a) = input.kind else { continue }
            let rank = a.rank
            guard (0..<rank).contains(where: { a.constraint(axis: $0) != nil }) else { continue }
            switch a.flexibility {
            case .none:
                continue
            case let .range(r):
                ranges.append((input.name, r))
                defaults.append((input.name, a.shape.isEmpty ? r.map(\.lower) : a.shape))
            case let .enumerated(shapes):
                enumerated.append((input.name, shapes))
                defaults.append((input.name, a.shape.isEmpty ? (shapes.first ?? []) : a.shape))
            }
        }
        if defaults.isEmpty { return nil }

        let string = MILType.scalar(.string)
        let shapeType = MILType.tensor(TensorType(.int32, [.unknown]))
        func shape(_ s: [Int]) -> ConstValue {
            ConstValue(type: shapeType, payload: .tensor(.ints(s.map { Int32(clamping: $0) })))
        }
        func str(_ s: String) -> ConstValue { .string(s) }

        var sectionTypes: [MILType] = []
        var sections: [ConstValue] = []

        let defaultsType = MILType.dict(key: string, value: shapeType)
        sectionTypes.append(.tuple([string, defaultsType]))
        sections.append(ConstValue(type: .tuple([string, defaultsType]), payload: .tuple([
            str("DefaultShapes"),
            ConstValue(type: defaultsType, payload: .dict(defaults.map { .init(key: str($0.0), value: shape($0.1)) })),
        ])))

        if !ranges.isEmpty {
            let pairType = MILType.tensor(.int32, [2])
            let listType = MILType.list(pairType, length: .unknown)
            let dictType = MILType.dict(key: string, value: listType)
            let entries = ranges.map { name, r in
                ConstValue.DictEntry(key: str(name), value: ConstValue(type: listType, payload: .list(r.map {
                    ConstValue(type: pairType, payload: .tensor(.ints([Int32(clamping: $0.lower), Int32(clamping: $0.upper ?? -1)])))
                })))
            }
            sectionTypes.append(.tuple([string, dictType]))
            sections.append(ConstValue(type: .tuple([string, dictType]), payload: .tuple([
                str("RangeDims"), ConstValue(type: dictType, payload: .dict(entries)),
            ])))
        }

        if !enumerated.isEmpty {
            let innerType = MILType.dict(key: string, value: shapeType)
            let dictType = MILType.dict(key: string, value: innerType)
            var combos: [[(String, [Int])]] = [[]]
            for (name, shapes) in enumerated {
                combos = combos.flatMap { c in shapes.map { c + [(name, $0)] } }
            }
            let entries = combos.map { combo -> ConstValue.DictEntry in
                let text = combo.map { "\($0.0):\($0.1.map(String.init).joined(separator: ","))" }.joined(separator: ";")
                return .init(key: str(fnv1a32Hex(text)), value: ConstValue(type: innerType, payload: .dict(combo.map {
                    .init(key: str($0.0), value: shape($0.1))
                })))
            }
            sectionTypes.append(.tuple([string, dictType]))
            sections.append(ConstValue(type: .tuple([string, dictType]), payload: .tuple([
                str("EnumeratedShapes"), ConstValue(type: dictType, payload: .dict(entries)),
            ])))
        }
        return ConstValue(type: .tuple(sectionTypes), payload: .tuple(sections))
    }

    /// 32-bit FNV-1a of the UTF-8 bytes, as 8 lowercase hex digits.
    static func fnv1a32Hex(_ s: String) -> String {
        var h: UInt32 = 0x811C_9DC5
        for b in s.utf8 {
            h ^= UInt32(b)
            h = h &* 0x0100_0193
        }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
