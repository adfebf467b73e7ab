#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CoreMLProto

// IR → protobuf-c structs → bytes.
//
// Every message, array and string is allocated with malloc by a `ProtoArena` that frees all
// of it when the arena goes away, so the C tree never points into Swift-owned memory and
// nothing outlives one `serialize` call.

fileprivate typealias PModel = CoreML__Specification__Model
fileprivate typealias PModelDescription = CoreML__Specification__ModelDescription
fileprivate typealias PFunctionDescription = CoreML__Specification__FunctionDescription
fileprivate typealias PFeatureDescription = CoreML__Specification__FeatureDescription
fileprivate typealias PFeatureType = CoreML__Specification__FeatureType
fileprivate typealias PArrayFeatureType = CoreML__Specification__ArrayFeatureType
fileprivate typealias PSizeRange = CoreML__Specification__SizeRange
fileprivate typealias PMetadata = CoreML__Specification__Metadata
fileprivate typealias PUserDefinedEntry = CoreML__Specification__Metadata__UserDefinedEntry

fileprivate typealias PProgram = CoreML__Specification__MILSpec__Program
fileprivate typealias PFunction = CoreML__Specification__MILSpec__Function
fileprivate typealias PBlock = CoreML__Specification__MILSpec__Block
fileprivate typealias POperation = CoreML__Specification__MILSpec__Operation
fileprivate typealias PArgument = CoreML__Specification__MILSpec__Argument
fileprivate typealias PBinding = CoreML__Specification__MILSpec__Argument__Binding
fileprivate typealias PNamedValueType = CoreML__Specification__MILSpec__NamedValueType
fileprivate typealias PValueType = CoreML__Specification__MILSpec__ValueType
fileprivate typealias PTensorType = CoreML__Specification__MILSpec__TensorType
fileprivate typealias PDimension = CoreML__Specification__MILSpec__Dimension
fileprivate typealias PValue = CoreML__Specification__MILSpec__Value
fileprivate typealias PTensorValue = CoreML__Specification__MILSpec__TensorValue

/// An error while converting the IR to protobuf (reported as `ModelError.writeFailed`).
struct WriterFailure: Error, CustomStringConvertible {
    var reason: String
    init(_ reason: String) { self.reason = reason }
    var description: String { reason }
}

/// Owns every malloc'd block of one protobuf-c message tree; frees them all on deinit.
final class ProtoArena {
    private var blocks: [UnsafeMutableRawPointer] = []
    private var emptyString: UnsafeMutablePointer<CChar>?

    init() {}

    deinit {
        for p in blocks { free(p) }
    }

    private func allocate(_ bytes: Int) -> UnsafeMutableRawPointer {
        guard let p = calloc(1, max(bytes, 1)) else { fatalError("forge-ir: out of memory (\(bytes) bytes)") }
        blocks.append(p)
        return p
    }

    /// A zeroed message initialized with its protobuf-c `*__init` function.
    func message<T>(_ initialize: (UnsafeMutablePointer<T>?) -> Void) -> UnsafeMutablePointer<T> {
        let p = allocate(MemoryLayout<T>.stride).bindMemory(to: T.self, capacity: 1)
        initialize(p)
        return p
    }

    /// ``message(_:)`` given its fields by `fill`: a nested message built where its parent's
    /// field is set (the message type is the one `initialize` takes).
    func message<T>(_ initialize: (UnsafeMutablePointer<T>?) -> Void, _ fill: (inout T) throws -> Void) rethrows -> UnsafeMutablePointer<T> {
        let p = message(initialize)
        try fill(&p.pointee)
        return p
    }

    /// A malloc'd copy of `items` (nil when empty: protobuf-c ignores the pointer when n == 0).
    func array<T>(_ items: [T]) -> UnsafeMutablePointer<T>? {
        guard !items.isEmpty else { return nil }
        let p = allocate(MemoryLayout<T>.stride * items.count).bindMemory(to: T.self, capacity: items.count)
        p.initialize(from: items, count: items.count)
        return p
    }

    /// A repeated field's count and a malloc'd copy of `items` (protobuf-c's `n_<field>`, `<field>` pair).
    func counted<T>(_ items: [T]) -> (Int, UnsafeMutablePointer<T>?) { (items.count, array(items)) }

    /// A malloc'd copy of raw bytes.
    func bytes(_ b: [UInt8]) -> UnsafeMutablePointer<UInt8>? { array(b) }

