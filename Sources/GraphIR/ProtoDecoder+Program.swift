import CoreMLProto

/// Names visible at a point of a program: a stack of block scopes.
final class Scope {
    private var frames: [[String: Value]] = [[:]]
    /// Names defined anywhere later in the current frames (to tell "used before defined" from "undefined").
    var pendingDefinitions: [Set<String>] = [[]]

    func push() { frames.append([:]); pendingDefinitions.append([]) }
    func pop() { frames.removeLast(); pendingDefinitions.removeLast() }

    func lookup(_ name: String) -> Value? {
        for f in frames.reversed() { if let v = f[name] { return v } }
        return nil
    }

    func isPending(_ name: String) -> Bool {
        pendingDefinitions.contains { $0.contains(name) }
    }

    /// Defines `value`; returns false if the name is already visible.
    func define(_ value: Value) -> Bool {
        if lookup(value.name) != nil { return false }
        frames[frames.count - 1][value.name] = value
        pendingDefinitions[pendingDefinitions.count - 1].remove(value.name)
        return true
    }
}

extension ProtoDecoder {
    // MARK: - program

    mutating func program(_ p: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program>, description: ModelDescription) throws -> Program {
        let prog = p.pointee
        let attrs = try attributes(ProtoDecoder.array(prog.attributes, prog.n_attributes).map { ($0.pointee.key, $0.pointee.value) }, "program attribute")
        var functions: [Function] = []
        var seen = Set<String>()
        for entry in ProtoDecoder.array(prog.functions, prog.n_functions) {
            let name = ProtoDecoder.str(entry.pointee.key)
            guard seen.insert(name).inserted else { throw invalid("function '\(name)'", "defined twice") }
            guard let f = entry.pointee.value else { throw invalid("function '\(name)'", "has no body") }
            functions.append(try function(f, name: name, interface: description.interface(of: name)))
        }
        return Program(version: prog.version, functions: functions, docString: ProtoDecoder.str(prog.docstring), attributes: attrs)
    }

    mutating func function(_ p: UnsafeMutablePointer<CoreML__Specification__MILSpec__Function>, name: String, interface: FunctionDescription) throws -> Function {
        let f = p.pointee
        let context = "function '\(name)'"
        let opset = ProtoDecoder.str(f.opset)
        let scope = Scope()
        var inputs: [Value] = []
        for nvt in ProtoDecoder.array(f.inputs, f.n_inputs) {
            let inputName = ProtoDecoder.str(nvt.pointee.name)
            var type = try valueType(nvt.pointee.type, "\(context) input '\(inputName)'", depth: 0)
            type = Self.bindFlexibleDims(type, input: inputName, interface: interface)
            let v = Value(name: inputName, type: type)
            guard scope.define(v) else { throw invalid("\(context) input '\(inputName)'", "defined twice") }
            inputs.append(v)
        }
        var body: Block?
        var others: [(opset: String, block: Block)] = []
        for entry in ProtoDecoder.array(f.block_specializations, f.n_block_specializations) {
            let key = ProtoDecoder.str(entry.pointee.key)
            guard let b = entry.pointee.value else { throw invalid("\(context) block '\(key)'", "is empty") }
            let block = try self.block(b, scope: scope, context: context, depth: 0)
            if key == opset && body == nil { body = block } else { others.append((key, block)) }
        }
        guard let mainBody = body ?? others.first?.block else {
            throw invalid(context, "has no block for its opset '\(opset)'")
        }
        if body == nil { others.removeFirst() }
        let attrs = try attributes(ProtoDecoder.array(f.attributes, f.n_attributes).map { ($0.pointee.key, $0.pointee.value) }, "\(context) attribute")
        return Function(name: name, inputs: inputs, opset: opset, body: mainBody, otherSpecializations: others, attributes: attrs)
    }

    /// Replaces unknown dimensions of a flexible input by symbols carrying the description's
    /// RangeDim bounds or EnumeratedShapes values.
    static func bindFlexibleDims(_ type: MILType, input: String, interface: FunctionDescription) -> MILType {
        guard case let .tensor(t) = type, t.shape.contains(where: { $0 == .unknown }) else { return type }
        let feature = interface.inputs.first { $0.name == input }?.array
        var shape = t.shape
        for (axis, d) in shape.enumerated() where d == .unknown {
            let constraint = feature?.constraint(axis: axis) ?? .unconstrained
            shape[axis] = .symbol(DimSymbol(name: "\(input)_\(axis)", constraint: constraint))
        }
        return .tensor(TensorType(t.dtype, shape))
    }

