/// Parses MIL text — the `model.mil` of a compiled `.mlmodelc` — into the IR the protobuf
/// loader builds (`Program`, `Function`, `Block`, `Op`, `Value`, `ConstValue`).
///
/// Grammar (our reading of the text Apple's Core ML compiler writes — facts sheet §9, real
/// compiled files in public repositories, coremltools' tests that assert compiled text — and
/// of what `MILPrinter` writes; tokens as in `MILLexer`):
/// ```
/// program    = 'program' '(' number ')' attributes? '{' function* '}'
/// function   = 'func' NAME '<' OPSET '>' '(' params? ')' attributes? body ';'
/// params     = type NAME (',' type NAME)*
/// body       = '{' statement* '}' '->' '(' (NAME (',' NAME)*)? ')'
/// statement  = (outputs '=')? OPTYPE '(' args? ')' attributes? block* ';'
/// outputs    = type NAME (',' type NAME)*  |  '(' type NAME (',' type NAME)* ')'
/// block      = '(' params? ')' attributes? body                -- cond / while_loop bodies
/// args       = NAME '=' operands (',' NAME '=' operands)*
/// operands   = operand | '(' (operand (',' operand)*)? ')'    -- several: a variadic input
/// operand    = NAME | literal
/// attributes = '[' (NAME '=' literal (',' NAME '=' literal)*)? ']'
/// literal    = type '(' value ')'                               -- value read by the type:
///   tensor / scalar: element | '[' … ']' nested lists of elements | BLOBFILE
///   tuple<T…>: '(' value (',' value)* ')'    list<T, n>: '[' value, … ']'
///   dict<K, V>: '{' ('{' value ',' value '}' (',' …)*)? '}'
/// BLOBFILE   = 'BLOBFILE' '(' 'path' '=' literal ',' 'offset' '=' literal ')'
/// type       = DTYPE | 'tensor' '<' DTYPE ',' '[' (dim (',' dim)*)? ']' '>'
///            | 'state' '<' type '>' | 'list' '<' type ',' dim '>'
///            | 'tuple' '<' (type (',' type)*)? '>' | 'dict' '<' type ',' type '>'
/// dim        = integer | '?' | '...' | NAME (a symbolic dim, read as '?')
/// element    = number | 'true' | 'false' | 'inf' | 'nan' | string
/// ```
/// * `program(1.0)` and `program(1.3)` both give `Program.version` 1 (the proto's value);
///   `program(N.x)` gives N.
/// * Opset tags map to the proto's names (`ios18` → `CoreML8`, see `Opset`); an unknown tag is
///   kept as written.
/// * Scalars may be spelled `int32(0)` or `tensor<int32, []>(0)` (older compilers); both give
///   the same rank-0 type.
/// * Names must be defined before use, in an enclosing scope (nested blocks see the values of
///   the blocks around them); an op's outputs are defined after its nested blocks.
/// * `FlexibleShapeInformation` and other function attributes stay in `Function.attributes`;
///   `CompiledModelLoader` turns it into the model description.
/// * Immediate tensors get the storage field coremltools uses for their dtype
///   (`MILLiteralEncoding`).
///
/// Limits against hostile input: nesting of types, values and blocks at most `maxDepth` (64);
/// tensor rank at most `maxRank` (64); an immediate tensor's element count must match its
/// static shape; dims at most 2^41. Work is linear in the text length.
public enum MILTextParser {
    /// Deepest nesting of types, literal values and blocks accepted.
    public static let maxDepth = 64
    /// Highest tensor rank accepted.
    public static let maxRank = 64

    /// What parsing produced.
    public struct Result {
        /// The program; run `Verifier` on it (the loader does).
        public var program: Program
        /// The version exactly as the header writes it (`1.0`, `1.3`).
        public var headerVersion: String
        /// Weight files opened for `BLOBFILE` references, keyed by resolved path (empty when
        /// no model directory was given).
        public var weightFiles: [String: WeightFile]
    }

    /// Parses a whole `program(…) { … }` text.
    /// - Parameters:
    ///   - text: the MIL text (UTF-8).
    ///   - file: the name used in errors (e.g. `Foo.mlmodelc/model.mil`).
    ///   - modelDirectory: the folder `@model_path` stands for. When given, every `BLOBFILE`
    ///     is resolved: its weight file is memory-mapped and the record checked (sentinel,
    ///     dtype, size) as the package loader does. When nil, blob references stay unresolved.
    /// - Throws: `MILTextError` (file, line, column, caret excerpt) for any syntax error, an
    ///   undefined or twice-defined name, a literal that does not fit its type, or a blob that
    ///   cannot be resolved (the `ModelError` text is the message).
    public static func parse(_ text: String, file: String, modelDirectory: String? = nil) throws -> Result {
        try parse(bytes: Array(text.utf8), file: file, modelDirectory: modelDirectory)
    }