    /// A NUL-terminated UTF-8 copy of `s`.
    /// - Throws: `WriterFailure` if `s` contains a NUL character (protobuf-c strings cannot hold one).
    func string(_ s: String, _ what: @autoclosure () -> String) throws -> UnsafeMutablePointer<CChar> {
        if s.isEmpty {
            if let e = emptyString { return e }
            let e = allocate(1).bindMemory(to: CChar.self, capacity: 1)
            emptyString = e
            return e
        }
        let utf8 = s.utf8
        let n = utf8.count
        let p = allocate(n + 1).bindMemory(to: UInt8.self, capacity: n + 1)
        var i = 0
        for b in utf8 {
            if b == 0 { throw WriterFailure("\(what()) contains a NUL character, which a protobuf-c string cannot hold") }
            p[i] = b
            i += 1
        }
        p[n] = 0
        return UnsafeMutableRawPointer(p).bindMemory(to: CChar.self, capacity: n + 1)
    }
}

/// Converts a C enum raw number (as stored in the IR) to the imported C enum type.
@inline(__always)
fileprivate func cEnum<E: RawRepresentable>(_ v: Int32) -> E where E.RawValue: FixedWidthInteger {
    E(rawValue: E.RawValue(truncatingIfNeeded: v))!
}

/// Where a blob payload comes from: the source weight file and its metadata record offset.
/// Two `BlobRef`s with the same key share one record in a written `weight.bin`.
public struct BlobKey: Hashable, Sendable, CustomStringConvertible {
    /// The source file's path (the mapped `WeightFile.path`), or the reference's `fileName`
    /// when it is not resolved to a file.
    public var source: String
    public var offset: UInt64

    public init(source: String, offset: UInt64) {
        self.source = source
        self.offset = offset
    }

    /// The key of `ref` in `model`: its mapped file, else the model's weight file of that name.
    public init(_ ref: BlobRef, in model: Model) {
        let path = ref.file?.path ?? model.weightFiles[ref.fileName]?.path ?? ref.fileName
        self.init(source: path, offset: ref.offset)
    }

    public var description: String { "\(source)@\(offset)" }
}

/// Builds the protobuf-c tree of a `Model` in an arena and packs it.
struct SpecEncoder {
    let arena = ProtoArena()
    let model: Model
    /// Blob references whose key is here are rewritten to (`blobFileName`, offset).
    let blobOffsets: [BlobKey: UInt64]
    let blobFileName: String
    /// Immediate tensors written as blobs (`blobFileName`, offset) instead of inline.
    let immediateOffsets: [ImmediateBlob: UInt64]

    init(model: Model, blobOffsets: [BlobKey: UInt64], blobFileName: String, immediateOffsets: [ImmediateBlob: UInt64] = [:]) {
        self.model = model
        self.blobOffsets = blobOffsets
        self.blobFileName = blobFileName
        self.immediateOffsets = immediateOffsets
    }

    /// Serialized `Model` message bytes.
    func serialize() throws -> [UInt8] {
        let m = try encodeModel()
        let size = core_ml__specification__model__get_packed_size(m)
        return [UInt8](unsafeUninitializedCapacity: max(size, 1)) { buf, n in
            n = size == 0 ? 0 : core_ml__specification__model__pack(m, buf.baseAddress)
        }
    }

    // MARK: Model and description

    private func encodeModel() throws -> UnsafeMutablePointer<PModel> {
        let m: UnsafeMutablePointer<PModel> = arena.message(core_ml__specification__model__init)
        m.pointee.specificationversion = model.specificationVersion
        m.pointee.isupdatable = model.isUpdatable ? 1 : 0
        m.pointee.description = try encodeDescription(model.description)
        m.pointee.type_case = CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM
        m.pointee.mlprogram = try encodeProgram(model.program)
        return m
    }

    private func features(_ fs: [FeatureDescription], _ ctx: String) throws -> (Int, UnsafeMutablePointer<UnsafeMutablePointer<PFeatureDescription>?>?) {
        arena.counted(try fs.map { Optional(try encodeFeature($0, ctx)) })
    }