    mutating func block(_ p: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block>, scope: Scope, context: String, depth: Int) throws -> Block {
        guard depth < maxDepth else { throw invalid(context, "blocks nested deeper than \(maxDepth)") }
        let b = p.pointee
        scope.push()
        defer { scope.pop() }
        var inputs: [Value] = []
        for nvt in ProtoDecoder.array(b.inputs, b.n_inputs) {
            let n = ProtoDecoder.str(nvt.pointee.name)
            let v = Value(name: n, type: try valueType(nvt.pointee.type, "\(context) block input '\(n)'", depth: 0))
            guard scope.define(v) else { throw invalid("\(context) block input '\(n)'", "name already defined") }
            inputs.append(v)
        }
        let pops = ProtoDecoder.array(b.operations, b.n_operations)
        // Every name an op of this block defines, to tell a forward reference (a cycle or
        // misordered ops) from a name that is never defined.
        var later = Set<String>()
        for op in pops {
            for o in ProtoDecoder.array(op.pointee.outputs, op.pointee.n_outputs) { later.insert(ProtoDecoder.str(o.pointee.name)) }
        }
        scope.pendingDefinitions[scope.pendingDefinitions.count - 1] = later
        var ops: [Op] = []
        ops.reserveCapacity(pops.count)
        for (index, pop) in pops.enumerated() {
            ops.append(try operation(pop, index: index, scope: scope, context: context, depth: depth))
        }
        var outputs: [Value] = []
        for i in 0..<b.n_outputs {
            let n = ProtoDecoder.str(b.outputs?[i])
            guard let v = scope.lookup(n) else {
                throw invalid("\(context) block outputs", "returns '\(n)', which no op or input defines")
            }
            outputs.append(v)
        }
        let attrs = try attributes(ProtoDecoder.array(b.attributes, b.n_attributes).map { ($0.pointee.key, $0.pointee.value) }, "\(context) block attribute")
        return Block(inputs: inputs, operations: ops, outputs: outputs, attributes: attrs)
    }

    mutating func operation(_ p: UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation>, index: Int, scope: Scope, context: String, depth: Int) throws -> Op {
        let o = p.pointee
        let type = ProtoDecoder.str(o.type)
        let pattrs = ProtoDecoder.array(o.attributes, o.n_attributes)
        let opName = pattrs.first { ProtoDecoder.str($0.pointee.key) == "name" }
            .flatMap { e -> String? in
                guard let v = e.pointee.value, let iv = v.pointee.immediatevalue, let t = iv.pointee.tensor,
                      t.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS,
                      let s = t.pointee.strings, s.pointee.n_values == 1 else { return nil }
                return ProtoDecoder.str(s.pointee.values[0])
            }
            ?? ProtoDecoder.array(o.outputs, o.n_outputs).first.map { ProtoDecoder.str($0.pointee.name) }
            ?? "#\(index)"
        let opContext = "\(context) op '\(opName)' (\(type))"
        guard !type.isEmpty else { throw invalid(opContext, "has no op type") }
        let attrs = try attributes(pattrs.map { ($0.pointee.key, $0.pointee.value) }, "\(opContext) attribute")
        var inputs: [OpInput] = []
        for entry in ProtoDecoder.array(o.inputs, o.n_inputs) {
            let param = ProtoDecoder.str(entry.pointee.key)
            guard !inputs.contains(where: { $0.name == param }) else { throw invalid(opContext, "input '\(param)' given twice") }
            var operands: [Operand] = []
            if let arg = entry.pointee.value {
                for binding in ProtoDecoder.array(arg.pointee.arguments, arg.pointee.n_arguments) {
                    switch binding.pointee.binding_case {
                    case CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME:
                        let n = ProtoDecoder.str(binding.pointee.name)
                        guard let v = scope.lookup(n) else {
                            if scope.isPending(n) {
                                throw invalid(opContext, "input '\(param)' uses '\(n)' before its definition (a cycle or misordered ops)")
                            }
                            throw invalid(opContext, "input '\(param)' refers to undefined value '\(n)'")
                        }
                        if v.type.isState && !StateRules.mayTakeState(op: type, input: param) {
                            throw invalid(opContext, "input '\(param)' takes state '\(n)'; only read_state, write_state and coreml_update_state take states")
                        }
                        operands.append(.value(v))
                    case CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE:
                        operands.append(.constant(try value(binding.pointee.value, "\(opContext) input '\(param)'", depth: 0)))
                    default:
                        throw invalid(opContext, "input '\(param)' has an empty binding")
                    }
                }
            }
            inputs.append(OpInput(name: param, operands: operands))
        }
        var blocks: [Block] = []
        for (i, b) in ProtoDecoder.array(o.blocks, o.n_blocks).enumerated() {
            blocks.append(try block(b, scope: scope, context: "\(opContext) block \(i)", depth: depth + 1))
        }
        var outputs: [Value] = []
        for nvt in ProtoDecoder.array(o.outputs, o.n_outputs) {
            let n = ProtoDecoder.str(nvt.pointee.name)
            guard !n.isEmpty else { throw invalid(opContext, "has an output without a name") }
            let v = Value(name: n, type: try valueType(nvt.pointee.type, "\(opContext) output '\(n)'", depth: 0))
            guard scope.define(v) else { throw invalid(opContext, "output '\(n)' is already defined") }
            outputs.append(v)
        }
        if type == "const" {
            guard let val = attrs.first(where: { $0.name == "val" })?.value else { throw invalid(opContext, "const without a 'val' attribute") }
            guard outputs.count == 1 else { throw invalid(opContext, "const must have exactly one output, has \(outputs.count)") }
            guard val.type == outputs[0].type || !Self.strictConstTypes else {
                throw invalid(opContext, "val has type \(val.type), output is \(outputs[0].type)")
            }
        }
        return Op(type: type, inputs: inputs, outputs: outputs, blocks: blocks, attributes: attrs)
    }