    /// `parse(_:file:modelDirectory:)` on the UTF-8 bytes of the text.
    public static func parse(bytes: [UInt8], file: String, modelDirectory: String? = nil) throws -> Result {
        var p = try MILParser(source: bytes, file: file, modelDirectory: modelDirectory)
        let program = try p.program()
        return Result(program: program, headerVersion: p.headerVersion, weightFiles: p.resolver?.weightFiles ?? [:])
    }

    /// Parses one typed literal such as `fp32(0x1p-1)`, `tensor<int32, [2]>([1, 1])` or
    /// `dict<string, string>({{"k", "v"}})` (the whole text must be the literal).
    /// - Throws: `MILTextError`.
    public static func parseLiteral(_ text: String, file: String = "<literal>") throws -> ConstValue {
        var p = try MILParser(source: Array(text.utf8), file: file, modelDirectory: nil)
        let v = try p.literal()
        try p.expectEnd()
        return v
    }

    /// Parses one type such as `tensor<fp16, [1, ?, 64]>` or `state<tensor<fp16, [2]>>`.
    /// - Throws: `MILTextError`.
    public static func parseType(_ text: String, file: String = "<type>") throws -> MILType {
        var p = try MILParser(source: Array(text.utf8), file: file, modelDirectory: nil)
        let t = try p.type()
        try p.expectEnd()
        return t
    }
}

/// The recursive-descent parser behind `MILTextParser` (one token of lookahead plus one peek).
struct MILParser {
    var lexer: MILLexer
    var token: MILToken
    var lookahead: MILToken?
    var depth = 0
    var headerVersion = ""
    /// Resolves and checks `BLOBFILE` references (the package loader's code).
    var resolver: ProtoDecoder?
    let file: String

    static let typeKeywords: Set<String> = Set(["tensor", "state", "list", "tuple", "dict"] + DType.allCases.map(\.rawValue))

    init(source: [UInt8], file: String, modelDirectory: String?) throws {
        lexer = MILLexer(source: source, file: file)
        self.file = file
        token = try lexer.next()
        if let modelDirectory { resolver = ProtoDecoder(specPath: file, modelDir: modelDirectory) }
    }

    // MARK: - tokens

    func error(_ message: String, at location: MILSourceLocation? = nil) -> MILTextError {
        lexer.error(message, at: location ?? token.location)
    }

    mutating func advance() throws {
        if let l = lookahead { token = l; lookahead = nil } else { token = try lexer.next() }
    }

    mutating func peek() throws -> MILToken {
        if lookahead == nil { lookahead = try lexer.next() }
        return lookahead!
    }

    mutating func expect(_ punct: String, _ what: String) throws {
        guard token.isPunct(punct) else { throw error("expected '\(punct)' \(what), found \(token.quoted)") }
        try advance()
    }

    mutating func expectKeyword(_ word: String, _ what: String) throws {
        guard token.isIdentifier(word) else { throw error("expected '\(word)' \(what), found \(token.quoted)") }
        try advance()
    }

    mutating func name(_ what: String) throws -> (String, MILSourceLocation) {
        guard token.kind == .identifier else { throw error("expected \(what), found \(token.quoted)") }
        let r = (token.text, token.location)
        try advance()
        return r
    }

    mutating func expectEnd() throws {
        guard token.kind == .endOfFile else { throw error("expected end of text, found \(token.quoted)") }
    }

    mutating func enter(_ what: String) throws {
        depth += 1
        guard depth <= MILTextParser.maxDepth else { throw error("\(what) nested deeper than \(MILTextParser.maxDepth)") }
    }

    mutating func leave() { depth -= 1 }

    // MARK: - program and functions