    private func encodeDescription(_ d: ModelDescription) throws -> UnsafeMutablePointer<PModelDescription> {
        let p: UnsafeMutablePointer<PModelDescription> = arena.message(core_ml__specification__model_description__init)
        (p.pointee.n_input, p.pointee.input) = try features(d.inputs, "description input")
        (p.pointee.n_output, p.pointee.output) = try features(d.outputs, "description output")
        (p.pointee.n_state, p.pointee.state) = try features(d.states, "description state")
        (p.pointee.n_traininginput, p.pointee.traininginput) = try features(d.trainingInputs, "description training input")
        p.pointee.predictedfeaturename = try arena.string(d.predictedFeatureName, "predictedFeatureName")
        p.pointee.predictedprobabilitiesname = try arena.string(d.predictedProbabilitiesName, "predictedProbabilitiesName")
        p.pointee.defaultfunctionname = try arena.string(d.defaultFunctionName, "defaultFunctionName")
        let fns = try d.functions.map { f -> UnsafeMutablePointer<PFunctionDescription>? in
            let fp: UnsafeMutablePointer<PFunctionDescription> = arena.message(core_ml__specification__function_description__init)
            fp.pointee.name = try arena.string(f.name, "function description name")
            (fp.pointee.n_input, fp.pointee.input) = try features(f.inputs, "function \(f.name) input")
            (fp.pointee.n_output, fp.pointee.output) = try features(f.outputs, "function \(f.name) output")
            (fp.pointee.n_state, fp.pointee.state) = try features(f.states, "function \(f.name) state")
            fp.pointee.predictedfeaturename = try arena.string(f.predictedFeatureName, "predictedFeatureName")
            fp.pointee.predictedprobabilitiesname = try arena.string(f.predictedProbabilitiesName, "predictedProbabilitiesName")
            return fp
        }
        (p.pointee.n_functions, p.pointee.functions) = arena.counted(fns)
        // An all-empty Metadata is left out (coremltools' multi-function packages have none).
        let md = d.metadata
        let emptyMetadata = md.shortDescription.isEmpty && md.versionString.isEmpty && md.author.isEmpty
            && md.license.isEmpty && md.userDefined.isEmpty
        p.pointee.metadata = emptyMetadata ? nil : try encodeMetadata(md)
        return p
    }

    private func encodeMetadata(_ md: ModelMetadata) throws -> UnsafeMutablePointer<PMetadata> {
        let p: UnsafeMutablePointer<PMetadata> = arena.message(core_ml__specification__metadata__init)
        p.pointee.shortdescription = try arena.string(md.shortDescription, "metadata shortDescription")
        p.pointee.versionstring = try arena.string(md.versionString, "metadata versionString")
        p.pointee.author = try arena.string(md.author, "metadata author")
        p.pointee.license = try arena.string(md.license, "metadata license")
        let entries = try md.userDefined.map { kv -> UnsafeMutablePointer<PUserDefinedEntry>? in
            let e: UnsafeMutablePointer<PUserDefinedEntry> = arena.message(core_ml__specification__metadata__user_defined_entry__init)
            e.pointee.key = try arena.string(kv.key, "metadata userDefined key")
            e.pointee.value = try arena.string(kv.value, "metadata userDefined['\(kv.key)']")
            return e
        }
        (p.pointee.n_userdefined, p.pointee.userdefined) = arena.counted(entries)
        return p
    }

    private func encodeFeature(_ f: FeatureDescription, _ ctx: String) throws -> UnsafeMutablePointer<PFeatureDescription> {
        let p: UnsafeMutablePointer<PFeatureDescription> = arena.message(core_ml__specification__feature_description__init)
        p.pointee.name = try arena.string(f.name, "\(ctx) name")
        p.pointee.shortdescription = try arena.string(f.shortDescription, "\(ctx) '\(f.name)' shortDescription")
        if case .unset = f.kind, !f.isOptional {
            p.pointee.type = nil
        } else {
            p.pointee.type = try encodeFeatureType(f.kind, isOptional: f.isOptional)
        }
        return p
    }

    private func sizeRange(_ r: SizeRange) -> UnsafeMutablePointer<PSizeRange> {
        let p: UnsafeMutablePointer<PSizeRange> = arena.message(core_ml__specification__size_range__init)
        p.pointee.lowerbound = UInt64(truncatingIfNeeded: r.lower)
        p.pointee.upperbound = r.upper.map { Int64($0) } ?? -1
        return p
    }