    static let strictConstTypes = false

    // MARK: - attributes, types, values

    mutating func attributes(_ entries: [(UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<PValue>?)], _ context: String) throws -> [Attribute] {
        var out: [Attribute] = []
        out.reserveCapacity(entries.count)
        for (k, v) in entries {
            let key = ProtoDecoder.str(k)
            guard let v else { throw invalid("\(context) '\(key)'", "has no value") }
            out.append(Attribute(name: key, value: try value(v, "\(context) '\(key)'", depth: 0)))
        }
        return out
    }

    func dimension(_ p: UnsafeMutablePointer<CoreML__Specification__MILSpec__Dimension>, _ context: String) throws -> Dim {
        switch p.pointee.dimension_case {
        case CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT:
            let size = p.pointee.constant?.pointee.size ?? 0
            guard size <= UInt64(Int32.max) * 1024 else { throw invalid(context, "dimension \(size) is implausibly large") }
            return .fixed(Int(size))
        case CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_UNKNOWN:
            return p.pointee.unknown?.pointee.variadic != 0 ? .variadic : .unknown
        default:
            throw invalid(context, "dimension with neither a constant nor an unknown size")
        }
    }

    func valueType(_ p: UnsafeMutablePointer<PValueType>?, _ context: String, depth: Int) throws -> MILType {
        guard let p else { throw invalid(context, "has no type") }
        guard depth < maxDepth else { throw invalid(context, "type nested deeper than \(maxDepth)") }
        let t = p.pointee
        switch t.type_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE:
            guard let tt = t.tensortype?.pointee else { throw invalid(context, "empty tensor type") }
            let code = Int32(bitPattern: tt.datatype.rawValue)
            guard let dtype = DType(protoCode: code) else {
                throw ModelError.unknownDType(path: specPath, context: context, code: code)
            }
            let dims = try ProtoDecoder.array(tt.dimensions, tt.n_dimensions).map { try dimension($0, context) }
            guard tt.rank == Int64(dims.count) || dims.contains(.variadic) else {
                throw invalid(context, "tensor rank \(tt.rank) but \(dims.count) dimensions")
            }
            // Every element count and byte size downstream (printer, summary, constant
            // conversion, folding, kernels) may then be computed without overflow.
            let fixed = dims.compactMap(\.fixedValue)
            guard CheckedSize.byteCount(shape: fixed, dtype: dtype) != nil else {
                throw ModelError.sizeOverflow(path: specPath, context: context,
                                              reason: "\(TensorType(dtype, dims)) has an element count or byte size that overflows (limit \(CheckedSize.maxBytes) bytes)")
            }
            return .tensor(TensorType(dtype, dims))
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE:
            let inner = try valueType(t.statetype?.pointee.wrappedtype, context, depth: depth + 1)
            guard inner.tensorType != nil else { throw invalid(context, "state must wrap a tensor, wraps \(inner)") }
            return .state(inner)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_LIST_TYPE:
            guard let l = t.listtype?.pointee else { throw invalid(context, "empty list type") }
            let elem = try valueType(l.type, context, depth: depth + 1)
            let len = try l.length.map { try dimension($0, context) } ?? .unknown
            return .list(elem, length: len)
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TUPLE_TYPE:
            guard let tu = t.tupletype?.pointee else { throw invalid(context, "empty tuple type") }
            return .tuple(try ProtoDecoder.array(tu.types, tu.n_types).map { try valueType($0, context, depth: depth + 1) })
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_DICTIONARY_TYPE:
            guard let d = t.dictionarytype?.pointee else { throw invalid(context, "empty dict type") }
            return .dict(key: try valueType(d.keytype, context, depth: depth + 1), value: try valueType(d.valuetype, context, depth: depth + 1))
        default:
            throw invalid(context, "value type with no kind set")
        }
    }

    mutating func value(_ p: UnsafeMutablePointer<PValue>?, _ context: String, depth: Int) throws -> ConstValue {
        guard let p else { throw invalid(context, "missing value") }
        guard depth < maxDepth else { throw invalid(context, "value nested deeper than \(maxDepth)") }
        let v = p.pointee
        let type = try valueType(v.type, context, depth: 0)
        let doc = ProtoDecoder.str(v.docstring)
        switch v.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE:
            guard let iv = v.immediatevalue?.pointee else { throw invalid(context, "empty immediate value") }
            switch iv.value_case {
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR:
                guard let tv = iv.tensor else { throw invalid(context, "empty tensor value") }
                let storage = try tensorStorage(tv, context)
                try checkImmediate(storage, type: type, context)
                return ConstValue(type: type, payload: .tensor(storage), docString: doc)
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TUPLE:
                let vals = ProtoDecoder.array(iv.tuple?.pointee.values, iv.tuple?.pointee.n_values ?? 0)
                return ConstValue(type: type, payload: .tuple(try vals.map { try value($0, context, depth: depth + 1) }), docString: doc)
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_LIST:
                let vals = ProtoDecoder.array(iv.list?.pointee.values, iv.list?.pointee.n_values ?? 0)
                return ConstValue(type: type, payload: .list(try vals.map { try value($0, context, depth: depth + 1) }), docString: doc)
            case CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_DICTIONARY:
                let pairs = ProtoDecoder.array(iv.dictionary?.pointee.values, iv.dictionary?.pointee.n_values ?? 0)
                let entries = try pairs.map {
                    ConstValue.DictEntry(key: try value($0.pointee.key, context, depth: depth + 1),
                                         value: try value($0.pointee.value, context, depth: depth + 1))
                }
                return ConstValue(type: type, payload: .dict(entries), docString: doc)
            default:
                throw invalid(context, "immediate value with no kind set")
            }
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE:
            guard let bv = v.blobfilevalue?.pointee else { throw invalid(context, "empty blob reference") }
            return ConstValue(type: type, payload: .blob(try blob(fileName: ProtoDecoder.str(bv.filename), offset: bv.offset, type: type, context)), docString: doc)
        default:
            throw invalid(context, "value with neither an immediate value nor a blob reference")
        }
    }

    func tensorStorage(_ p: UnsafeMutablePointer<CoreML__Specification__MILSpec__TensorValue>, _ context: String) throws -> TensorStorage {
        let t = p.pointee
        switch t.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS:
            return .floats(ProtoDecoder.scalars(t.floats?.pointee.values, t.floats?.pointee.n_values ?? 0))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_DOUBLES:
            return .doubles(ProtoDecoder.scalars(t.doubles?.pointee.values, t.doubles?.pointee.n_values ?? 0))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS:
            return .ints(ProtoDecoder.scalars(t.ints?.pointee.values, t.ints?.pointee.n_values ?? 0))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_LONG_INTS:
            return .longInts(ProtoDecoder.scalars(t.longints?.pointee.values, t.longints?.pointee.n_values ?? 0))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS:
            return .bools(ProtoDecoder.scalars(t.bools?.pointee.values, t.bools?.pointee.n_values ?? 0).map { $0 != 0 })
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS:
            let n = t.strings?.pointee.n_values ?? 0
            return .strings((0..<n).map { ProtoDecoder.str(t.strings?.pointee.values[$0]) })
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES:
            guard let b = t.bytes?.pointee.values, b.len > 0, let data = b.data else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: data, count: b.len)))
        default:
            throw invalid(context, "tensor value with no data field set")
        }
    }

    /// An immediate tensor must hold exactly as many elements as its (static) type says.
    func checkImmediate(_ s: TensorStorage, type: MILType, _ context: String) throws {
        guard let t = type.tensorType else { throw invalid(context, "tensor data for a value of type \(type)") }
        guard let n = t.elementCount else { return }
        let ok: Bool
        switch s {
        case .bytes(let b): ok = b.count == t.dtype.byteCount(elements: n) || (t.dtype == .bool && b.count == n)
        default: ok = s.storedCount == n
        }
        guard ok else {
            throw invalid(context, "immediate \(t) holds \(s.storedCount) entries, expected \(n) elements")
        }
    }

    mutating func blob(fileName: String, offset: UInt64, type: MILType, _ context: String) throws -> BlobRef {
        guard let t = type.tensorType else { throw invalid(context, "blob value of non-tensor type \(type)") }
        let path = try resolve(fileName, context)
        let file: WeightFile
        if let f = weightFiles[path] { file = f } else {
            do { file = try WeightFile(path: path) } catch ModelError.missingWeightFile {
                throw ModelError.missingWeightFile(path: path)
            }
            weightFiles[path] = file
        }
        let record = try file.record(at: offset)
        // The 64-byte file header holds the blob count; no record or payload may overlap it,
        // and a payload may not overlap its own record.
        guard offset >= 64, record.dataOffset >= 64 else {
            throw ModelError.badBlob(path: path, offset: offset, reason: "\(context): record or payload (at \(record.dataOffset)) overlaps the 64-byte weight file header")
        }
        guard record.dataOffset >= offset + 64 || record.dataOffset + record.sizeInBytes <= offset else {
            throw ModelError.badBlob(path: path, offset: offset, reason: "\(context): payload at \(record.dataOffset) overlaps its own metadata record")
        }
        referencedRecords[path, default: []].insert(offset)
        if referencedRecords[path]!.count > Int(file.headerCount) {
            throw ModelError.badWeightFile(path: path, reason: "the header declares \(file.headerCount) blobs, the model references more (\(context) at offset \(offset))")
        }
        guard let code = t.dtype.blobCode else {
            throw ModelError.badBlob(path: path, offset: offset, reason: "\(context): dtype \(t.dtype) cannot be stored in a blob")
        }
        guard record.dtypeCode == code else {
            let got = DType(blobCode: record.dtypeCode)?.rawValue ?? "code \(record.dtypeCode)"
            throw ModelError.badBlob(path: path, offset: offset, reason: "\(context): record holds \(got), value is \(t)")
        }
        if let n = t.elementCount {
            let expected = UInt64(t.dtype.byteCount(elements: n))
            guard record.sizeInBytes == expected else {
                throw ModelError.badBlob(path: path, offset: offset, reason: "\(context): record holds \(record.sizeInBytes) bytes, \(t) needs \(expected)")
            }
        }
        return BlobRef(fileName: fileName, offset: offset, file: file, record: record)
    }

    /// `@model_path/weights/weight.bin` → `<modelDir>/weights/weight.bin`.
    /// - Throws: `ModelError.badBlob` for an absolute path or one with a `..` component: a
    ///   model's weights live inside its package (next to its `.mlmodel`).
    func resolve(_ fileName: String, _ context: String) throws -> String {
        let rel = fileName.hasPrefix("@model_path/") ? String(fileName.dropFirst("@model_path/".count)) : fileName
        guard !rel.hasPrefix("/"), !rel.split(separator: "/").contains(".."), !rel.isEmpty else {
            throw ModelError.badBlob(path: fileName, offset: 0, reason: "\(context): weight path leaves the model's folder (expected @model_path/weights/…)")
        }
        return modelDir + "/" + rel
    }
}

/// Which op inputs may take a `state<…>` value.
public enum StateRules {
    public static func mayTakeState(op: String, input: String) -> Bool {
        switch (op, input) {
        case ("read_state", "input"), ("write_state", "input"), ("coreml_update_state", "state"): return true
        default: return false
        }
    }
}