    mutating func program() throws -> Program {
        try expectKeyword("program", "at the start of MIL text")
        try expect("(", "after 'program'")
        guard token.kind == .number else { throw error("expected the program version (e.g. 1.3), found \(token.quoted)") }
        headerVersion = token.text
        guard let major = Int64(token.text.split(separator: ".", maxSplits: 1).first ?? ""), major >= 0 else {
            throw error("program version '\(token.text)' is not a number like 1.0 or 1.3")
        }
        try advance()
        try expect(")", "after the program version")
        let attrs = token.isPunct("[") ? try attributes("program") : []
        try expect("{", "to open the program")
        var functions: [Function] = []
        var names = Set<String>()
        while token.isIdentifier("func") {
            let loc = token.location
            let f = try function()
            guard names.insert(f.name).inserted else { throw error("function '\(f.name)' is defined twice", at: loc) }
            functions.append(f)
        }
        try expect("}", "(a 'func' or the end of the program)")
        try expectEnd()
        return Program(version: major, functions: functions, attributes: attrs)
    }

    mutating func function() throws -> Function {
        try expectKeyword("func", "")
        let (fname, _) = try name("a function name")
        try expect("<", "before the opset of function '\(fname)' (e.g. <ios18>)")
        let (tag, _) = try name("an opset tag such as ios18")
        try expect(">", "after the opset")
        let scope = Scope()
        let inputs = try parameters(scope: scope, what: "function '\(fname)' input")
        let attrs = token.isPunct("[") ? try attributes("function '\(fname)'") : []
        let block = try body(inputs: [], scope: scope, context: "function '\(fname)'", pushScope: false)
        try expect(";", "after the '-> (…)' of function '\(fname)'")
        return Function(name: fname, inputs: inputs, opset: Opset.proto(fromTag: tag), body: block, attributes: attrs)
    }

    /// `'(' (type NAME (',' type NAME)*)? ')'`, defining each in `scope`.
    mutating func parameters(scope: Scope, what: String) throws -> [Value] {
        try expect("(", "to open the \(what)s")
        var values: [Value] = []
        while !token.isPunct(")") {
            if !values.isEmpty { try expect(",", "between \(what)s") }
            let t = try type()
            let (n, loc) = try name("a \(what) name")
            let v = Value(name: n, type: t)
            guard scope.define(v) else { throw error("\(what) '\(n)' is already defined", at: loc) }
            values.append(v)
        }
        try advance()
        return values
    }

    /// `'{' statement* '}' '->' '(' names ')'`; block inputs are already defined in `scope`.
    mutating func body(inputs: [Value], scope: Scope, context: String, pushScope: Bool) throws -> Block {
        try expect("{", "to open the body of \(context)")
        var ops: [Op] = []
        while !token.isPunct("}") {
            guard token.kind != .endOfFile else { throw error("end of file inside the body of \(context) (missing '}')") }
            ops.append(try statement(scope: scope, context: context))
        }
        try advance()
        guard token.kind == .arrow else { throw error("expected '-> (outputs)' after the body of \(context), found \(token.quoted)") }
        try advance()
        try expect("(", "to open the outputs of \(context)")
        var outputs: [Value] = []
        while !token.isPunct(")") {
            if !outputs.isEmpty { try expect(",", "between outputs") }
            let (n, loc) = try name("an output name")
            guard let v = scope.lookup(n) else { throw error("\(context) returns '\(n)', which no op or input defines", at: loc) }
            outputs.append(v)
        }
        try advance()
        return Block(inputs: inputs, operations: ops, outputs: outputs)
    }

    // MARK: - statements