    private func encodeArrayFeature(_ a: ArrayFeature) -> UnsafeMutablePointer<PArrayFeatureType> {
        let p: UnsafeMutablePointer<PArrayFeatureType> = arena.message(core_ml__specification__array_feature_type__init)
        (p.pointee.n_shape, p.pointee.shape) = arena.counted(a.shape.map { Int64($0) })
        p.pointee.datatype = cEnum(a.rawDataType)
        switch a.flexibility {
        case .none:
            break
        case let .range(ranges):
            p.pointee.shape_flexibility_case = CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_SHAPE_RANGE
            p.pointee.shaperange = arena.message(core_ml__specification__array_feature_type__shape_range__init) {
                ($0.n_sizeranges, $0.sizeranges) = arena.counted(ranges.map { Optional(sizeRange($0)) })
            }
        case let .enumerated(shapes):
            let items = shapes.map { s in
                Optional(arena.message(core_ml__specification__array_feature_type__shape__init) {
                    ($0.n_shape, $0.shape) = arena.counted(s.map { Int64($0) })
                })
            }
            p.pointee.shape_flexibility_case = CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_ENUMERATED_SHAPES
            p.pointee.enumeratedshapes = arena.message(core_ml__specification__array_feature_type__enumerated_shapes__init) {
                ($0.n_shapes, $0.shapes) = arena.counted(items)
            }
        }
        switch a.defaultValue {
        case nil:
            break
        case let .int(v)?:
            p.pointee.default_optional_value_case = CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_INT_DEFAULT_VALUE
            p.pointee.intdefaultvalue = v
        case let .float(v)?:
            p.pointee.default_optional_value_case = CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_FLOAT_DEFAULT_VALUE
            p.pointee.floatdefaultvalue = v
        case let .double(v)?:
            p.pointee.default_optional_value_case = CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_DOUBLE_DEFAULT_VALUE
            p.pointee.doubledefaultvalue = v
        }
        return p
    }

    private func encodeFeatureType(_ kind: FeatureKind, isOptional: Bool) throws -> UnsafeMutablePointer<PFeatureType> {
        let p: UnsafeMutablePointer<PFeatureType> = arena.message(core_ml__specification__feature_type__init)
        p.pointee.isoptional = isOptional ? 1 : 0
        switch kind {
        case let .multiArray(a):
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE
            p.pointee.multiarraytype = encodeArrayFeature(a)
        case let .state(a):
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE
            p.pointee.statetype = arena.message(core_ml__specification__state_feature_type__init) {
                $0.type_case = CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE
                $0.arraytype = encodeArrayFeature(a)
            }
        case .int64:
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE
            p.pointee.int64type = arena.message(core_ml__specification__int64_feature_type__init)
        case .double:
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE
            p.pointee.doubletype = arena.message(core_ml__specification__double_feature_type__init)
        case .string:
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE
            p.pointee.stringtype = arena.message(core_ml__specification__string_feature_type__init)
        case let .image(img):
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_IMAGE_TYPE
            p.pointee.imagetype = arena.message(core_ml__specification__image_feature_type__init) { ip in
                ip.width = img.width
                ip.height = img.height
                ip.colorspace = cEnum(img.colorSpace)
                if let sizes = img.sizes {
                    let items = sizes.map { s in
                        Optional(arena.message(core_ml__specification__image_feature_type__image_size__init) {
                            $0.width = s.width
                            $0.height = s.height
                        })
                    }
                    ip.size_flexibility_case = CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_ENUMERATED_SIZES
                    ip.enumeratedsizes = arena.message(core_ml__specification__image_feature_type__enumerated_image_sizes__init) {
                        ($0.n_sizes, $0.sizes) = arena.counted(items)
                    }
                } else if img.widthRange != nil || img.heightRange != nil {
                    ip.size_flexibility_case = CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_IMAGE_SIZE_RANGE
                    ip.imagesizerange = arena.message(core_ml__specification__image_feature_type__image_size_range__init) {
                        $0.widthrange = img.widthRange.map(sizeRange)
                        $0.heightrange = img.heightRange.map(sizeRange)
                    }
                }
            }
        case let .dictionary(stringKeys):
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE
            p.pointee.dictionarytype = arena.message(core_ml__specification__dictionary_feature_type__init) {
                setStringOrInt64(&$0, string: stringKeys, \.key_type_case,
                                 (CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE, \.stringkeytype),
                                 (CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_INT64_KEY_TYPE, \.int64keytype))
            }
        case let .sequence(stringElements, range):
            p.pointee.type_case = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_SEQUENCE_TYPE
            p.pointee.sequencetype = arena.message(core_ml__specification__sequence_feature_type__init) {
                setStringOrInt64(&$0, string: stringElements, \.type_case,
                                 (CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_STRING_TYPE, \.stringtype),
                                 (CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_INT64_TYPE, \.int64type))
                $0.sizerange = range.map(sizeRange)
            }
        case .unset:
            break
        }
        return p
    }