    mutating func statement(scope: Scope, context: String) throws -> Op {
        let start = token.location
        var outputDecls: [(MILType, String, MILSourceLocation)] = []
        if token.isPunct("(") {
            try advance()
            while !token.isPunct(")") {
                if !outputDecls.isEmpty { try expect(",", "between outputs") }
                let t = try type()
                let (n, loc) = try name("an output name")
                outputDecls.append((t, n, loc))
            }
            try advance()
            try expect("=", "after the outputs")
        } else if token.kind == .identifier, try peek().isPunct("("), !MILParser.typeKeywords.contains(token.text) {
            // an op without outputs, e.g. write_state(…)
        } else {
            repeat {
                if !outputDecls.isEmpty { try advance() }
                let t = try type()
                let (n, loc) = try name("an output name")
                outputDecls.append((t, n, loc))
            } while token.isPunct(",")
            try expect("=", "after the outputs (or ',' before another output)")
        }
        let (opType, _) = try name("an op type")
        let opName = outputDecls.first?.1 ?? opType
        let opContext = "\(context) op '\(opName)' (\(opType))"
        try expect("(", "to open the arguments of \(opType)")
        var inputs: [OpInput] = []
        try entries("argument", of: opType, between: "between the arguments of \(opType)", until: ")") { p, param in
            inputs.append(OpInput(name: param, operands: try p.operands(scope: scope, op: opType, param: param)))
        }
        let attrs = token.isPunct("[") ? try attributes(opContext) : []
        var blocks: [Block] = []
        while token.isPunct("(") {
            try enter("blocks")
            let blockScope = scope
            blockScope.push()
            let inputs = try parameters(scope: blockScope, what: "block input")
            let battrs = token.isPunct("[") ? try attributes("\(opContext) block") : []
            let b = try body(inputs: inputs, scope: blockScope, context: "\(opContext) block \(blocks.count)", pushScope: false)
            b.attributes = battrs
            blockScope.pop()
            leave()
            blocks.append(b)
        }
        try expect(";", "at the end of the \(opType) statement")
        var outputs: [Value] = []
        for (t, n, loc) in outputDecls {
            let v = Value(name: n, type: t)
            guard scope.define(v) else { throw error("output '\(n)' is already defined", at: loc) }
            outputs.append(v)
        }
        if opType == "const" {
            guard let val = attrs.first(where: { $0.name == "val" })?.value else { throw error("const without a 'val' attribute", at: start) }
            guard outputs.count == 1 else { throw error("const must have exactly one output, has \(outputs.count)", at: start) }
            _ = val
        }
        return Op(type: opType, inputs: inputs, outputs: outputs, blocks: blocks, attributes: attrs)
    }

    mutating func operands(scope: Scope, op: String, param: String) throws -> [Operand] {
        guard token.isPunct("(") else { return [try operand(scope: scope, op: op, param: param)] }
        try advance()
        var out: [Operand] = []
        while !token.isPunct(")") {
            if !out.isEmpty { try expect(",", "between the values of argument '\(param)'") }
            out.append(try operand(scope: scope, op: op, param: param))
        }
        try advance()
        return out
    }

    mutating func operand(scope: Scope, op: String, param: String) throws -> Operand {
        guard token.kind == .identifier else { throw error("expected a value name or a typed literal for argument '\(param)', found \(token.quoted)") }
        if MILParser.typeKeywords.contains(token.text), let next = try? peek(), next.isPunct("(") || next.isPunct("<") {
            return .constant(try literal())
        }
        let (n, loc) = try name("a value name")
        guard let v = scope.lookup(n) else { throw error("argument '\(param)' of \(op) refers to undefined value '\(n)'", at: loc) }
        if v.type.isState && !StateRules.mayTakeState(op: op, input: param) {
            throw error("argument '\(param)' of \(op) takes state '\(n)'; only read_state, write_state and coreml_update_state take states", at: loc)
        }
        return .value(v)
    }

    /// `name = …` entries separated by commas up to `close` (consumed), each name once: an op's
    /// arguments `(x = a, y = b)` and attribute lists `[name = string("y")]`. `value` reads what
    /// follows `=`.
    /// - Throws: `MILTextError` naming the `noun` ('argument', 'attribute') given twice, or the
    ///   token where a comma, name or `=` was expected.
    mutating func entries(_ noun: String, of owner: String, between: String, until close: String,
                          _ value: (inout MILParser, String) throws -> Void) throws {
        var seen = Set<String>()
        while !token.isPunct(close) {
            if !seen.isEmpty { try expect(",", between) }
            let (n, loc) = try name("an \(noun) name")
            guard seen.insert(n).inserted else { throw error("\(noun) '\(n)' of \(owner) given twice", at: loc) }
            try expect("=", "after \(noun) '\(n)'")
            try value(&self, n)
        }
        try advance()
    }

    mutating func attributes(_ context: String) throws -> [Attribute] {
        try expect("[", "")
        var attrs: [Attribute] = []
        try entries("attribute", of: context, between: "between attributes of \(context)", until: "]") { p, n in
            attrs.append(Attribute(name: n, value: try p.literal()))
        }
        return attrs
    }

    // MARK: - types

    /// The two parameters of the type `word<first, second>` (`word` is the current token):
    /// `tensor<fp32, [2]>`, `list<T, N>`, `dict<K, V>`; `firstRole` names the first parameter in
    /// the error when no `,` follows it.
    mutating func parameters<A, B>(of word: String, _ firstRole: String, _ first: (inout MILParser) throws -> A,
                                   _ second: (inout MILParser) throws -> B) throws -> (A, B) {
        try advance()
        try expect("<", "after '\(word)'")
        let a = try first(&self)
        try expect(",", "after the \(word) \(firstRole)")
        let b = try second(&self)
        try expect(">", "to close the \(word) type")
        return (a, b)
    }

    mutating func type() throws -> MILType {
        try enter("types")
        defer { leave() }
        guard token.kind == .identifier else { throw error("expected a type (e.g. tensor<fp32, [2]>), found \(token.quoted)") }
        let word = token.text
        switch word {
        case "tensor":
            let (dtype, shape) = try parameters(of: word, "dtype", { try $0.dtype() }, { try $0.dims() })
            return .tensor(TensorType(dtype, shape))
        case "state":
            try advance()
            try expect("<", "after 'state'")
            let loc = token.location
            let inner = try type()
            guard inner.tensorType != nil else { throw error("state must wrap a tensor, wraps \(inner)", at: loc) }
            try expect(">", "to close the state type")
            return .state(inner)
        case "list":
            let (elem, len) = try parameters(of: word, "element type", { try $0.type() }, { try $0.dim() })
            return .list(elem, length: len)
        case "tuple":
            try advance()
            try expect("<", "after 'tuple'")
            var types: [MILType] = []
            while !token.isPunct(">") {
                if !types.isEmpty { try expect(",", "between tuple element types") }
                types.append(try type())
            }
            try advance()
            return .tuple(types)
        case "dict":
            let (k, v) = try parameters(of: word, "key type", { try $0.type() }, { try $0.type() })
            return .dict(key: k, value: v)
        default:
            return .scalar(try dtype())
        }
    }

    mutating func dtype() throws -> DType {
        guard token.kind == .identifier, let d = DType(rawValue: token.text) else {
            throw error("expected a dtype (\(DType.allCases.map(\.rawValue).joined(separator: ", "))), found \(token.quoted)")
        }
        try advance()
        return d
    }

    mutating func dims() throws -> [Dim] {
        try expect("[", "to open the shape")
        var out: [Dim] = []
        while !token.isPunct("]") {
            if !out.isEmpty { try expect(",", "between dimensions") }
            guard out.count < MILTextParser.maxRank else { throw error("tensor rank above \(MILTextParser.maxRank)") }
            out.append(try dim())
        }
        try advance()
        return out
    }

    /// Largest fixed dimension accepted (as the protobuf loader).
    static let maxDim = Int(Int32.max) * 1024

    mutating func dim() throws -> Dim {
        if token.isPunct("?") { try advance(); return .unknown }
        if token.kind == .ellipsis { try advance(); return .variadic }
        if token.kind == .identifier { try advance(); return .unknown }
        guard token.kind == .number, let v = Int(token.text), v >= 0, v <= MILParser.maxDim else {
            throw error("expected a dimension (a size, '?' or '...'), found \(token.quoted)")
        }
        try advance()
        return .fixed(v)
    }

    // MARK: - literals

    mutating func literal() throws -> ConstValue {
        try enter("values")
        defer { leave() }
        let t = try type()
        try expect("(", "after the literal's type \(t)")
        let payload = try value(of: t)
        try expect(")", "to close the \(t) literal")
        return ConstValue(type: t, payload: payload)
    }