    /// Sets the `oneof { StringFeatureType; Int64FeatureType }` of `m` (a dictionary's key
    /// type, a sequence's element type): its case field, then the one member of that case, the
    /// string one when `string`, else the int64 one. The members share a C union: only the
    /// chosen one is written.
    private func setStringOrInt64<M, Case>(
        _ m: inout M, string: Bool, _ caseField: WritableKeyPath<M, Case>,
        _ stringMember: (Case, WritableKeyPath<M, UnsafeMutablePointer<CoreML__Specification__StringFeatureType>?>),
        _ int64Member: (Case, WritableKeyPath<M, UnsafeMutablePointer<CoreML__Specification__Int64FeatureType>?>)
    ) {
        if string {
            m[keyPath: caseField] = stringMember.0
            m[keyPath: stringMember.1] = arena.message(core_ml__specification__string_feature_type__init)
        } else {
            m[keyPath: caseField] = int64Member.0
            m[keyPath: int64Member.1] = arena.message(core_ml__specification__int64_feature_type__init)
        }
    }

    // MARK: Program

    private func encodeProgram(_ prog: Program) throws -> UnsafeMutablePointer<PProgram> {
        let p: UnsafeMutablePointer<PProgram> = arena.message(core_ml__specification__milspec__program__init)
        p.pointee.version = prog.version
        p.pointee.docstring = try arena.string(prog.docString, "program docString")
        let fns = try prog.functions.map { f -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Program__FunctionsEntry>? in
            let e: UnsafeMutablePointer<CoreML__Specification__MILSpec__Program__FunctionsEntry> =
                arena.message(core_ml__specification__milspec__program__functions_entry__init)
            e.pointee.key = try arena.string(f.name, "function name")
            e.pointee.value = try encodeFunction(f)
            return e
        }
        (p.pointee.n_functions, p.pointee.functions) = arena.counted(fns)
        (p.pointee.n_attributes, p.pointee.attributes) = try attributes(
            prog.attributes, "program", core_ml__specification__milspec__program__attributes_entry__init
        ) { e, k, v in e.pointee.key = k; e.pointee.value = v }
        return p
    }

    /// A map<string, Value> as an array of entry messages, in IR order.
    private func attributes<E>(
        _ attrs: [Attribute], _ ctx: String,
        _ initialize: (UnsafeMutablePointer<E>?) -> Void, weights: Set<String> = [],
        _ set: (UnsafeMutablePointer<E>, UnsafeMutablePointer<CChar>, UnsafeMutablePointer<PValue>) -> Void
    ) throws -> (Int, UnsafeMutablePointer<UnsafeMutablePointer<E>?>?) {
        let items = try attrs.map { a -> UnsafeMutablePointer<E>? in
            let e: UnsafeMutablePointer<E> = arena.message(initialize)
            set(e, try arena.string(a.name, "\(ctx) attribute name"),
                try encodeValue(a.value, "\(ctx) attribute '\(a.name)'", weight: weights.contains(a.name)))
            return e
        }
        return arena.counted(items)
    }

    private func namedValueType(_ v: Value, _ ctx: String) throws -> UnsafeMutablePointer<PNamedValueType> {
        let p: UnsafeMutablePointer<PNamedValueType> = arena.message(core_ml__specification__milspec__named_value_type__init)
        p.pointee.name = try arena.string(v.name, "\(ctx) value name")
        p.pointee.type = try encodeType(v.type, "\(ctx) value '\(v.name)'")
        return p
    }

    private func encodeFunction(_ f: Function) throws -> UnsafeMutablePointer<PFunction> {
        let ctx = "function '\(f.name)'"
        let p: UnsafeMutablePointer<PFunction> = arena.message(core_ml__specification__milspec__function__init)
        let ins = try f.inputs.map { Optional(try namedValueType($0, "\(ctx) input")) }
        (p.pointee.n_inputs, p.pointee.inputs) = arena.counted(ins)
        p.pointee.opset = try arena.string(f.opset, "\(ctx) opset")
        var specs: [(String, Block)] = [(f.opset, f.body)]
        specs += f.otherSpecializations.map { ($0.opset, $0.block) }
        let entries = try specs.map { spec -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Function__BlockSpecializationsEntry>? in
            let e: UnsafeMutablePointer<CoreML__Specification__MILSpec__Function__BlockSpecializationsEntry> =
                arena.message(core_ml__specification__milspec__function__block_specializations_entry__init)
            e.pointee.key = try arena.string(spec.0, "\(ctx) block specialization opset")
            e.pointee.value = try encodeBlock(spec.1, "\(ctx)<\(spec.0)>")
            return e
        }
        (p.pointee.n_block_specializations, p.pointee.block_specializations) = arena.counted(entries)
        (p.pointee.n_attributes, p.pointee.attributes) = try attributes(
            f.attributes, ctx, core_ml__specification__milspec__function__attributes_entry__init
        ) { e, k, v in e.pointee.key = k; e.pointee.value = v }
        return p
    }

    private func encodeBlock(_ b: Block, _ ctx: String) throws -> UnsafeMutablePointer<PBlock> {
        let p: UnsafeMutablePointer<PBlock> = arena.message(core_ml__specification__milspec__block__init)
        let ins = try b.inputs.map { Optional(try namedValueType($0, "\(ctx) block input")) }
        (p.pointee.n_inputs, p.pointee.inputs) = arena.counted(ins)
        let outs = try b.outputs.map { Optional(try arena.string($0.name, "\(ctx) block output name")) }
        (p.pointee.n_outputs, p.pointee.outputs) = arena.counted(outs)
        let ops = try b.operations.map { Optional(try encodeOperation($0, ctx)) }
        (p.pointee.n_operations, p.pointee.operations) = arena.counted(ops)
        (p.pointee.n_attributes, p.pointee.attributes) = try attributes(
            b.attributes, "\(ctx) block", core_ml__specification__milspec__block__attributes_entry__init
        ) { e, k, v in e.pointee.key = k; e.pointee.value = v }
        return p
    }

    private func encodeOperation(_ op: Op, _ fctx: String) throws -> UnsafeMutablePointer<POperation> {
        let ctx = "\(fctx): op '\(op.name)' (\(op.type))"
        let p: UnsafeMutablePointer<POperation> = arena.message(core_ml__specification__milspec__operation__init)
        p.pointee.type = try arena.string(op.type, "\(ctx) type")
        let inputs = try op.inputs.map { input -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation__InputsEntry>? in
            let e: UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation__InputsEntry> =
                arena.message(core_ml__specification__milspec__operation__inputs_entry__init)
            e.pointee.key = try arena.string(input.name, "\(ctx) input name")
            let arg: UnsafeMutablePointer<PArgument> = arena.message(core_ml__specification__milspec__argument__init)
            let bindings = try input.operands.map { operand -> UnsafeMutablePointer<PBinding>? in
                let bp: UnsafeMutablePointer<PBinding> = arena.message(core_ml__specification__milspec__argument__binding__init)
                switch operand {
                case let .value(v):
                    bp.pointee.binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_NAME
                    bp.pointee.name = try arena.string(v.name, "\(ctx) input '\(input.name)' value name")
                case let .constant(c):
                    bp.pointee.binding_case = CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE
                    bp.pointee.value = try encodeValue(c, "\(ctx) input '\(input.name)'", weight: true)
                }
                return bp
            }
            (arg.pointee.n_arguments, arg.pointee.arguments) = arena.counted(bindings)
            e.pointee.value = arg
            return e
        }
        (p.pointee.n_inputs, p.pointee.inputs) = arena.counted(inputs)
        let outs = try op.outputs.map { Optional(try namedValueType($0, "\(ctx) output")) }
        (p.pointee.n_outputs, p.pointee.outputs) = arena.counted(outs)
        let blocks = try op.blocks.enumerated().map { Optional(try encodeBlock($0.element, "\(ctx) block \($0.offset)")) }
        (p.pointee.n_blocks, p.pointee.blocks) = arena.counted(blocks)
        // A const's `val` and iOS16 constexpr parameters may go to the weight file (ImmediateBlob).
        let weights = op.type == "const" ? ["val"] : op.type.hasPrefix("constexpr_") ? op.attributes.map(\.name).filter { $0 != "name" } : []
        (p.pointee.n_attributes, p.pointee.attributes) = try attributes(
            op.attributes, ctx, core_ml__specification__milspec__operation__attributes_entry__init, weights: Set(weights)
        ) { e, k, v in e.pointee.key = k; e.pointee.value = v }
        return p
    }

    // MARK: Types