    /// A value read by its type (see the grammar).
    mutating func value(of t: MILType) throws -> ConstValue.Payload {
        try enter("values")
        defer { leave() }
        switch t {
        case let .tensor(tt):
            if token.isIdentifier("BLOBFILE") { return .blob(try blobFile(tt)) }
            if token.isPunct("<") {
                throw error("elided tensor payload ('<N values>' as 'forge-ir dump' prints it): the literal's values are not in the text")
            }
            let start = token.location
            var elements: [MILToken] = []
            try elementList(into: &elements)
            let storage: TensorStorage
            do {
                storage = try MILLiteralEncoding.storage(elements, dtype: tt.dtype)
            } catch let f as MILLiteralEncoding.Failure {
                throw error(f.message, at: f.location)
            }
            if let n = tt.elementCount, n != elements.count {
                throw error("\(tt) literal has \(elements.count) element\(elements.count == 1 ? "" : "s"), its shape needs \(n)", at: start)
            }
            return .tensor(storage)
        case let .tuple(types):
            try expect("(", "to open a \(t) value")
            var items: [ConstValue] = []
            while !token.isPunct(")") {
                if !items.isEmpty { try expect(",", "between tuple values") }
                guard items.count < types.count else { throw error("\(t) has \(types.count) element\(types.count == 1 ? "" : "s"); found more") }
                let et = types[items.count]
                items.append(ConstValue(type: et, payload: try value(of: et)))
            }
            guard items.count == types.count else { throw error("\(t) needs \(types.count) element\(types.count == 1 ? "" : "s"), found \(items.count)") }
            try advance()
            return .tuple(items)
        case let .list(et, length):
            try expect("[", "to open a \(t) value")
            var items: [ConstValue] = []
            let start = token.location
            while !token.isPunct("]") {
                if !items.isEmpty { try expect(",", "between list values") }
                items.append(ConstValue(type: et, payload: try value(of: et)))
            }
            try advance()
            if let n = length.fixedValue, n != items.count { throw error("\(t) holds \(items.count) values, its length is \(n)", at: start) }
            return .list(items)
        case let .dict(kt, vt):
            try expect("{", "to open a \(t) value")
            var entries: [ConstValue.DictEntry] = []
            while !token.isPunct("}") {
                if !entries.isEmpty { try expect(",", "between dict entries") }
                try expect("{", "to open a dict entry {key, value}")
                let k = ConstValue(type: kt, payload: try value(of: kt))
                try expect(",", "between a dict key and its value")
                let v = ConstValue(type: vt, payload: try value(of: vt))
                try expect("}", "to close a dict entry")
                entries.append(.init(key: k, value: v))
            }
            try advance()
            return .dict(entries)
        case .state:
            throw error("a state<…> value cannot be written as a literal")
        }
    }

    /// One element or a bracketed (nested) list of elements, flattened in row-major order.
    mutating func elementList(into out: inout [MILToken]) throws {
        if token.isPunct("[") {
            try enter("tensor literal brackets")
            defer { leave() }
            try advance()
            var first = true
            while !token.isPunct("]") {
                if !first { try expect(",", "between tensor elements") }
                first = false
                try elementList(into: &out)
            }
            try advance()
            return
        }
        switch token.kind {
        case .number, .string, .identifier:
            out.append(token)
            try advance()
        default:
            throw error("expected a tensor element or '[', found \(token.quoted)")
        }
    }

    /// `BLOBFILE(path = string("…"), offset = uint64(N))`, resolved when a model folder is known.
    mutating func blobFile(_ t: TensorType) throws -> BlobRef {
        let loc = token.location
        try advance()
        try expect("(", "after BLOBFILE")
        var path: String?
        var offset: UInt64?
        while !token.isPunct(")") {
            if path != nil || offset != nil { try expect(",", "between BLOBFILE fields") }
            let (field, floc) = try name("'path' or 'offset'")
            try expect("=", "after '\(field)'")
            let vloc = token.location
            let v = try literal()
            switch field {
            case "path":
                guard path == nil else { throw error("BLOBFILE path given twice", at: floc) }
                guard let s = v.stringValue else { throw error("BLOBFILE path must be a string, is \(v.type)", at: vloc) }
                path = s
            case "offset":
                guard offset == nil else { throw error("BLOBFILE offset given twice", at: floc) }
                guard v.type.tensorType?.isScalar == true, v.type.tensorType?.dtype.isInteger == true,
                      case let .tensor(storage) = v.payload else { throw error("BLOBFILE offset must be an integer scalar such as uint64(64), is \(v.type)", at: vloc) }
                switch storage {
                case let .longInts(x) where x.count == 1: offset = UInt64(bitPattern: x[0])
                case let .ints(x) where x.count == 1 && x[0] >= 0: offset = UInt64(x[0])
                default:
                    guard let d = v.ints(), d.count == 1, d[0] >= 0 else { throw error("BLOBFILE offset must be a non-negative integer", at: vloc) }
                    offset = UInt64(d[0])
                }
            default:
                throw error("unknown BLOBFILE field '\(field)' (expected path and offset)", at: floc)
            }
        }
        try advance()
        guard let path, let offset else { throw error("BLOBFILE needs both path and offset", at: loc) }
        guard t.dtype.blobCode != nil else { throw error("a \(t.dtype.rawValue) tensor cannot be stored in a weight blob", at: loc) }
        guard resolver != nil else { return BlobRef(fileName: path, offset: offset) }
        do {
            return try resolver!.blob(fileName: path, offset: offset, type: .tensor(t), "BLOBFILE")
        } catch let e as ModelError {
            throw error(e.description, at: loc)
        }
    }
}