    private func dimension(_ d: Dim, _ ctx: String) throws -> UnsafeMutablePointer<PDimension> {
        let p: UnsafeMutablePointer<PDimension> = arena.message(core_ml__specification__milspec__dimension__init)
        switch d {
        case let .fixed(n):
            guard n >= 0 else { throw WriterFailure("\(ctx): negative dimension \(n)") }
            p.pointee.dimension_case = CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_CONSTANT
            p.pointee.constant = arena.message(core_ml__specification__milspec__dimension__constant_dimension__init) {
                $0.size = UInt64(n)
            }
        case .symbol, .unknown, .variadic:
            p.pointee.dimension_case = CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_UNKNOWN
            p.pointee.unknown = arena.message(core_ml__specification__milspec__dimension__unknown_dimension__init) {
                if case .variadic = d { $0.variadic = 1 } else { $0.variadic = 0 }
            }
        }
        return p
    }

    private func encodeType(_ t: MILType, _ ctx: String) throws -> UnsafeMutablePointer<PValueType> {
        let p: UnsafeMutablePointer<PValueType> = arena.message(core_ml__specification__milspec__value_type__init)
        switch t {
        case let .tensor(tt):
            p.pointee.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
            p.pointee.tensortype = try arena.message(core_ml__specification__milspec__tensor_type__init) { m in
                m.datatype = cEnum(tt.dtype.protoCode)
                m.rank = Int64(tt.shape.count)
                (m.n_dimensions, m.dimensions) = arena.counted(try tt.shape.map { Optional(try dimension($0, ctx)) })
            }
        case let .list(elem, length):
            p.pointee.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_LIST_TYPE
            p.pointee.listtype = try arena.message(core_ml__specification__milspec__list_type__init) {
                $0.type = try encodeType(elem, ctx)
                $0.length = try dimension(length, ctx)
            }
        case let .tuple(types):
            p.pointee.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TUPLE_TYPE
            p.pointee.tupletype = try arena.message(core_ml__specification__milspec__tuple_type__init) { m in
                (m.n_types, m.types) = arena.counted(try types.map { Optional(try encodeType($0, ctx)) })
            }
        case let .dict(k, v):
            p.pointee.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_DICTIONARY_TYPE
            p.pointee.dictionarytype = try arena.message(core_ml__specification__milspec__dictionary_type__init) {
                $0.keytype = try encodeType(k, ctx)
                $0.valuetype = try encodeType(v, ctx)
            }
        case let .state(inner):
            p.pointee.type_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_STATE_TYPE
            p.pointee.statetype = try arena.message(core_ml__specification__milspec__state_type__init) {
                $0.wrappedtype = try encodeType(inner, ctx)
            }
        }
        return p
    }

    // MARK: Values

    /// - Parameter weight: `c` stands where coremltools applies its weight-file rule; an
    ///   immediate tensor listed in `immediateOffsets` is then written as a blob reference.
    private func encodeValue(_ c: ConstValue, _ ctx: String, weight: Bool = false) throws -> UnsafeMutablePointer<PValue> {
        let p: UnsafeMutablePointer<PValue> = arena.message(core_ml__specification__milspec__value__init)
        p.pointee.docstring = try arena.string(c.docString, "\(ctx) docString")
        p.pointee.type = try encodeType(c.type, ctx)
        if weight, !immediateOffsets.isEmpty, let blob = ImmediateBlob(c, specificationVersion: model.specificationVersion),
           let off = immediateOffsets[blob] {
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE
            p.pointee.blobfilevalue = try arena.message(core_ml__specification__milspec__value__blob_file_value__init) {
                $0.filename = try arena.string(blobFileName, "blob file name")
                $0.offset = off
            }
            return p
        }
        if case let .blob(ref) = c.payload {
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE
            p.pointee.blobfilevalue = try arena.message(core_ml__specification__milspec__value__blob_file_value__init) {
                if let off = blobOffsets[BlobKey(ref, in: model)] {
                    $0.filename = try arena.string(blobFileName, "blob file name")
                    $0.offset = off
                } else {
                    $0.filename = try arena.string(ref.fileName, "\(ctx) blob file name")
                    $0.offset = ref.offset
                }
            }
            return p
        }
        let imm: UnsafeMutablePointer<CoreML__Specification__MILSpec__Value__ImmediateValue> =
            arena.message(core_ml__specification__milspec__value__immediate_value__init)
        switch c.payload {
        case .blob:
            fatalError("unreachable")
        case let .tensor(storage):
            imm.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR
            imm.pointee.tensor = try encodeTensorValue(storage, ctx)
        case let .tuple(values):
            imm.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TUPLE
            imm.pointee.tuple = try arena.message(core_ml__specification__milspec__tuple_value__init) { m in
                (m.n_values, m.values) = arena.counted(try elements(values, ctx))
            }
        case let .list(values):
            imm.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_LIST
            imm.pointee.list = try arena.message(core_ml__specification__milspec__list_value__init) { m in
                (m.n_values, m.values) = arena.counted(try elements(values, ctx))
            }
        case let .dict(entries):
            let items = try entries.enumerated().map { i, kv in
                Optional(try arena.message(core_ml__specification__milspec__dictionary_value__key_value_pair__init) {
                    $0.key = try encodeValue(kv.key, "\(ctx) key \(i)")
                    $0.value = try encodeValue(kv.value, "\(ctx) value \(i)")
                })
            }
            imm.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_DICTIONARY
            imm.pointee.dictionary = arena.message(core_ml__specification__milspec__dictionary_value__init) {
                ($0.n_values, $0.values) = arena.counted(items)
            }
        }
        p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE
        p.pointee.immediatevalue = imm
        return p
    }

    /// The elements of a tuple or list value, `ctx[i]` naming each in errors.
    private func elements(_ values: [ConstValue], _ ctx: String) throws -> [UnsafeMutablePointer<PValue>?] {
        try values.enumerated().map { Optional(try encodeValue($0.element, "\(ctx)[\($0.offset)]")) }
    }

    /// Exactly the `TensorValue` field the IR holds.
    private func encodeTensorValue(_ s: TensorStorage, _ ctx: String) throws -> UnsafeMutablePointer<PTensorValue> {
        let p: UnsafeMutablePointer<PTensorValue> = arena.message(core_ml__specification__milspec__tensor_value__init)
        switch s {
        case let .floats(v):
            p.pointee.floats = repeated(core_ml__specification__milspec__tensor_value__repeated_floats__init, v)
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS
        case let .doubles(v):
            p.pointee.doubles = repeated(core_ml__specification__milspec__tensor_value__repeated_doubles__init, v)
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_DOUBLES
        case let .ints(v):
            p.pointee.ints = repeated(core_ml__specification__milspec__tensor_value__repeated_ints__init, v)
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS
        case let .longInts(v):
            p.pointee.longints = repeated(core_ml__specification__milspec__tensor_value__repeated_long_ints__init, v)
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_LONG_INTS
        case let .bools(v):
            p.pointee.bools = repeated(core_ml__specification__milspec__tensor_value__repeated_bools__init,
                                       v.map { $0 ? protobuf_c_boolean(1) : protobuf_c_boolean(0) })
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BOOLS
        case let .strings(v):
            let items = try v.map { Optional(try arena.string($0, "\(ctx) string element")) }
            p.pointee.strings = repeated(core_ml__specification__milspec__tensor_value__repeated_strings__init, items)
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_STRINGS
        case let .bytes(v):
            p.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES
            p.pointee.bytes = arena.message(core_ml__specification__milspec__tensor_value__repeated_bytes__init) {
                $0.values = ProtobufCBinaryData(len: v.count, data: arena.bytes(v))
            }
        }
        return p
    }

    /// One `TensorValue.Repeated*` message (floats, doubles, ints, long ints, bools, strings: each
    /// a `n_values` count and a `values` array) holding a copy of `values`.
    private func repeated<R: RepeatedField>(_ initialize: (UnsafeMutablePointer<R>?) -> Void, _ values: [R.Element]) -> UnsafeMutablePointer<R> {
        arena.message(initialize) { ($0.n_values, $0.values) = arena.counted(values) }
    }
}

/// The protobuf-c structs of a repeated scalar field of `TensorValue`: a count and a C array.
private protocol RepeatedField {
    associatedtype Element
    var n_values: Int { get set }
    var values: UnsafeMutablePointer<Element>! { get set }
}

extension CoreML__Specification__MILSpec__TensorValue__RepeatedFloats: RepeatedField {}
extension CoreML__Specification__MILSpec__TensorValue__RepeatedDoubles: RepeatedField {}
extension CoreML__Specification__MILSpec__TensorValue__RepeatedInts: RepeatedField {}
extension CoreML__Specification__MILSpec__TensorValue__RepeatedLongInts: RepeatedField {}
extension CoreML__Specification__MILSpec__TensorValue__RepeatedBools: RepeatedField {}
extension CoreML__Specification__MILSpec__TensorValue__RepeatedStrings: RepeatedField {}
